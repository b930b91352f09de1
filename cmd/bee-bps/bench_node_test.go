// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestBenchNodeFlags(t *testing.T) {
	ok := benchNodeFlags{cluster: "c.json", subscribers: "1, 5", messages: 200, warmup: 5, rate: 20, size: 64, rounds: 2, idle: time.Second, drain: time.Second, joinTimeout: time.Second}
	f := ok
	if err := f.check(); err != nil {
		t.Fatal(err)
	}
	if len(f.counts) != 2 || f.counts[0] != 1 || f.counts[1] != 5 {
		t.Fatalf("counts %v, want [1 5]", f.counts)
	}
	for name, mut := range map[string]func(*benchNodeFlags){
		"no nodes":         func(f *benchNodeFlags) { f.cluster = "" },
		"one api":          func(f *benchNodeFlags) { f.cluster, f.apis = "", []string{"http://a"} },
		"zero subscribers": func(f *benchNodeFlags) { f.subscribers = "0" },
		"bad subscribers":  func(f *benchNodeFlags) { f.subscribers = "1,x" },
		"no messages":      func(f *benchNodeFlags) { f.messages = 0 },
		"no warm-up":       func(f *benchNodeFlags) { f.warmup = 0 },
		"zero rate":        func(f *benchNodeFlags) { f.rate = 0 },
		"small payload":    func(f *benchNodeFlags) { f.size = 7 },
		"large payload":    func(f *benchNodeFlags) { f.size = 4097 },
		"no rounds":        func(f *benchNodeFlags) { f.rounds = 0 },
		"negative idle":    func(f *benchNodeFlags) { f.idle = -time.Second },
		"unknown server":   func(f *benchNodeFlags) { f.server = "gossipsub" },
		"pr5435 cluster":   func(f *benchNodeFlags) { f.server = serverPR5435 },
		"one pr5435 api":   func(f *benchNodeFlags) { f.pr5435 = []string{"http://a"} },
	} {
		f := ok
		mut(&f)
		if err := f.check(); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
	f = ok
	f.cluster, f.apis = "", []string{"http://a", "http://b"}
	if err := f.check(); err != nil {
		t.Fatalf("two --api: %v", err)
	}
}

func TestParseProcStat(t *testing.T) {
	const metrics = `# HELP bee_process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE bee_process_cpu_seconds_total counter
bee_process_cpu_seconds_total 3.13
bee_process_max_fds 20000
bee_process_start_time_seconds 1.79611280491e+09
go_goroutines 12
`
	st, err := parseProcStat(strings.NewReader(metrics))
	if err != nil {
		t.Fatal(err)
	}
	if st.cpu != 3130*time.Millisecond || st.start != 1.79611280491e+09 {
		t.Fatalf("parsed %+v", st)
	}
	// A registry without the bee namespace reads the same.
	if st, err = parseProcStat(strings.NewReader("process_cpu_seconds_total 1.5\nprocess_start_time_seconds 7\n")); err != nil || st.cpu != 1500*time.Millisecond {
		t.Fatalf("unprefixed: %+v, %v", st, err)
	}
	for name, bad := range map[string]string{
		"no cpu":    "bee_process_start_time_seconds 7\n",
		"no start":  "bee_process_cpu_seconds_total 1\n",
		"bad value": "bee_process_cpu_seconds_total x\nbee_process_start_time_seconds 7\n",
	} {
		if _, err := parseProcStat(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: want an error", name)
		}
	}
}

