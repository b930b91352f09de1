// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A small run end to end: the table, the JSON and the PNG.
func TestRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := []string{"-nodes", "40", "-fanout", "16", "-rate", "10", "-duration", "400ms", "-latency", "5ms", "-drain", "5s"}

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
	tree := countSVG(t, page)
	if tree.nodes != 40 || tree.p1 != 37 || tree.p2+tree.lost+tree.stubs+tree.failed != 0 ||
		strings.Join(tree.depthLabels, ",") != "depth 0,depth 1,depth 0,depth 1,depth 0,depth 1" ||
		tree.rows[0] != [3]int{3, 3, 0} || tree.rows[1] != [3]int{37, 37, 0} {
		t.Fatalf("tree: %d nodes, %d edges, %d second, %d lost, %d stubs, %d failed; depths %q, rows %v",
			tree.nodes, tree.p1, tree.p2, tree.lost, tree.stubs, tree.failed, tree.depthLabels, tree.rows)
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
	if tree := countSVG(t, svg); tree.nodes != 14 || tree.p1 != 13 || len(tree.depthLabels) != 2 {
		t.Fatalf("the first cohort's tree: %d nodes, %d edges, depths %q", tree.nodes, tree.p1, tree.depthLabels)
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
		"-churn", "10", "-downtime", "100ms", "-kill-brokers", "0.5", "-backoff-min", "20ms", "-backoff-max", "100ms", "-json"}
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
		"-delivery-price", "7", "-publish-price", "3", "-json"}
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
	want := res.Deliveries*7 + res.Published*3
	if pr.Debited != want || pr.Credit != want || len(pr.ByDepth) != 2 ||
		pr.ByDepth[0].Earned != float64(want) || pr.ByDepth[1].Nodes != 19 || pr.Roles[roleBroker].Earned != want {
		t.Fatalf("charged %d, owed %d, want %d (%d deliveries, %d published); by depth %+v", pr.Debited, pr.Credit, want, res.Deliveries, res.Published, pr.ByDepth)
	}
}
