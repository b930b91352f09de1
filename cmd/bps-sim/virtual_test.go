// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"flag"
	"os"
	"reflect"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var simArgs = flag.String("sim.args", "", "TestVirtual: a bps-sim command line to run in virtual time (make sim-virtual ARGS='...')")

// TestVirtual is bps-sim in virtual time: `make sim-virtual ARGS='-nodes
// 10000'`, or go test ./cmd/bps-sim -run '^TestVirtual$' -timeout 0 -v
// -args -sim.args='-nodes 10000'. The table (and -json, -png, -tree) as
// bps-sim writes them. Without -sim.args it is skipped: a benchmark, not a
// test.
func TestVirtual(t *testing.T) {
	if *simArgs == "" {
		t.Skip("a benchmark: give it a command line with -sim.args")
	}
	c, err := parseFlags(strings.Fields(*simArgs), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	c.Virtual = true
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	res := runVirtual(t, c.Scenario)
	if err := c.output(res, os.Stdout, os.Stderr); err != nil {
		t.Fatal(err)
	}
}

// runVirtual runs sc in a synctest bubble.
func runVirtual(t *testing.T, sc Scenario) *Result {
	t.Helper()
	sc.Virtual = true
	var res *Result
	var err error
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		res, err = Run(t.Context(), sc)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d nodes in virtual time: %s of wall time", sc.Nodes, time.Since(start).Round(time.Millisecond))
	return res
}

// smallVirtual is the CI's virtual-time scenario: one cohort of 200 nodes
// on 25 ms links, relays of the node's default capacity, two parents, five
// updates.
func smallVirtual() Scenario {
	sc := DefaultScenario()
	sc.Nodes, sc.Cohorts = 200, 1
	sc.Rate, sc.Duration = 1, Dur(5*time.Second)
	sc.Latency = Dur(25 * time.Millisecond)
	return sc
}

// Where nothing contends for a processor — only the checks cost CPU, one
// per node per update, and updates come a second apart — every delivery
// takes exactly its floor: hops × (link + one check), at every depth.
func TestVirtualFloor(t *testing.T) {
	t.Parallel()
	sc := smallVirtual()
	sc.CPUWrite, sc.CPURead = 0, 0
	res := runVirtual(t, sc)
	if res.DeliveryRatio != 1 || res.Build.Subscribed != 198 {
		t.Fatalf("delivery ratio %.4f, %d subscribed", res.DeliveryRatio, res.Build.Subscribed)
	}
	if len(res.Tree.LatencyByDepth) < 2 {
		t.Fatalf("a tree of depth %d", len(res.Tree.LatencyByDepth))
	}
	hop := time.Duration(sc.Latency + sc.CPUValidate)
	for _, l := range res.Tree.LatencyByDepth {
		floor := time.Duration(1+l.Depth) * hop // the publisher is at depth 1
		if time.Duration(l.Floor) != floor || time.Duration(l.P50) != floor || time.Duration(l.P99) != floor {
			t.Errorf("depth %d: p50 %s, p99 %s, floor %s, want all %s", l.Depth, l.P50, l.P99, l.Floor, floor)
		}
	}
	if res.Virtual == nil || res.Virtual.FloorRatioP99 != 1 {
		t.Fatalf("virtual result %+v", res.Virtual)
	}
}

// The same seed gives the same run, up to the order in which goroutines
// that act at the same virtual instant are scheduled and the children a
// probe picks (Go's map order, in pkg/bps): the same overlays, keys, joins
// and publications, so the same subscribers, deliveries and tree depths,
// and latencies within what the order of a node's writes moves.
func TestVirtualSeed(t *testing.T) {
	t.Parallel()
	sc := smallVirtual()
	sc.Duration = Dur(3 * time.Second)
	one, two := runVirtual(t, sc), runVirtual(t, sc)
	sc.Seed = 2
	other := runVirtual(t, sc)
	for _, r := range []*Result{one, two, other} {
		if r.DeliveryRatio != 1 || r.Build.Subscribed != 198 || r.Published != 3 || r.Deliveries != 3*198 {
			t.Fatalf("delivery ratio %.4f, %d subscribed, %d published, %d deliveries", r.DeliveryRatio, r.Build.Subscribed, r.Published, r.Deliveries)
		}
	}
	nodes := func(r *Result) []string {
		var out []string
		for _, n := range r.Trees[0].Nodes {
			out = append(out, n.Overlay)
		}
		slices.Sort(out)
		return out
	}
	if !slices.Equal(nodes(one), nodes(two)) || slices.Equal(nodes(one), nodes(other)) {
		t.Fatal("the seed does not decide the overlays")
	}
	if !reflect.DeepEqual(one.Tree.NodesByDepth, two.Tree.NodesByDepth) {
		t.Fatalf("same seed, depths %v and %v", one.Tree.NodesByDepth, two.Tree.NodesByDepth)
	}
	// Latency is the links' and the checks', the same in both runs, and
	// the writes': the broker's 64 writes of an update, and a relay's 16,
	// are served in the order its writers reach its processor.
	slack := (64 + 2*16) * time.Duration(sc.CPUWrite)
	for _, p := range [][2]Dur{{one.Latency.P50, two.Latency.P50}, {one.Latency.P99, two.Latency.P99}, {one.Latency.Mean, two.Latency.Mean}} {
		if d := time.Duration(p[0] - p[1]); d > slack || d < -slack {
			t.Errorf("same seed, latency %s and %s", p[0], p[1])
		}
	}
}
