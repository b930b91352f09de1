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
		systems:  "bps,gossipsub",
	}
}

// TestRunBPS runs pkg/bps over the libp2p adapter and checks the tally: every
// subscriber gets every message once, and the counters moved.
func TestRunBPS(t *testing.T) {
	cfg := smallConfig()
	r, err := runBPS(t.Context(), cfg, 4)
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
	for _, want := range []string{"| 4 | BPS |", "| 4 | gossipsub |", "duplicates/delivery", "bytes/delivery", "CPU/delivery", "Ratios BPS/gossipsub"} {
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
	for _, bad := range [][]string{{"-n", "0"}, {"-n", "x"}, {"-size", "5000"}, {"-rate", "0"}, {"-messages", "0"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}
