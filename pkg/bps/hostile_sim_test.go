// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Attacks bps-sim -byzantine found (cmd/bps-sim/attack.go).

package bps_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protodelim"
)

// TestHostileCandidateOutsideTree: a child answers a probe with a node that
// does not follow the cohort (a colluder, or any node at all). Asked to
// take a child, that node answers as a root of its own — depth 0, and
// nothing to deliver — so the joiner would hold a parent that can never
// give it anything, and rank itself just below the root. Only the
// cohort's root states depth 0: the joiner refuses any other node that
// does. (bps-sim -attack candidates: the attackers named fellow attackers
// that had not joined yet, which became false roots of up to 56 honest
// children.) Failed before: the joiner took the false root as its parent.
func TestHostileCandidateOutsideTree(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	sp := feedSpec(t, "a root outside the tree", newKey(t))
	broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Tree: bps.Tree{ProbeWait: 300 * time.Millisecond}})
	kid, joiner, stranger := newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})
	for _, n := range []*tnode{kid, joiner} {
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	if err := net.Connect(joiner.Node, stranger.Node); err != nil {
		t.Fatal(err)
	}
	child := openRaw(t, kid, broker)
	if a := child.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true}); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	type result struct {
		sub *bps.Subscription
		err error
	}
	done := make(chan result, 1)
	go func() {
		sub, err := joiner.svc.Subscribe(ctxT(t), broker.Overlay(), sp)
		done <- result{sub, err}
	}()
	f := new(pb.Frame)
	if err := child.read(f); err != nil || f.GetProbe() == nil {
		t.Fatalf("the child read %v, %v; want a probe", f, err)
	}
	pr := f.GetProbe()
	child.send(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: pr.Nonce,
		Candidates: []*pb.Candidate{{Overlay: stranger.Overlay().Bytes(), Depth: pr.Depth}}}}})
	var r result
	select {
	case r = <-done:
	case <-ctxT(t).Done():
		t.Fatal("Subscribe did not return")
	}
	if r.sub != nil {
		defer func() { _ = r.sub.Close() }()
		for _, p := range r.sub.Parents() {
			if p.Equal(stranger.Overlay()) {
				t.Fatalf("the joiner took %s, a node outside the tree, as its parent", p)
			}
		}
	}
	if n := joiner.rec.count(func(e bps.Event) bool {
		return e.Kind == bps.EventParent && e.Status == pb.Status_OK.String() && e.Peer.Equal(stranger.Overlay())
	}); n != 0 {
		t.Fatalf("the joiner attached at the false root %d times", n)
	}
}

// TestHostileCandidateNotAsOffered: a child answers a probe for a joiner
// with a real relay from elsewhere in the tree — deeper than the subtree
// probed, stated at the probe's depth. A candidate states the larger of
// the probe's depth and its rank, its Ack its rank: the relay's Ack
// states the deeper depth, and the joiner refuses the node that is not
// where its candidate said. (bps-sim -attack candidates: attackers named
// colluders anywhere in the tree at the shallowest depth a candidate may
// claim, so a joiner's two parents, meant to come from two subtrees,
// were both theirs.) Failed before: the joiner attached there.
func TestHostileCandidateNotAsOffered(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	sp := feedSpec(t, "a candidate from elsewhere", newKey(t))
	wait := 300 * time.Millisecond
	broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}, Tree: bps.Tree{ProbeWait: wait}})
	kid := newNode(t, net, bps.Options{})
	relay := newNode(t, net, bps.Options{Tree: bps.Tree{RelayCapacity: 1, SingleParent: true, ProbeWait: wait}})
	deep := newNode(t, net, bps.Options{Tree: bps.Tree{RelayCapacity: 2, SingleParent: true, ProbeWait: wait}})
	joiner := newNode(t, net, bps.Options{Tree: bps.Tree{SingleParent: true}})
	for _, n := range []*tnode{kid, relay, deep, joiner} {
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	for _, pair := range [][2]*tnode{{deep, relay}, {joiner, deep}, {joiner, relay}} {
		if err := net.Connect(pair[0].Node, pair[1].Node); err != nil {
			t.Fatal(err)
		}
	}
	child := openRaw(t, kid, broker)
	if a := child.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true}); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	// The child names the deep relay, at the probe's depth, for the
	// joiner; nothing for anyone else.
	answered := make(chan struct{})
	t.Cleanup(func() {
		_ = child.s.Reset()
		<-answered
	})
	go func() {
		defer close(answered)
		for {
			f := new(pb.Frame)
			if err := child.read(f); err != nil {
				return
			}
			pr := f.GetProbe()
			if pr == nil {
				continue
			}
			var cands []*pb.Candidate
			if string(pr.Joiner) == string(joiner.Overlay().Bytes()) {
				cands = []*pb.Candidate{{Overlay: deep.Overlay().Bytes(), Depth: pr.Depth}}
			}
			if _, err := child.s.Write(bps.EncodeFrame(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: pr.Nonce, Candidates: cands}}})); err != nil {
				return
			}
		}
	}()
	rs, err := relay.svc.Subscribe(ctxT(t), broker.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rs.Close() }()
	ds, err := deep.svc.Subscribe(ctxT(t), broker.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ds.Close() }()
	if ps := ds.Parents(); len(ps) != 1 || !ps[0].Equal(relay.Overlay()) {
		t.Fatalf("the deep relay's parents %v, want the relay", ps)
	}

	js, err := joiner.svc.Subscribe(ctxT(t), broker.Overlay(), sp)
	if js != nil {
		defer func() { _ = js.Close() }()
	}
	if n := joiner.rec.count(func(e bps.Event) bool {
		return e.Kind == bps.EventParent && e.Status == pb.Status_OK.String() && e.Peer.Equal(deep.Overlay())
	}); n != 0 {
		t.Fatalf("the joiner attached at the relay named from outside the subtree probed (subscribe: %v)", err)
	}
}

