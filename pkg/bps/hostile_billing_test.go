// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Issue 24, item 2: a child pays only for the deliveries it takes — new,
// valid and within what the eager/lazy overlap explains. A parent whose
// copies pass the overlap is judged as a withholder is; frames lost with a
// connection are charged by neither end, and the two ledgers agree.

// TestHostileParentRepeatsJudged: a parent that gives a delivery once and
// then again, byte for byte, on the same stream — a copy no overlap
// explains (the sister's copy comes on another stream), which the child
// does not pay for — is counted a miss for each copy, as a withheld
// delivery is, and dropped at MaxLag; its sister stays. Without the rule
// the copies cost the attacker nothing and it stays a parent.
func TestHostileParentRepeatsJudged(t *testing.T) {
	t.Parallel()
	mt := newMTree(t, 1, 2, 2, func(a key) *bps.Spec { return mnemonicAll(t, "repeating parent", a) })
	mt.subscribeAll()
	honest := mt.nodes[0]
	down := make(chan *pb.Frame, 8)
	evil := hostileParent(t, mt.net, 1, down)
	const maxLag = 3
	joiner, sub := mt.joinUnder(honest, evil, maxLag)
	author := newKey(t)
	// Signed under a stream of the author's at a node of the attacker's
	// (a receiver compares the challenge with nothing, Rev 8).
	ch := keccak([]byte("a stream of the attacker's"))
	one := &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: update(t, author, mt.sp, ch, 0, "once")}}
	down <- one
	if d := recv(t, sub); d.Index != 0 {
		t.Fatalf("delivered index %d, want 0", d.Index)
	}
	for range maxLag {
		down <- one
	}
	// Frames are read in order: the update after the copies is delivered
	// only once they were judged — or the parent was dropped first.
	down <- &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: update(t, author, mt.sp, ch, 1, "after the copies")}}
	e := joiner.rec.wait(t, "the repeating parent dropped, or the update after its copies", func(e bps.Event) bool {
		return (e.Kind == bps.EventWithheld && e.Peer.Equal(evil.Overlay())) || (e.Kind == bps.EventDeliver && !e.Service && e.Index == 1)
	})
	if e.Kind != bps.EventWithheld {
		t.Fatalf("a parent that sent %d copies of one delivery on its stream was not dropped (MaxLag %d)", maxLag, maxLag)
	}
	if n := joiner.rec.count(func(e bps.Event) bool { return e.Kind == bps.EventWithheld && e.Peer.Equal(honest.Overlay()) }); n != 0 {
		t.Fatal("the honest sister was dropped")
	}
	if slices.ContainsFunc(sub.Parents(), evil.Overlay().Equal) {
		// The drop is asynchronous to the trace: wait for the parents to move.
		waitParentGone(t, sub, evil.Overlay())
	}
	if n := joiner.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations: a copy is not provably a lie", n)
	}
}

// waitParentGone waits until the subscription's parents no longer hold
// p, within waitTimeout (the subscription moves no event
// when it lets a parent go).
func waitParentGone(t *testing.T, sub *bps.Subscription, p swarm.Address) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if !slices.ContainsFunc(sub.Parents(), p.Equal) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("parent %s still held", p)
		}
		<-tick.C
	}
}

// TestPricingLostWithTheConnection: a child that stops reading while its
// parent writes on, then loses the connection, is charged for the
// deliveries it took — the ones its receipts told — and not for those
// written and lost with the connection; its ledger and its parent's say
// the same. Charged at the parent's writes (before receipts) it owed what
// was written, and the two ends disagreed.
func TestPricingLostWithTheConnection(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	st := bps.Settlement{Frames: 1, Interval: time.Hour, Margin: -1, Receipt: 1}
	bl, sl := newLedger(), newLedger()
	broker := settledNode(t, net, bps.Options{}, bl, testPrices, st)
	// A queue of one delivery at the child: its reader stops at the second
	// delivery the application does not take.
	child := settledNode(t, net, bps.Options{Bounds: bps.Bounds{QueueLen: 1}}, sl, testPrices, st)
	pubNode := newNode(t, net, bps.Options{})
	for _, c := range []*tnode{child, pubNode} {
		if err := net.Connect(c.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	admin := newKey(t)
	sp := feedSpec(t, "lost with the connection", admin)
	sub := subscribe(t, child, broker, sp)
	p := publish(t, pubNode, broker, sp, admin, 0)
	d := int64(testPrices.Delivery)
	const read, n = 5, 25
	for i := range uint64(read) {
		if err := p.PublishUpdate(ctxT(t), i, fmt.Appendf(nil, "update %d", i)); err != nil {
			t.Fatal(err)
		}
		recv(t, sub)
	}
	bl.waitBalance(t, "broker", child.Overlay(), read*d) // a receipt a delivery, applied at once
	sl.waitBalance(t, "child", broker.Overlay(), -read*d)
	for i := uint64(read); i < n; i++ {
		if err := p.PublishUpdate(ctxT(t), i, fmt.Appendf(nil, "update %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	broker.rec.waitN(t, n, "the updates accepted", kind(bps.EventAccept))
	net.Disconnect(child.Node, broker.Node)
	broker.rec.wait(t, "the child's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(child.Overlay())
	})
	if err := sub.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	owed := bl.balance(child.Overlay())
	if owes := -sl.balance(broker.Overlay()); owes != owed {
		t.Fatalf("the child's ledger says it owes %d (%d deliveries), its parent's %d (%d): the two ends disagree", owes, owes/d, owed, owed/d)
	}
	if owed < read*d || owed >= n*d {
		t.Fatalf("the child owes %d (%d deliveries) of %d written, %d read: want the ones it took, not the ones lost", owed, owed/d, n, read)
	}
	t.Logf("%d of %d deliveries charged at both ends", owed/d, n)
}
