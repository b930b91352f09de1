// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/wsclient"
)

// crashDeadline bounds the whole crash run once the processes are built.
const crashDeadline = 150 * time.Second

// crashNode is one `bee-bps start` process of the crash test: a relay
// candidate, killed with SIGKILL at most once.
type crashNode struct {
	cmd     *exec.Cmd
	dead    chan struct{} // closed when the process has exited
	exit    error         // how it exited; read after dead
	out     *lineWatch
	api     string
	overlay string
	killed  bool
	from    int // the first message it must receive: the next one sent once it attached

	mu   sync.Mutex
	got  map[int]time.Time // message number → when it arrived
	sub  *wsclient.Session
	done chan struct{} // closed when the reader of sub returned
}

// launch runs `bee-bps start` as a child process joining cl through its
// broker, as a relay of capacity 2, with its API on a port the kernel picks
// (up reads it from what the node prints: a port picked free by the test
// may be bound by another process before the node binds it); the process
// is killed when the test ends.
func launch(t *testing.T, bin string, cl devCluster) (*crashNode, error) {
	args := append(cl.join("127.0.0.1:0"), "--"+optionNameBPSRelayCapacity, "2", "--verbosity", "0")
	n := &crashNode{dead: make(chan struct{}), got: make(map[int]time.Time),
		out: &lineWatch{seen: make(chan struct{})}}
	n.cmd = exec.Command(bin, args...)
	n.cmd.Stdout, n.cmd.Stderr = n.out, n.out
	// Killed with the test process too, should that die before its
	// cleanups run.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { n.exit = n.cmd.Wait(); close(n.dead) }()
	t.Cleanup(func() {
		// Every process ends with the test, killed: none outlives it.
		_ = n.cmd.Process.Kill()
		<-n.dead
	})
	return n, nil
}

// up waits until n's API answers with its overlay.
func (n *crashNode) up(ctx context.Context, t *testing.T) {
	t.Helper()
	waitFor(ctx, t, "node up", func() bool {
		select {
		case <-n.dead:
			t.Fatalf("bee-bps start exited: %v\n%s", n.exit, n.out)
		default:
		}
		if n.api == "" {
			if n.api = printedAPI(n.out.String()); n.api == "" {
				return false
			}
		}
		var addrs struct {
			Overlay string `json:"overlay"`
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.api+"/addresses", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&addrs) != nil {
			return false
		}
		n.overlay = addrs.Overlay
		return n.overlay != ""
	})
}

// printedAPI is the API URL a bee-bps start printed once it was up
// (printNode: "  api      http://…"), empty before.
func printedAPI(out string) string {
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "  api "); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// startJoined launches one node and waits until it is up.
func startJoined(ctx context.Context, t *testing.T, bin string, cl devCluster) *crashNode {
	t.Helper()
	n, err := launch(t, bin, cl)
	if err != nil {
		t.Fatal(err)
	}
	n.up(ctx, t)
	return n
}

// subscribe opens n's WebSocket session and reads it, recording each
// numbered message, until the session ends.
func (n *crashNode) subscribe(ctx context.Context, t *testing.T, o wsclient.Options) {
	t.Helper()
	o.API = n.api
	var s *wsclient.Session
	waitFor(ctx, t, "subscribe on "+n.api, func() bool {
		var err error
		s, err = wsclient.Subscribe(ctx, o)
		return err == nil
	})
	n.sub, n.done = s, make(chan struct{})
	t.Cleanup(func() { _ = s.Close(); <-n.done })
	go func() {
		defer close(n.done)
		for {
			m, err := s.NextMessage(ctx)
			if err != nil {
				return
			}
			k, err := strconv.Atoi(strings.TrimPrefix(string(m.Payload), "crash-"))
			if err != nil {
				continue
			}
			n.mu.Lock()
			n.got[k] = time.Now()
			n.mu.Unlock()
		}
	}()
}

// missing lists the messages of [from, to) n has not received, and the
// longest run of consecutive ones.
func (n *crashNode) missing(from, to int) (missed []int, longest int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	run := 0
	for k := from; k < to; k++ {
		if _, ok := n.got[k]; ok {
			run = 0
			continue
		}
		missed = append(missed, k)
		run++
		longest = max(longest, run)
	}
	return missed, longest
}