// TestHostileLateAnswerAfterManyProbes: a slow child answers a probe after
// more probes closed at its parent than the parent remembers nonces of.
// The answer is late, not hostile — the child owes it — and is tolerated;
// what bounds late answers is what each child owes. (bps-sim under load:
// honest children were blocklisted for "candidates for no open probe".)
// Failed before: the honest child was reset and blocklisted.
func TestHostileLateAnswerAfterManyProbes(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	sp := feedSpec(t, "probed often", newKey(t))
	// The joiners' 41 rounds pass the node's ration (ration.go) by its
	// bound, and no joiner Joins more than a repeat joiner may (14 each).
	broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1, PeerProbeRounds: 64, PrefixProbeRounds: 64}, Tree: bps.Tree{ProbeWait: 100 * time.Millisecond}})
	kid := newNode(t, net, bps.Options{})
	joiners := []*tnode{newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})}
	for _, n := range append([]*tnode{kid}, joiners...) {
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	child := openRaw(t, kid, broker)
	if a := child.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true}); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	// join asks the full broker for a place, which probes the child; the
	// child answers at once if answer, else not at all.
	joins := 0
	join := func(answer bool) *pb.Probe {
		j := openRaw(t, joiners[joins%len(joiners)], broker)
		joins++
		acked := make(chan error, 1)
		go func() {
			if _, err := j.s.Write(bps.EncodeFrame(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true})); err != nil {
				acked <- err
				return
			}
			acked <- j.read(new(pb.Ack))
		}()
		f := new(pb.Frame)
		if err := child.read(f); err != nil || f.GetProbe() == nil {
			t.Fatalf("the child read %v, %v; want a probe", f, err)
		}
		if answer {
			child.send(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: f.GetProbe().Nonce}}})
		}
		if err := <-acked; err != nil {
			t.Fatalf("the joiner's ack: %v", err)
		}
		_ = j.s.Reset()
		return f.GetProbe()
	}
	first := join(false) // closes unanswered: the child owes an answer
	for range 40 {       // more than the parent remembers
		join(true)
	}
	child.send(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: first.Nonce}}})
	// Still served: a relayed publication that fails is read and counted.
	bad := update(t, newKey(t), feedSpec(t, "probed often", newKey(t)), make([]byte, 32), 0, "x")
	child.send(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: bad}})
	broker.rec.wait(t, "the stream still read", func(e bps.Event) bool { return e.Kind == bps.EventDrop })
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("a slow child punished for a late answer: %d violations", n)
	}
	// What it owed is paid: one answer more is a flood.
	child.send(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: first.Nonce}}})
	expectReset(t, child)
}

// TestHostileReparentNotRootward: a parent sends its child to a node that
// is not above it — here a colluder at its own depth with a larger
// overlay. A relay leaving sends its children to its own parent, whose
// key (depth, overlay) is below its own; a target that is not is
// refused, so Reparents move a node rootward only and a parent cannot
// move it around the tree without end. (bps-sim -attack reparent:
// attackers sent each new child on to a colluder, which did the same —
// 8,309 moves of honest nodes in a minute at 1,000 nodes.) Failed
// before: the child moved.
func TestHostileReparentNotRootward(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	sp := feedSpec(t, "reparent sideways", newKey(t))
	down := make(chan *pb.Frame, 1)
	var evil, colluder *streamtest.Node
	for {
		evil, colluder = hostileParent(t, net, 1, down), hostileParent(t, net, 1, nil)
		if colluder.Overlay().Compare(evil.Overlay()) > 0 {
			break // the colluder's key, (1, overlay), is above the parent's
		}
	}
	o := relayOptions(2)
	o.SingleParent = true // no repair Joins evil again: its Reparent goes down the one stream
	x := newNode(t, net, o)
	root := referringRoot(t, net, evil.Overlay(), 1) // a parent at depth 1 is reached through a candidate
	for _, peer := range []*streamtest.Node{evil, colluder, root} {
		if err := net.Connect(x.Node, peer); err != nil {
			t.Fatal(err)
		}
	}
	subscribe(t, x, &tnode{Node: root}, sp)
	down <- &pb.Frame{Kind: &pb.Frame_Reparent{Reparent: &pb.Reparent{To: colluder.Overlay().Bytes()}}}
	ev := x.rec.wait(t, "the reparent handled", kind(bps.EventReparent))
	if ev.Err == nil {
		t.Fatal("the node moved to a target that is not above the parent that named it")
	}
	for _, p := range x.svc.Tree() {
		if slices.ContainsFunc(p.Parents, colluder.Overlay().Equal) {
			t.Fatalf("x took %s, sideways, as a parent", colluder.Overlay())
		}
	}
}

