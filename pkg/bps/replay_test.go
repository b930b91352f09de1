// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// TestCutOffNodeLosesNothing is issue 26's cut-off node: v hangs on a by
// its one parent (the tree has no room for a second), a dies, and what is
// published while v attaches again passes every live node but v. v asks
// the parent it attaches to for what it missed (Join.replay_ms) and gets
// every update, once, in order: 0 lost at a node that was not killed.
// v's link to the broker, where it attaches again, is slow, so that the
// updates published after a died are all in before v's Join.
func TestCutOffNodeLosesNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// broker (1 stream) → a (1 child) → v.
		mt := newMTreeWith(t, 2, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Timing: bps.Timing{Inactivity: time.Hour}}, 1,
			func(a key) *bps.Spec { return feedSpec(t, "cut-off-replay", a) })
		mt.subscribeAll()
		a, v := mt.nodes[0], mt.nodes[1]
		sub := mt.subs[1]
		if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(a.Overlay()) {
			t.Fatalf("v's parents %v, want a alone", ps)
		}
		if err := mt.net.SetLink(v.Node, mt.broker.Node, streamtest.LinkConfig{Latency: 200 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		p := mt.adminPublisher()
		mt.publishN(p, 0, 5)
		expectUpdates(t, sub, 0, 5)

		before := v.rec.count(parentOK)
		mt.net.Remove(a.Node)
		mt.publishN(p, 5, 10) // v has no parent
		synctest.Wait()
		v.rec.waitN(t, before+1, "v attached again", parentOK)
		mt.publishN(p, 10, 15)
		expectUpdates(t, sub, 5, 15)
		if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(mt.broker.Overlay()) {
			t.Fatalf("v's parents %v, want the broker, whose slot a left", ps)
		}
		if got := sub.Received(); got != 15 {
			t.Fatalf("v received %d updates, want 15", got)
		}
		if n := metricValue(t, mt.broker.svc, "replayed"); n < 5 {
			t.Fatalf("the broker replayed %v deliveries, want at least the 5 v missed", n)
		}
	})
}

// TestCutOffSubtreeLosesNothing is the same with a subtree: the broker has
// room for one child, a, so every other node hangs on a — by its one
// parent, or by two parents that both do. a dies; the nodes left parentless
// attach again with a replay, and pass what was new to them on to their
// children, which asked nothing: every live node gets every update, once,
// in order.
func TestCutOffSubtreeLosesNothing(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mt := newMTreeWith(t, 5, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Timing: bps.Timing{Inactivity: time.Hour}}, 2,
			func(a key) *bps.Spec { return feedSpec(t, "cut-off-subtree-replay", a) })
		mt.subscribeAll()
		a := mt.nodes[0]
		if ps := mt.subs[0].Parents(); len(ps) != 1 || !ps[0].Equal(mt.broker.Overlay()) {
			t.Fatalf("a's parents %v, want the broker", ps)
		}
		twoParents := 0
		for i, sub := range mt.subs[1:] {
			if len(sub.Parents()) == 2 {
				twoParents++
			}
			if err := mt.net.SetLink(mt.nodes[i+1].Node, mt.broker.Node, streamtest.LinkConfig{Latency: 200 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
		}
		if twoParents == 0 {
			t.Fatal("no node below a has two parents: the test needs one cut off by both")
		}
		p := mt.adminPublisher()
		mt.publishN(p, 0, 5)
		for _, sub := range mt.subs[1:] {
			expectUpdates(t, sub, 0, 5)
		}

		for i, nd := range mt.nodes {
			t.Logf("node %d %s: parents %v", i, nd.Overlay(), mt.subs[i].Parents())
		}
		mt.net.Remove(a.Node)
		mt.publishN(p, 5, 10) // every node but a hung on a
		synctest.Wait()
		cut := time.Now()
		for i, sub := range mt.subs[1:] { // the repairs, in the bubble's time
			for len(sub.Parents()) == 0 {
				if time.Since(cut) > time.Minute {
					t.Fatalf("node %d has no parent a minute after a died", i+1)
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		t.Logf("every node attached again %s after a died", time.Since(cut))
		mt.publishN(p, 10, 15)
		for i, sub := range mt.subs[1:] {
			t.Logf("node %d: parents %v", i+1, sub.Parents())
			expectUpdates(t, sub, 5, 15)
			if got := sub.Received(); got != 15 {
				t.Fatalf("node %d received %d updates, want 15", i+1, got)
			}
		}
	})
}