func TestSchedCPU(t *testing.T) {
	dir := t.TempDir()
	for tid, stat := range map[string]string{"1": "1000 5 7\n", "2": "123 0 0\n"} {
		if err := os.MkdirAll(filepath.Join(dir, "task", tid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "task", tid, "schedstat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if cpu, err := schedCPU(dir); err != nil || cpu != 1123 {
		t.Fatalf("schedCPU = %v, %v; want 1.123µs, the threads' sum", cpu, err)
	}
	if _, err := os.Stat("/proc/self/task"); err == nil {
		if cpu, err := schedCPU("/proc/self"); err != nil || cpu <= 0 {
			t.Fatalf("this process: %v, %v", cpu, err)
		}
	}
	if _, err := schedCPU(filepath.Join(dir, "none")); err == nil {
		t.Fatal("no such process: want an error")
	}
}

func TestBenchNodeSubscriberNodes(t *testing.T) {
	nodes := []benchNode{{name: "broker"}, {name: "node-1"}, {name: "node-2"}, {name: "node-3"}}
	var got []string
	for i := range 4 {
		got = append(got, subscriberNode(nodes, i).name)
	}
	if strings.Join(got, ",") != "node-2,node-3,node-2,node-3" {
		t.Fatalf("subscribers on %v, want the nodes after the publisher's in turn", got)
	}
	if n := subscriberNode(nodes[:2], 3).name; n != "node-1" {
		t.Fatalf("in a cluster of two the subscribers share the publisher's node, got %s", n)
	}
}

// TestBenchNodeDevCluster runs bench-node against an in-process dev
// cluster of three nodes: one subscriber, ten messages, one round.
func TestBenchNodeDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three bee nodes")
	}
	info := filepath.Join(t.TempDir(), "bps-dev.json")
	ready := make(chan devCluster, 1)
	c, err := newCommand(func(c *command) {
		c.homeDir = t.TempDir()
		c.devReady = func(d devCluster) { ready <- d }
	})
	if err != nil {
		t.Fatal(err)
	}
	out := new(lockedBuffer)
	c.root.SetOut(out)
	c.root.SetErr(out)
	c.root.SetArgs([]string{"dev", "--nodes", "3", "--api-addr", "127.0.0.1:0", "--verbosity", "0", "--info-file", info})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.root.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("dev: %v\n%s", err, out)
		}
	}()
	select {
	case <-ready:
	case err := <-done:
		done <- err
		t.Fatalf("dev returned %v:\n%s", err, out)
	case <-time.After(3 * time.Minute):
		t.Fatalf("no cluster after three minutes:\n%s", out)
	}

	b, err := newCommand(func(c *command) { c.homeDir = t.TempDir() })
	if err != nil {
		t.Fatal(err)
	}
	res := new(lockedBuffer)
	b.root.SetOut(res)
	b.root.SetErr(res)
	b.root.SetArgs([]string{"bench-node", "--cluster", info, "--subscribers", "1", "--messages", "10", "--rate", "50", "--rounds", "1", "--idle", "200ms"})
	if err := b.root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("bench-node: %v\n%s", err, res)
	}
	for _, want := range []string{"| BPS | 1 | 1 | 10/10 |", "shares its process with node-1, node-2", "BPS, medians over the rounds", "| signed p50 | signed p99 |"} {
		if !strings.Contains(res.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, res)
		}
	}
	// The signed clock starts before the frame is built and signed, the
	// other once it is: message by message the signed latency is the longer,
	// so is each of its quantiles.
	row := regexp.MustCompile(`\| BPS \| 1 \| 1 \| 10/10 \| ([0-9.]+) ms \| ([0-9.]+) ms \|.*\| ([0-9.]+) ms \| ([0-9.]+) ms \|\n`).FindStringSubmatch(res.String())
	if row == nil {
		t.Fatalf("no run's row with both clocks:\n%s", res)
	}
	ms := make([]float64, 4)
	for i := range ms {
		if ms[i], err = strconv.ParseFloat(row[i+1], 64); err != nil {
			t.Fatal(err)
		}
	}
	if ms[2] < ms[0] || ms[3] < ms[1] || ms[2] == 0 {
		t.Errorf("signed p50 %.2f ms, p99 %.2f ms; written p50 %.2f ms, p99 %.2f ms: the signed clock, started earlier, must read no less (and more than 0)", ms[2], ms[3], ms[0], ms[1])
	}
}
