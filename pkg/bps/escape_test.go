// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protodelim"
)

// escapeRoot stands for a cohort's root as a joiner sees it: it answers
// the first Join FULL with first's candidates (the probe that captured the
// joiner), and every later one FULL with later's (a probe that found
// another subtree).
func escapeRoot(t *testing.T, net *streamtest.Network, first, later []swarm.Address) *streamtest.Node {
	t.Helper()
	var joins atomic.Int32
	cands := func(as []swarm.Address) []*pb.Candidate {
		out := make([]*pb.Candidate, 0, len(as))
		for _, a := range as {
			out = append(out, &pb.Candidate{Overlay: a.Bytes(), Depth: 1})
		}
		return out
	}
	nd := net.NewNode()
	if err := nd.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			if err := protodelim.UnmarshalFrom(newByteReader(s), new(pb.Join)); err != nil {
				return err
			}
			as := later
			if joins.Add(1) == 1 {
				as = first
			}
			if _, err := s.Write(bps.EncodeFrame(&pb.Ack{Status: pb.Status_FULL, Multihop: true, Candidates: cands(as)})); err != nil {
				return err
			}
			return s.FullClose()
		}}}}); err != nil {
		t.Fatal(err)
	}
	return nd
}

// TestHostileCapturedNodeEscapes: a node whose two parents both withhold
// every second update of an explicit feed — colluders, which the lag
// check, comparing the two, cannot tell apart — sees updates passed over
// that neither gave while both gave later ones. It replaces one of them by
// a parent the root's probe finds elsewhere, receives every update from
// then on, and the lag check, now comparing the withholder it kept with
// the new parent, drops that one too.
// captured is a node whose two parents are withholders the test drives,
// with an honest relay of a real tree elsewhere, which the root (as the
// joiner sees it) offers on any Join after the first.
type captured struct {
	mt           *mtree
	honest       *tnode
	joiner       *tnode
	sub          *bps.Subscription
	evilA, evilB *streamtest.Node
	downA, downB chan *pb.Frame
	p            *bps.Publisher
}

func newCaptured(t *testing.T, topic string) *captured {
	t.Helper()
	mt := newMTree(t, 1, 2, 2, func(a key) *bps.Spec { return feedSpec(t, topic, a) })
	return captureIn(t, mt, func(first, later []swarm.Address) *streamtest.Node {
		return escapeRoot(t, mt.net, first, later)
	})
}

// captureIn makes the captured node in mt's cohort: its two withholders,
// and the root (made by root) that offers them on the joiner's first Join
// and mt's honest relay on any later one.
func captureIn(t *testing.T, mt *mtree, root func(first, later []swarm.Address) *streamtest.Node) *captured {
	t.Helper()
	c := &captured{mt: mt}
	c.mt.subscribeAll()
	c.honest = c.mt.nodes[0]
	c.downA, c.downB = make(chan *pb.Frame, 256), make(chan *pb.Frame, 256)
	c.evilA, c.evilB = hostileParent(t, c.mt.net, 1, c.downA), hostileParent(t, c.mt.net, 1, c.downB)
	first := []swarm.Address{c.evilA.Overlay(), c.evilB.Overlay()}
	later := []swarm.Address{c.honest.Overlay()}
	rt := root(first, later)
	o := relayOptions(2)
	o.MaxLag = 3
	c.joiner = newNode(t, c.mt.net, o)
	for _, nd := range []*streamtest.Node{c.honest.Node, c.evilA, c.evilB, rt, c.mt.broker.Node} {
		if err := c.mt.net.Connect(c.joiner.Node, nd); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := c.joiner.svc.Subscribe(ctxT(t), rt.Overlay(), c.mt.sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	c.sub = sub
	if ps := sub.Parents(); len(ps) != 2 || slices.ContainsFunc(ps, c.honest.Overlay().Equal) {
		t.Fatalf("parents %v, want the two withholders", ps)
	}
	c.p = c.mt.adminPublisher()
	return c
}

func (c *captured) evil(a swarm.Address) bool {
	return a.Equal(c.evilA.Overlay()) || a.Equal(c.evilB.Overlay())
}

// publish publishes update i, waits for the honest relay to have it, and
// has the withholders pass it on if pass says so; it returns the update.
func (c *captured) publish(t *testing.T, i uint64, pass bool) *pb.Broadcast {
	t.Helper()
	m := update(t, c.mt.admin, c.mt.sp, c.p.Challenge(), i, fmt.Sprintf("m%d", i))
	if err := c.p.Send(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
	expectUpdates(t, c.mt.subs[0], i, i+1)
	if pass {
		c.downA <- &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: m}}
		c.downB <- &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: m}}
	}
	return m
}

