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
		mt, a, v, sub := cutOffTree(t, "cut-off-replay")
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

// TestCutOffBeforeTheFirstDelivery is the same cut with nothing published
// before it (issue 24's regression under the simulator's reparent and
// probe-flood attacks, once the root's heartbeat gave attackers a frame to
// act on before the first update): v attached, took nothing, and lost its
// one parent; what the admin published while v attached again passed the
// broker, where v attaches. v asks for a replay from its loss although it
// never took a delivery, and gets every update, once, in order. (Before:
// a node that had taken nothing asked for no replay, and lost the first 5.)
func TestCutOffBeforeTheFirstDelivery(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mt, a, v, sub := cutOffTree(t, "cut-off-first-replay")
		p := mt.adminPublisher()
		synctest.Wait()
		if n := sub.Received(); n != 0 {
			t.Fatalf("v took %d updates before the cut, want none", n)
		}

		before := v.rec.count(parentOK)
		mt.net.Remove(a.Node)
		mt.publishN(p, 0, 5) // v has no parent, and never took anything
		synctest.Wait()
		v.rec.waitN(t, before+1, "v attached again", parentOK)
		mt.publishN(p, 5, 10)
		expectUpdates(t, sub, 0, 10)
		if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(mt.broker.Overlay()) {
			t.Fatalf("v's parents %v, want the broker, whose slot a left", ps)
		}
		synctest.Wait()
		if got := sub.Received(); got != 10 {
			t.Fatalf("v received %d updates, want 10", got)
		}
	})
}

// cutOffTree is the cut-off tests' tree: broker (1 stream) → a (1 child)
// → v, every subscriber attached, v's link to the broker slow (200 ms), so
// that what is published after a dies is in before v's Join there.
func cutOffTree(t *testing.T, topic string) (mt *mtree, a, v *tnode, sub *bps.Subscription) {
	t.Helper()
	mt = newMTreeWith(t, 2, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Timing: bps.Timing{Inactivity: time.Hour}}, 1,
		func(a key) *bps.Spec { return feedSpec(t, topic, a) })
	mt.subscribeAll()
	a, v = mt.nodes[0], mt.nodes[1]
	sub = mt.subs[1]
	if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(a.Overlay()) {
		t.Fatalf("v's parents %v, want a alone", ps)
	}
	if err := mt.net.SetLink(v.Node, mt.broker.Node, streamtest.LinkConfig{Latency: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	return mt, a, v, sub
}
