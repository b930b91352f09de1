// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// smallConfig is a run that takes a second or two: a handful of nodes,
// a few messages, short links.
func smallConfig() config {
	return config{
		sizes:    []int{4},
		messages: 4,
		warmup:   1,
		rate:     50,
		budget:   1000,
		size:     1024,
		latency:  time.Millisecond,
		dials:    3,
		drain:    10 * time.Second,
		meshWait: 5 * time.Second,
		idle:     100 * time.Millisecond,
		seed:     1,
		systems:  map[string]bool{"bps": true, "gossipsub": true},
		tree:     true,
		fanout:   2,
		relayCap: 2,
		parents:  2,
		joinPar:  4,
	}
}

// TestRunBPS runs pkg/bps over the libp2p adapter and checks the tally: every
// subscriber gets every message once, and the counters moved.
func TestRunBPS(t *testing.T) {
	cfg := smallConfig()
	r, err := runBPS(t.Context(), cfg, 4, false)
	if err != nil {
		t.Fatal(err)
	}
	if r.delivered != r.expected || r.expected != 16 {
		t.Fatalf("delivered %d of %d, want 16 of 16", r.delivered, r.expected)
	}
	if r.duplicates != 0 {
		t.Fatalf("%d duplicate receptions, want none", r.duplicates)
	}
	// A 1 KB update is one frame of about 1.2 KB per subscriber, plus the
	// publisher's copy to the broker.
	if per := r.bytesPer(); per < 1100 || per > 1600 {
		t.Fatalf("%.0f bytes per delivery, want a 1 KB frame and its share of the publisher's", per)
	}
	if r.p50 < cfg.latency*2 {
		t.Fatalf("p50 %s is below two links of %s", r.p50, cfg.latency)
	}
	if r.cpu <= 0 {
		t.Fatal("no CPU time measured")
	}
}

// TestRunBPSTree runs a multihop tree: a broker taking 2 children, relays
// taking 2, two parents. Of 8 subscribers the broker's 2 children keep one
// parent and the other 6 take two, so a delivery is received about 1.75
// times: every message reaches every subscriber once, the rest is dropped
// as a duplicate.
func TestRunBPSTree(t *testing.T) {
	cfg := smallConfig()
	r, err := runBPS(t.Context(), cfg, 8, true)
	if err != nil {
		t.Fatal(err)
	}
	if r.delivered != r.expected || r.expected != 32 {
		t.Fatalf("delivered %d of %d, want 32 of 32; notes %v", r.delivered, r.expected, r.notes)
	}
	if !strings.Contains(strings.Join(r.notes, ";"), "tree: 2 at the root") {
		t.Fatalf("the broker should hold exactly its 2 children: %v", r.notes)
	}
	if per := float64(r.duplicates) / float64(r.delivered); per < 0.5 || per > 1 {
		t.Fatalf("%.2f duplicates per delivery, want about 0.75 (6 of 8 nodes with two parents); notes %v", per, r.notes)
	}
	if r.p50 < cfg.latency*2 {
		t.Fatalf("p50 %s is below two links of %s", r.p50, cfg.latency)
	}
}

// TestRunGossipsub runs gossipsub on the same transport.
func TestRunGossipsub(t *testing.T) {
	cfg := smallConfig()
	r, err := runGossipsub(t.Context(), cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	if r.delivered != r.expected || r.expected != 16 {
		t.Fatalf("delivered %d of %d, want 16 of 16", r.delivered, r.expected)
	}
	if r.bytesPer() < 1024 {
		t.Fatalf("%.0f bytes per delivery, less than the payload", r.bytesPer())
	}
	if r.p50 < cfg.latency {
		t.Fatalf("p50 %s is below one link of %s", r.p50, cfg.latency)
	}
}

// TestRunPrintsRatios runs both and checks the report names every column
// and a ratio row.
func TestRunPrintsRatios(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), &out, smallConfig()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 4 | BPS star |", "| 4 | BPS tree |", "| 4 | gossipsub |", "| 4 | tree |", "duplicates/delivery", "bytes/delivery", "CPU/delivery", "Ratios BPS/gossipsub"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-n", "10, 20", "-rate", "5"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.sizes) != 2 || cfg.sizes[1] != 20 || cfg.rate != 5 {
		t.Fatalf("parsed %+v", cfg)
	}
	if !cfg.tree || cfg.fanout != 16 || cfg.relayCap != 16 || cfg.parents != 2 || !cfg.systems["bps"] || !cfg.systems["gossipsub"] {
		t.Fatalf("defaults: %+v", cfg)
	}
	if cfg, err = parseFlags([]string{"-bps-tree=false", "-systems", "gossipsub"}); err != nil || cfg.tree || cfg.systems["bps"] {
		t.Fatalf("-bps-tree=false -systems gossipsub: %+v, %v", cfg, err)
	}
	for _, bad := range [][]string{{"-n", "0"}, {"-n", "x"}, {"-size", "5000"}, {"-rate", "0"}, {"-messages", "0"},
		{"-bps-parents", "3"}, {"-bps-fanout", "0"}, {"-systems", "floodsub"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}
