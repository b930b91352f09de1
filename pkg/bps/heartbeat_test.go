// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"context"
	"errors"
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

// beatRoot stands for a cohort's root as a joiner sees it, as escapeRoot
// does, and states the heartbeat terms of the real broker whose tree the
// honest relay is in: its key and period (the root's Ack is where a node
// learns them).
func beatRoot(t *testing.T, net *streamtest.Network, first, later []swarm.Address, beatKey []byte, period time.Duration) *streamtest.Node {
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
			ack := &pb.Ack{Status: pb.Status_FULL, Multihop: true, Candidates: cands(as),
				HeartbeatMs: uint32(period / time.Millisecond), HeartbeatKey: beatKey}
			if _, err := s.Write(bps.EncodeFrame(ack)); err != nil {
				return err
			}
			return s.FullClose()
		}}}}); err != nil {
		t.Fatal(err)
	}
	return nd
}

// beatCaptured is a node whose two parents are colluders the test drives,
// in the cohort of a real broker that sends heartbeats (its key rootKey,
// its period), with an honest relay of the broker's tree elsewhere that the
// root (as the joiner sees it) offers on any Join after the first.
type beatCaptured struct {
	*captured
	rootKey key
	period  time.Duration
	seq     uint64
}

func newBeatCaptured(t *testing.T, topic string, period time.Duration) *beatCaptured {
	t.Helper()
	rootKey := newKey(t)
	bo := bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}}
	bo.Heartbeat, bo.Signer = period, rootKey.signer
	mt := newMTreeWith(t, 1, bo, 2, func(a key) *bps.Spec { return feedSpec(t, topic, a) })
	c := captureIn(t, mt, func(first, later []swarm.Address) *streamtest.Node {
		return beatRoot(t, mt.net, first, later, rootKey.addr, period)
	})
	return &beatCaptured{captured: c, rootKey: rootKey, period: period}
}

func (c *beatCaptured) publish(t *testing.T, i uint64, pass bool) {
	t.Helper()
	m := update(t, c.mt.admin, c.mt.sp, c.p.Challenge(), i, fmt.Sprintf("m%d", i))
	if err := c.p.Send(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
	expectUpdates(t, c.mt.subs[0], i, i+1)
	if pass {
		c.down(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: m}})
	}
}

func (c *beatCaptured) down(f *pb.Frame) {
	c.downA <- f
	c.downB <- f
}

// beat has the colluders pass on a heartbeat of the root's saying the
// admin's feed stands at next.
func (c *beatCaptured) beat(t *testing.T, next uint64) {
	t.Helper()
	c.seq++
	b, err := bps.SignHeartbeat(c.rootKey.signer, c.mt.sp, c.seq, c.period, map[string]uint64{string(c.mt.admin.addr): next})
	if err != nil {
		t.Fatal(err)
	}
	c.down(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: b}})
}

// escaped waits for the joiner's escape on the heartbeat's evidence why,
// checks it left a colluder for the honest relay, that the updates the
// colluders withheld (0 to next-1) come once each, in order, by the
// escape's replay (the joiner took nothing before it: it asks for the time
// since it first attached, replay.go), and that every update published
// after it comes.
func (c *beatCaptured) escaped(t *testing.T, why error, next uint64) {
	t.Helper()
	c.joiner.rec.wait(t, "a gap seen through the heartbeat", func(e bps.Event) bool {
		return e.Kind == bps.EventHeartbeat && errors.Is(e.Err, why)
	})
	ev := c.joiner.rec.wait(t, "the escape", func(e bps.Event) bool { return e.Kind == bps.EventEscape && e.Err == nil })
	if !c.evil(ev.Peer) {
		t.Fatalf("left %s, not a colluder", ev.Peer)
	}
	if ps := c.sub.Parents(); !slices.ContainsFunc(ps, c.honest.Overlay().Equal) {
		t.Fatalf("parents %v after the escape, want the honest relay among them", ps)
	}
	expectUpdates(t, c.sub, 0, next) // withheld, replayed
	for i := next; i < next+4; i++ {
		c.publish(t, i, false)
		expectUpdates(t, c.sub, i, i+1)
	}
	if c.sub.Escapes() != 1 || c.sub.BeatGaps() == 0 {
		t.Fatalf("escapes %d, heartbeat gaps %d; want 1 escape on a heartbeat gap", c.sub.Escapes(), c.sub.BeatGaps())
	}
}