// TestRelayCrashProcesses is SWIP-61's masked single failure on real
// processes: a tree of separate `bee-bps start` processes (relay capacity
// 2) under a dev cluster's broker (two streams per cohort), a publisher at
// the broker sending ten messages a second, and relays killed with SIGKILL
// one after another — no graceful leave, no cut through the API: the
// kernel closes the dead process's connections. Each kill is a single
// failure: a relay whose children all hold a second parent. Every node but
// the killed ones receives every message, and the parents never form a
// cycle (before the fix, a repair attached a relay under its own
// descendant within the first kills); a killed node is replaced by a fresh
// one, so that the tree keeps reshaping.
func TestRelayCrashProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts bee node processes")
	}
	const (
		nodes = 7 // start processes besides the broker
		kills = 5
		rate  = 100 * time.Millisecond
	)
	bin := buildDevBinary(t)
	info := filepath.Join(t.TempDir(), "cluster.json")
	cl := runDevBinary(t, bin, "", info, "dev", "--"+optionNameDevInfoFile, info, "--nodes", "1", "--api-addr", "127.0.0.1:0",
		"--verbosity", "0", "--bps-max-streams-per-cohort", "3", "--bps-relay-capacity", "2")
	ctx, cancel := context.WithTimeout(context.Background(), crashDeadline)
	defer cancel()

	broker := cl.Nodes[0]
	admin := newSWIP60Key(t)
	o := wsclient.Options{Peer: broker.Underlays[0], Topic: swip60Topic("e2e-crash"), Binding: wsclient.BindingMnemonic,
		Admin: admin.addr, Publishers: wsclient.PublishersAll, Fields: "address,payload"}

	var ns []*crashNode
	var mu sync.Mutex
	start := func() *crashNode {
		n := startJoined(ctx, t, bin, cl)
		mu.Lock()
		ns = append(ns, n)
		mu.Unlock()
		return n
	}
	// The processes start side by side; the test waits for each.
	for range nodes {
		n, err := launch(t, bin, cl)
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
	}
	for _, n := range ns {
		n.up(ctx, t)
	}
	// The publisher is on the first node, its stream one of the broker's
	// three (a node does not join its own cohorts, so the broker cannot
	// host it); that node is never killed. Then the subscribers, one at a
	// time, so that the tree grows in depth.
	ns[0].subscribe(ctx, t, o)
	waitAttached(ctx, t, ns[0])
	author := newSWIP60Key(t)
	po := o
	po.API = ns[0].api
	pub, err := wsclient.Publish(ctx, po, author.signer)
	if err != nil {
		t.Fatalf("publish on %s: %v", ns[0].overlay[:8], err)
	}
	defer pub.Close()
	for _, n := range ns[1:] {
		n.subscribe(ctx, t, o)
		waitAttached(ctx, t, n)
	}
	logTree(ctx, t, ns, broker.Overlay)

	sent := 0
	var sentMu sync.Mutex
	stop := make(chan struct{})
	pubDone := steadily(ctx, rate, stop, func() error {
		sentMu.Lock()
		k := sent
		sentMu.Unlock()
		what := fmt.Sprintf("crash-%d", k)
		if err := pub.SendUpdate(author.signer, uint64(k), []byte(what)); err != nil {
			return err
		}
		sentMu.Lock()
		sent++
		sentMu.Unlock()
		return nil
	})
	sentNow := func() int {
		sentMu.Lock()
		defer sentMu.Unlock()
		return sent
	}
	awaitSent := func(k int) {
		waitFor(ctx, t, fmt.Sprintf("%d messages sent", k), func() bool { return sentNow() >= k })
	}

	awaitSent(20)
	killed := 0
	for range kills {
		// A single failure, as SWIP-61 promises to mask: a relay with
		// children, each of which has a second parent. Repairs after the
		// last kill may take a moment to give every node two parents
		// again (or the tree may have no room left outside a node's own
		// subtree): the test waits for such a relay a while.
		var victim *crashNode
		pick, stopPick := context.WithTimeout(ctx, 20*time.Second)
		for victim == nil && pick.Err() == nil {
			entries := make(map[*crashNode]treeEntry)
			for _, n := range ns {
				if !n.killed {
					n.alive(t)
					entries[n], _ = treeEntryOf(ctx, t, n.api)
				}
			}
			for _, n := range ns[1:] {
				e, ok := entries[n]
				if n.killed || !ok || e.Children == 0 || len(e.Parents) == 0 {
					continue
				}
				covered := true
				for m, f := range entries {
					if slices.Contains(f.Parents, n.overlay) && len(f.Parents) < 2 && m != ns[0] {
						covered = false
					}
				}
				if covered {
					victim = n
					break
				}
			}
			if victim == nil {
				select {
				case <-pick.Done():
				case <-time.After(200 * time.Millisecond):
				}
			}
		}
		stopPick()
		if victim == nil {
			break
		}
		killed++
		t.Logf("SIGKILL %s at message %d", victim.overlay[:8], sentNow())
		victim.killed = true
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		// The repairs run while messages flow; then a fresh node takes the
		// dead one's place, joining the tree that is left.
		awaitSent(sentNow() + 50)
		n := start()
		n.subscribe(ctx, t, o)
		waitAttached(ctx, t, n)
		n.from = sentNow() + 1
		awaitSent(sentNow() + 20)
		logTree(ctx, t, ns, broker.Overlay)
	}
	if killed < 3 {
		logTree(ctx, t, ns, broker.Overlay)
		t.Fatalf("%d relays killed: no relay whose children all have a second parent", killed)
	}
	close(stop)
	if err := <-pubDone; err != nil {
		t.Fatalf("publisher: %v", err)
	}
	total := sentNow()
	// Every node never killed has every message from the one after it
	// attached; allow the last ones time to arrive.
	for _, n := range ns {
		if n.killed {
			continue
		}
		waitFor(ctx, t, fmt.Sprintf("the last message at %s", n.overlay[:8]), func() bool {
			n.mu.Lock()
			defer n.mu.Unlock()
			_, ok := n.got[total-1]
			return ok
		})
	}
	for _, n := range ns {
		if n.killed {
			continue
		}
		missed, longest := n.missing(n.from, total)
		t.Logf("node %s: %d of messages %d-%d, longest gap %d", n.overlay[:8], total-n.from-len(missed), n.from, total-1, longest)
		if len(missed) > 0 {
			t.Errorf("node %s (never killed) missed %d of messages %d-%d, %d in a row: %v", n.overlay[:8], len(missed), n.from, total-1, longest, missed)
		}
	}
	t.Logf("%d messages, %d relays killed", total, killed)
}