func TestHostileCapturedNodeEscapes(t *testing.T) {
	t.Parallel()
	c := newCaptured(t, "captured node escapes")
	joiner, sub, honest := c.joiner, c.sub, c.honest
	evil := c.evil
	publish := func(i uint64) { c.publish(t, i, i%2 == 1) } // the withholders pass every second one on
	// Captured: 1, 3, 5, 7 come (the reorder flush passes over the even
	// ones), and the node leaves one withholder.
	const before = 8
	for i := range uint64(before) {
		publish(i)
	}
	ev := joiner.rec.wait(t, "the escape", func(e bps.Event) bool { return e.Kind == bps.EventEscape && e.Err == nil })
	if !evil(ev.Peer) {
		t.Fatalf("left %s, not a withholder", ev.Peer)
	}
	if ps := sub.Parents(); !slices.ContainsFunc(ps, honest.Overlay().Equal) {
		t.Fatalf("parents %v after the escape, want the honest relay among them", ps)
	}
	for d := recv(t, sub); d.Index != before-1; d = recv(t, sub) {
	}

	// Free: every update, in order; the withholder kept is dropped for
	// lag against the new parent within a window. The escape's join asked
	// the new parent for a replay (docs/protocol.md, "Replay on join"):
	// the even updates the withholders kept back come late, each once.
	const after = 64 + 8
	late := make(map[uint64]bool)
	for i := uint64(before); i < before+after; i++ {
		publish(i)
		for {
			d := recv(t, sub)
			if d.Service != nil {
				continue
			}
			if d.Index < before && d.Index%2 == 0 && !late[d.Index] {
				late[d.Index] = true
				continue
			}
			if d.Index != i {
				t.Fatalf("delivery %d, want %d", d.Index, i)
			}
			break
		}
	}
	w := joiner.rec.wait(t, "the withholder kept dropped for lag", kind(bps.EventWithheld))
	if !evil(w.Peer) || w.Peer.Equal(ev.Peer) {
		t.Fatalf("dropped %s for lag, want the withholder kept (left %s)", w.Peer, ev.Peer)
	}
	if n := joiner.rec.count(kind(bps.EventEscape)); n != 1 {
		t.Fatalf("%d escapes, want 1", n)
	}
	if sub.Escapes() != 1 {
		t.Fatalf("Escapes() = %d, want 1", sub.Escapes())
	}
}

// TestEscapeBoundedWhenPublisherSkips: a publisher may skip indexes
// (SWIP-60); every node then sees updates passed over that no parent gave,
// which is the gap escape's evidence too. Each node with two parents below
// the root escapes at most once in the interval however many gaps it sees,
// blames nobody (no parent dropped, none shunned), and receives every
// update that was published.
func TestEscapeBoundedWhenPublisherSkips(t *testing.T) {
	t.Parallel()
	mt := newMTree(t, 4, 2, 2, func(a key) *bps.Spec { return feedSpec(t, "publisher skips", a) })
	mt.subscribeAll()
	for _, nd := range mt.nodes[2:] {
		if pos := mt.position(nd); len(pos.Parents) != 2 || slices.ContainsFunc(pos.Parents, mt.broker.Overlay().Equal) {
			t.Fatalf("node %s: parents %v, want two relays", nd.Overlay(), pos.Parents)
		}
	}
	p := mt.adminPublisher()
	const gaps = 6
	start := time.Now()
	for i := range uint64(3 * gaps) {
		if i%3 == 1 {
			continue // skipped on purpose
		}
		if err := p.Send(ctxT(t), update(t, mt.admin, mt.sp, p.Challenge(), i, fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
		// Each gap is passed over (a flush, 1 s) before the next update.
		for j, sub := range mt.subs {
			d := recv(t, sub)
			for d.Service != nil {
				d = recv(t, sub)
			}
			if d.Index != i {
				t.Fatalf("node %d: delivery %d, want %d", j, d.Index, i)
			}
		}
	}
	// One escape per interval: a loaded machine may stretch the run past
	// one.
	bound := 1 + int(time.Since(start)/bps.EscapeMinWait)
	escaped := 0
	for j, nd := range mt.nodes {
		n := nd.rec.count(kind(bps.EventEscape))
		if n > bound {
			t.Fatalf("node %d escaped %d times in %s for %d gaps the publisher made, want at most %d", j, n, time.Since(start), gaps, bound)
		}
		escaped += n
		if w := nd.rec.count(kind(bps.EventWithheld)); w != 0 {
			t.Fatalf("node %d dropped %d parents for lag", j, w)
		}
	}
	if escaped == 0 {
		t.Fatal("no node with two relays as parents escaped: the bound was not exercised")
	}
}

// TestHostileLateCopyIsNotWithheld: an update both parents passed over
// that one of them gives late after all — slower than the reorder wait,
// not withholding — sets off no escape; the next gap that no late copy
// fills does.
func TestHostileLateCopyIsNotWithheld(t *testing.T) {
	t.Parallel()
	c := newCaptured(t, "a late copy is not withheld")
	c.publish(t, 0, true)
	c.publish(t, 1, true)
	late := c.publish(t, 2, false)
	c.publish(t, 3, true)
	expectUpdates(t, c.sub, 0, 2)
	expectUpdates(t, c.sub, 3, 4) // the flush passed over 2
	c.downA <- &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: late}}
	expectUpdates(t, c.sub, 2, 3) // late, not lost
	c.publish(t, 4, false)
	c.publish(t, 5, true)
	ev := c.joiner.rec.wait(t, "an escape", kind(bps.EventEscape))
	if ev.Index != 4 {
		t.Fatalf("escaped for update %d, want 4: the late one set it off", ev.Index)
	}
	if n := c.joiner.rec.count(kind(bps.EventEscape)); n != 1 {
		t.Fatalf("%d escapes, want 1", n)
	}
}
