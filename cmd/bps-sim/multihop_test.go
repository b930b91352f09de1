// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/ethersphere/bps/pkg/treeview/treeviewtest"
)

// A small multihop run: a broker that admits four, relays of three, two
// parents, a quarter of the relays killed halfway. The tree is at least
// three deep, most nodes have two parents, the nodes that kept a parent
// lost at most an update in flight, and the picture draws every node — the
// failed relays red, with their former children — and both parents' edges.
func TestRunMultihop(t *testing.T) {
	t.Parallel()
	svgPath := filepath.Join(t.TempDir(), "tree.svg")
	args := []string{"-nodes", "40", "-cohorts", "1", "-broker-capacity", "4", "-relay-capacity", "3", "-parents", "2",
		"-latency", "2ms", "-rate", "10", "-duration", "2s", "-fail-relays", "0.25", "-probe-wait", "200ms",
		"-backoff-min", "20ms", "-backoff-max", "100ms", "-join-rate", "20", "-join-wait", "30s", "-tree", svgPath, "-json"}
	var out, stderr bytes.Buffer
	if err := run(context.Background(), args, &out, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	tr := res.Tree
	// What the nodes that kept a parent lost is the protocol's to promise
	// (SWIP-61's conformance tests); here it is measured. With a quarter of
	// the relays failing at once in a tree five deep, an update in flight
	// can miss a node whose remaining parent was itself between parents:
	// a few, at most two at one node. A node whose two parents were both
	// killed (a double failure, outside SWIP-61's promise) loses what
	// came while it rejoined, which on this wall clock is the host's load
	// as much as the protocol (a run under load 11: 12 lost at 3 such
	// nodes, none at the 29 that kept a parent): the overall ratio is
	// only held to 0.9.
	if tr.MaxDepth < 3 || tr.Parents[2] == 0 || tr.RelaysFailed == 0 || tr.KeptParent == 0 ||
		tr.MaxLostKept > 2 || res.DeliveryRatio < 0.9 || tr.JoinSide != "subscriber" {
		t.Fatalf("delivery ratio %.4f, tree %+v\n%s", res.DeliveryRatio, tr, stderr.String())
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	got := treeviewtest.Count(t, svg)
	if got.Nodes != 40 || got.Failed != tr.RelaysFailed || got.P2 == 0 || got.Lost == 0 || got.Stubs != 0 || len(got.DepthLabels) < 4 {
		t.Fatalf("tree: %d nodes, %d failed (%d killed), %d second-parent edges, %d lost, %d stubs, depths %q",
			got.Nodes, got.Failed, tr.RelaysFailed, got.P2, got.Lost, got.Stubs, got.DepthLabels)
	}
	live := 0
	for _, r := range got.Rows {
		live += r[0]
	}
	if live != 40-tr.RelaysFailed-tr.Detached {
		t.Fatalf("%d live nodes in the rows, %d failed, %d detached", live, tr.RelaysFailed, tr.Detached)
	}
}