// alive fails the test if n's process exited.
func (n *crashNode) alive(t *testing.T) {
	t.Helper()
	select {
	case <-n.dead:
		out := n.out.String()
		t.Fatalf("node %s exited (%v):\n%s", n.overlay[:8], n.exit, out[max(0, len(out)-8000):])
	default:
	}
}

// waitAttached waits until n's entry for the cohort names a parent.
func waitAttached(ctx context.Context, t *testing.T, n *crashNode) {
	t.Helper()
	waitFor(ctx, t, "node "+n.overlay[:8]+" attached", func() bool {
		e, ok := treeEntryOf(ctx, t, n.api)
		return ok && len(e.Parents) > 0
	})
}

// logTree logs every live node's place in the tree and fails the test if
// the parents form a cycle: nodes on a cycle keep each other attached and,
// once no path from the broker is left, receive nothing and repair nothing.
// ns[0] hosts the publisher, whose stream may attach anywhere in the tree:
// its subscription's parent is the broker.
func logTree(ctx context.Context, t *testing.T, ns []*crashNode, broker string) {
	t.Helper()
	parents := make(map[string][]string)
	defer func() {
		if c := findCycle(parents); c != nil {
			t.Errorf("the parents form a cycle: %v", c)
		}
	}()
	for _, n := range ns {
		if n.killed {
			continue
		}
		n.alive(t)
		e, _ := treeEntryOf(ctx, t, n.api)
		var ps []string
		for _, p := range e.Parents {
			ps = append(ps, p[:min(8, len(p))])
		}
		t.Logf("%s: depth %d, parents %v, children %d", n.overlay[:8], e.Depth, ps, e.Children)
		parents[n.overlay] = e.Parents
	}
	parents[ns[0].overlay] = []string{broker}
}

// findCycle returns the overlays on a cycle of the parent relation, nil if
// there is none.
func findCycle(parents map[string][]string) []string {
	const (
		unseen = iota
		open
		closed
	)
	state := make(map[string]int)
	var path []string
	var visit func(n string) []string
	visit = func(n string) []string {
		switch state[n] {
		case open:
			i := slices.Index(path, n)
			return append(slices.Clone(path[i:]), n)
		case closed:
			return nil
		}
		state[n] = open
		path = append(path, n)
		for _, p := range parents[n] {
			if c := visit(p); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[n] = closed
		return nil
	}
	for n := range parents {
		if c := visit(n); c != nil {
			for i := range c {
				c[i] = c[i][:min(8, len(c[i]))]
			}
			return c
		}
	}
	return nil
}
