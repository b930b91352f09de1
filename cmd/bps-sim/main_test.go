// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/treeview"
	"github.com/ethersphere/bps/pkg/treeview/treeviewtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A small run end to end: the table, the JSON and the PNG.
func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"-nodes", "40", "-fanout", "16", "-rate", "10", "-duration", "400ms", "-latency", "5ms", "-drain", "5s",
		"-relay-capacity", "0", "-parents", "1"} // stars

	var table, stderr bytes.Buffer
	htmlPath := filepath.Join(dir, "tree.html")
	if err := run(context.Background(), append(args, "-tree", htmlPath, "-tree-cohorts", "3"), &table, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"delivery ratio  1.0000", "latency", "joins", "OK 37", "counters", "queue_reset 0", "depth"} {
		if !strings.Contains(table.String(), want) {
			t.Fatalf("table lacks %q:\n%s", want, table.String())
		}
	}

	// The tree: three stars, every node drawn, an edge from each member to
	// its broker, the depths labelled.
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	tree := treeviewtest.Count(t, page)
	if tree.Nodes != 40 || tree.P1 != 37 || tree.P2+tree.Lost+tree.Stubs+tree.Failed != 0 ||
		strings.Join(tree.DepthLabels, ",") != "depth 0,depth 1,depth 0,depth 1,depth 0,depth 1" ||
		tree.Rows[0] != [3]int{3, 3, 0} || tree.Rows[1] != [3]int{37, 37, 0} {
		t.Fatalf("tree: %d nodes, %d edges, %d second, %d lost, %d stubs, %d failed; depths %q, rows %v",
			tree.Nodes, tree.P1, tree.P2, tree.Lost, tree.Stubs, tree.Failed, tree.DepthLabels, tree.Rows)
	}

	var out bytes.Buffer
	pngPath := filepath.Join(dir, "cdf.png")
	svgPath := filepath.Join(dir, "tree.svg")
	if err := run(context.Background(), append(args, "-json", "-png", pngPath, "-tree", svgPath), &out, &stderr); err != nil {
		t.Fatalf("run -json: %v", err)
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("json: %v\n%s", err, out.String())
	}
	if res.Build.Nodes != 40 || res.Cohorts != 3 || res.Published == 0 || res.DeliveryRatio != 1 || res.InFlight != 0 ||
		res.Deliveries != res.Expected || res.Depth[1] != res.Deliveries || len(res.Latency.CDF) != cdfPoints {
		t.Fatalf("nodes %d, cohorts %d, published %d, ratio %.3f, deliveries %d of %d expected, %d in flight, depth %v, %d CDF points",
			res.Build.Nodes, res.Cohorts, res.Published, res.DeliveryRatio, res.Deliveries, res.Expected, res.InFlight, res.Depth, len(res.Latency.CDF))
	}
	if tr := res.Tree; tr.NodesByDepth[0] != 3 || tr.NodesByDepth[1] != 37 || tr.Parents[1] != 37 || tr.KeptParent != 34 ||
		tr.LostKept != 0 || tr.JoinRoundTripsP50 != 1 || tr.FloorRatioP50 < 1 || tr.WireRatio < 1 {
		t.Fatalf("tree %+v", tr)
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	if tree := treeviewtest.Count(t, svg); tree.Nodes != 14 || tree.P1 != 13 || len(tree.DepthLabels) != 2 {
		t.Fatalf("the first cohort's tree: %d nodes, %d edges, depths %q", tree.Nodes, tree.P1, tree.DepthLabels)
	}
	if res.Latency.P50 < res.Scenario.Latency*2 {
		t.Fatalf("p50 %s below two hops of %s", res.Latency.P50, res.Scenario.Latency)
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("png: %v", err)
	}
	if b := img.Bounds(); b.Dx() != plotW || b.Dy() != plotH {
		t.Fatalf("png is %v", b)
	}
}