// listingRoot is a node that answers every Join FULL with cands, in that
// order: a root at capacity whose probe keeps offering the same slots.
func listingRoot(t *testing.T, net *streamtest.Network, cands ...*pb.Candidate) *streamtest.Node {
	t.Helper()
	nd := net.NewNode()
	if err := nd.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			if err := protodelim.UnmarshalFrom(newByteReader(s), new(pb.Join)); err != nil {
				return err
			}
			if _, err := s.Write(bps.EncodeFrame(&pb.Ack{Status: pb.Status_FULL, Multihop: true, Candidates: cands})); err != nil {
				return err
			}
			return s.FullClose()
		}}}}); err != nil {
		t.Fatal(err)
	}
	return nd
}

// reparentingParent is a node that admits every Join at depth, sends the
// child a Reparent to to at once, and holds the stream until the child
// leaves: a parent that sends each child it takes where it cannot go, and
// so always has a free slot.
func reparentingParent(t *testing.T, net *streamtest.Network, depth uint32, to swarm.Address) *streamtest.Node {
	t.Helper()
	return ackingParent(t, net, &pb.Ack{Status: pb.Status_OK, Multihop: true, Depth: depth},
		&pb.Frame{Kind: &pb.Frame_Reparent{Reparent: &pb.Reparent{To: to.Bytes()}}})
}

// TestHostileReparentShunned: a parent sends every child it takes a
// Reparent the child refuses (a target that is not rootward), and the root
// at capacity keeps offering that parent first (it always has a free slot:
// every child leaves it at once). The node shuns, for a while, a parent
// whose Reparent it refused or could not follow: its repair skips that
// candidate and takes the next, and it ends attached to the honest parent.
// (bps-sim -attack reparent: honest nodes referred to one attacker after
// another, each left at once, for up to 14 s without a parent.) Failed
// before: the node took the same parent again on every repair and never
// reached the honest one.
func TestHostileReparentShunned(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		net := newNetwork(t)
		sp := feedSpec(t, "reparent shunned", newKey(t))
		var evil, colluder *streamtest.Node
		for {
			colluder = hostileParent(t, net, 1, nil)
			evil = reparentingParent(t, net, 1, colluder.Overlay())
			if colluder.Overlay().Compare(evil.Overlay()) > 0 {
				break // the colluder's key, (1, overlay), is above evil's: not rootward
			}
		}
		good := hostileParent(t, net, 1, nil) // admits, holds, sends nothing
		root := listingRoot(t, net, &pb.Candidate{Overlay: evil.Overlay().Bytes(), Depth: 1}, &pb.Candidate{Overlay: good.Overlay().Bytes(), Depth: 1})
		x := newNode(t, net, bps.Options{Tree: bps.Tree{SingleParent: true}})
		for _, peer := range []*streamtest.Node{evil, colluder, good, root} {
			if err := net.Connect(x.Node, peer); err != nil {
				t.Fatal(err)
			}
		}
		subscribe(t, x, &tnode{Node: root}, sp)
		isParent := func(peer swarm.Address) func(bps.Event) bool {
			return func(e bps.Event) bool {
				return e.Kind == bps.EventParent && e.Status == pb.Status_OK.String() && e.Peer.Equal(peer)
			}
		}
		x.rec.wait(t, "x attached to the first candidate", isParent(evil.Overlay()))
		if ev := x.rec.wait(t, "the reparent handled", kind(bps.EventReparent)); ev.Err == nil {
			t.Fatal("the node moved to a target that is not above the parent that named it")
		}
		x.rec.wait(t, "x attached to the honest candidate", isParent(good.Overlay()))
		synctest.Wait()
		var parents []swarm.Address
		for _, p := range x.svc.Tree() {
			parents = append(parents, p.Parents...)
		}
		if len(parents) != 1 || !parents[0].Equal(good.Overlay()) {
			t.Fatalf("x's parents %v, want only the honest %s (evil %s)", parents, good.Overlay(), evil.Overlay())
		}
		if n := x.rec.count(isParent(evil.Overlay())); n != 1 {
			t.Fatalf("x attached to the parent whose reparent it refused %d times, want once", n)
		}
	})
}