// TestHostileCapturedWithholdsPublisher: a node whose two parents collude
// to withhold every update of the publisher while passing the root's
// heartbeat sees no gap in what it receives — only silence — but the
// heartbeat says the root accepted updates it never got: after the
// reorder wait that is a gap both parents passed over, and it escapes to a
// parent the root's probe finds, from which every later update comes.
// The period is long (10 s) so that no missed period is what moves it.
func TestHostileCapturedWithholdsPublisher(t *testing.T) {
	t.Parallel()
	c := newBeatCaptured(t, "heartbeat passed, publisher withheld", 10*time.Second)
	c.beat(t, 0) // before any update: the publisher's place, the node's base
	for i := range uint64(3) {
		c.publish(t, i, false)
		c.beat(t, i+1)
	}
	c.escaped(t, bps.ErrBeatBehind, 3)
}

// TestHostileCapturedWithholdsHeartbeat: colluding parents that withhold
// the root's heartbeat too leave the node silence on a signal its root
// promised every period: two missed periods are a gap, and it escapes.
func TestHostileCapturedWithholdsHeartbeat(t *testing.T) {
	t.Parallel()
	c := newBeatCaptured(t, "heartbeat withheld", 100*time.Millisecond)
	for i := range uint64(3) {
		c.publish(t, i, false)
	}
	c.escaped(t, bps.ErrBeatMissed, 3)
}

// TestHostileForgedHeartbeat: a heartbeat signed by any key but the one
// the root stated in its Ack is a parent's forgery — an honest relay
// passes on only what verified — and a violation: the parent's stream is
// ended and the parent blocklisted; the node keeps its other parent.
func TestHostileForgedHeartbeat(t *testing.T) {
	t.Parallel()
	c := newBeatCaptured(t, "forged heartbeat", 10*time.Second)
	forger := newKey(t)
	b, err := bps.SignHeartbeat(forger.signer, c.mt.sp, 1, c.period, map[string]uint64{string(c.mt.admin.addr): 0})
	if err != nil {
		t.Fatal(err)
	}
	c.downA <- &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: b}}
	if err := c.joiner.WaitBlocklisted(ctxT(t), c.evilA.Overlay()); err != nil {
		t.Fatalf("the parent that forged a heartbeat is not blocklisted: %v", err)
	}
	lost := c.joiner.rec.wait(t, "the forger's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventParentLost && e.Peer.Equal(c.evilA.Overlay())
	})
	if lost.Err == nil {
		t.Fatal("the forger's stream ended without a reason")
	}
	if slices.ContainsFunc(c.sub.Parents(), c.evilA.Overlay().Equal) {
		t.Fatal("the forger is still a parent")
	}
	if n := c.joiner.rec.count(kind(bps.EventHeartbeat)); n != 0 {
		t.Fatalf("%d heartbeats taken, want the forged one refused", n)
	}
}

// TestQuietPublisherMovesNobody: in an honest tree whose root sends a
// heartbeat every 100 ms, a publisher that publishes and then falls quiet
// moves nobody — its index stands still at the root, the heartbeat keeps
// coming — while every node takes the heartbeats (no herd to the root).
func TestQuietPublisherMovesNobody(t *testing.T) {
	t.Parallel()
	const period = 100 * time.Millisecond
	bo := bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}}
	bo.Heartbeat = period
	mt := newMTreeWith(t, 4, bo, 2, func(a key) *bps.Spec { return feedSpec(t, "quiet publisher", a) })
	mt.subscribeAll()
	p := mt.adminPublisher()
	for i := range uint64(3) {
		if err := p.Send(ctxT(t), update(t, mt.admin, mt.sp, p.Challenge(), i, fmt.Sprintf("m%d", i))); err != nil {
			t.Fatal(err)
		}
		for _, sub := range mt.subs {
			expectUpdates(t, sub, i, i+1)
		}
	}
	// Quiet for 30 periods: several times the missed-period wait and
	// the reorder wait, heard by every node.
	for _, nd := range mt.nodes {
		nd.rec.waitN(t, 30, "heartbeats while the publisher is quiet", func(e bps.Event) bool {
			return e.Kind == bps.EventHeartbeat && e.Err == nil
		})
	}
	for j, nd := range mt.nodes {
		if n := nd.rec.count(kind(bps.EventEscape)); n != 0 {
			t.Errorf("node %d escaped %d times", j, n)
		}
		if g := mt.subs[j].BeatGaps(); g != 0 {
			t.Errorf("node %d saw %d heartbeat gaps", j, g)
		}
		if n := nd.rec.count(kind(bps.EventViolation)); n != 0 {
			t.Errorf("node %d: %d violations", j, n)
		}
	}
}