// Churn and a broker kill: subscribers come back and rejoin, and what is
// published while they are attached reaches them. What was in flight when a
// node was killed is lost with it and counted apart; under -race on a busy
// machine an update can take longer than the grace to verify, hence 0.95.
func TestRunChurn(t *testing.T) {
	t.Parallel()
	args := []string{"-nodes", "36", "-fanout", "16", "-rate", "5", "-duration", "2s", "-latency", "2ms",
		"-churn", "10", "-downtime", "100ms", "-kill-brokers", "0.5", "-backoff-min", "20ms", "-backoff-max", "100ms", "-json",
		"-relay-capacity", "0", "-parents", "1"}
	var out, stderr bytes.Buffer
	if err := run(context.Background(), args, &out, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	if res.Churned == 0 || res.BrokersKilled != 1 {
		t.Fatalf("churned %d, brokers killed %d", res.Churned, res.BrokersKilled)
	}
	if res.Joins["OK"] <= uint64(res.Build.Streams) {
		t.Fatalf("%d joins for %d streams: nobody rejoined", res.Joins["OK"], res.Build.Streams)
	}
	if res.DeliveryRatio < 0.95 {
		t.Fatalf("delivery ratio while attached %.3f", res.DeliveryRatio)
	}
}

// TestDefaultsAreTheNodes: with no flag, every node of the simulator runs
// the options and prices of a full bee-bps node configured with no bps-*
// option (bps.NodeOptions, bps.DefaultPrices; cmd/bee-bps's
// TestNodeDefaults checks the node's flags against the same): it relays,
// keeps two parents, and charges. A flag still changes each.
func TestDefaultsAreTheNodes(t *testing.T) {
	t.Parallel()
	sc, d := DefaultScenario(), bps.NodeOptions()
	want := bps.Options{
		Bounds: bps.Bounds{
			MaxStreamsPerCohort: d.MaxStreamsPerCohort,
			QueueLen:            d.QueueLen,
		},
		Timing: bps.Timing{
			BackoffMin: d.BackoffMin,
			BackoffMax: d.BackoffMax,
		},
		Tree: bps.Tree{
			RelayCapacity: d.RelayCapacity,
			SingleParent:  d.SingleParent,
			ProbeWait:     d.ProbeWait,
		},
	}
	// What the scenario leaves zero, bps fills in with the defaults
	// NodeOptions filled in.
	if got := sc.serviceOptions(); !reflect.DeepEqual(got, want) {
		t.Errorf("the simulator's node options %+v, want the node's %+v", got, want)
	}
	if sc.prices() != bps.DefaultPrices() || sc.Fanout != d.MaxStreamsPerCohort || sc.Parents != 2 || sc.RelayCapacity == 0 {
		t.Errorf("the simulator's defaults: prices %+v, fan-out %d, %d parents, relay capacity %d; want the node's %+v, %d, 2, %d",
			sc.prices(), sc.Fanout, sc.Parents, sc.RelayCapacity, bps.DefaultPrices(), d.MaxStreamsPerCohort, d.RelayCapacity)
	}

	for _, tc := range []struct {
		args []string
		want func(Scenario) bool
	}{
		{[]string{"-relay-capacity", "0"}, func(sc Scenario) bool { return sc.RelayCapacity == 0 }},
		{[]string{"-parents", "1"}, func(sc Scenario) bool { return sc.serviceOptions().SingleParent }},
		{[]string{"-broker-capacity", "8"}, func(sc Scenario) bool { return sc.serviceOptions().MaxStreamsPerCohort == 8 }},
		{[]string{"-price=false"}, func(sc Scenario) bool { return sc.prices() == bps.Prices{} }},
		{[]string{"-delivery-price", "3"}, func(sc Scenario) bool {
			return sc.prices() == bps.Prices{Delivery: 3, Publish: bps.DefaultPrices().Publish}
		}},
	} {
		sc, err := parseFlags(tc.args, io.Discard)
		if err != nil || !tc.want(sc.Scenario) {
			t.Errorf("%q: %+v, %v", tc.args, sc.Scenario, err)
		}
	}
}

func TestFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-nodes", "2"}, {"-payload", "4"}, {"-loss", "2"}, {"extra"}, {"-latency", "soon"},
		{"-parents", "3"}, {"-fail-relays", "1.5"}, {"-relay-capacity", "-1"}} {
		var out, stderr bytes.Buffer
		if err := run(context.Background(), args, &out, &stderr); err == nil {
			t.Fatalf("%q: want an error", args)
		}
	}
}

// Depth-priced bandwidth on bee's accounting (issue 10): every delivery
// costs its subscriber the delivery price, owed to the broker, and every
// publication costs the publisher one hop; both ends agree.
func TestRunPriced(t *testing.T) {
	t.Parallel()
	args := []string{"-nodes", "20", "-fanout", "32", "-rate", "10", "-duration", "400ms", "-latency", "2ms", "-drain", "5s",
		"-delivery-price", "7", "-publish-price", "3", "-relay-capacity", "0", "-parents", "1", "-json"}
	var out, stderr bytes.Buffer
	if err := run(context.Background(), args, &out, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	pr := res.Pricing
	if pr == nil || res.Published == 0 || res.DeliveryRatio != 1 {
		t.Fatalf("pricing %+v, %d published, ratio %.3f", pr, res.Published, res.DeliveryRatio)
	}
	// Every Broadcast a publisher writes up is priced: each publisher
	// stream's claiming AUTH (SWIP-74 Rev 8: our publishers' first frame)
	// and the updates.
	want := res.Deliveries*7 + (res.Published+res.Clients["publish OK"])*3
	if pr.Debited != want || pr.Credit != want || len(pr.ByDepth) != 2 ||
		pr.ByDepth[0].Earned != float64(want) || pr.ByDepth[1].Nodes != 19 || pr.Roles[treeview.RoleBroker].Earned != want {
		t.Fatalf("charged %d, owed %d, want %d (%d deliveries, %d published); by depth %+v", pr.Debited, pr.Credit, want, res.Deliveries, res.Published, pr.ByDepth)
	}
}
