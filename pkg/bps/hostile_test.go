// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protodelim"
)

// TestHostileServiceReplayAfterReclaim: a cohort forgotten when its last
// stream left is made again by the next Join; a child that replays the
// admin's old ROSTER up its envelope — genuine, signed, but older than
// what the broker took — neither rolls the roster back (re-admitting a
// revoked publisher) nor moves the service cursor: the broker remembers a
// forgotten cohort's service feed, and the replay is stale.
func TestHostileServiceReplayAfterReclaim(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "replayed roster", admin)
	grant := grantRevokeForget(t, cl[0], broker, sp, admin, bob)

	if n := len(broker.svc.Cohorts()); n != 0 {
		t.Fatalf("%d cohorts after the last stream left", n)
	}

	replayUp(t, cl[1], broker, sp, admin, grant)
	broker.rec.wait(t, "the replay dropped", dropped(bps.CounterRetransmit))
	c := cohortInfo(t, broker, sp)
	if c.ServiceNext != 2 || len(c.Roster) != 0 {
		t.Fatalf("after the replay: service next %d, roster %x; want 2 and the revocation's empty roster", c.ServiceNext, c.Roster)
	}
}

// grantRevokeForget has the admin grant bob and revoke him at broker
// through from, then leave, so that the cohort is forgotten with its
// service feed at 2; it returns the grant, for a replay.
func grantRevokeForget(t *testing.T, from, broker *tnode, sp *bps.Spec, admin, bob key) (grant *pb.Message) {
	t.Helper()
	grant = rosterMsg(t, admin, sp, 0, bob)
	a := publish(t, from, broker, sp, admin, 0)
	send(t, a, grant)
	send(t, a, rosterMsg(t, admin, sp, 1))
	broker.rec.waitN(t, 2, "grant and revocation accepted", kind(bps.EventAccept))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	broker.rec.wait(t, "the admin's stream left", kind(bps.EventLeave))
	return grant
}

// replayUp sends m up a relay stream from from to broker, as the strongest
// replayer would: a relay that holds a claim the admin signed (it bridged
// the admin once), so that its stream may carry the admin's publications.
func replayUp(t *testing.T, from, broker *tnode, sp *bps.Spec, admin key, m *pb.Message) {
	t.Helper()
	r := openRaw(t, from, broker)
	relayJoin(t, r, sp)
	r.send(attestation(t, admin))
	r.send(&pb.Frame{Kind: &pb.Frame_Message{Message: m}})
}

// TestHostileForgetByOthers: the memory of forgotten cohorts' service
// feeds is bounded, but shared fairly: a peer that fills it with cohorts
// of its own — each under an admin key it minted, one roster each, made
// and forgotten three times over the bound — evicts only its own, so the
// victim's old roster replayed afterwards is still stale.
func TestHostileForgetByOthers(t *testing.T) {
	t.Parallel()
	const bound = 16
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{EndedCohorts: bound}}, 2)
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "the victim", admin)
	grant := grantRevokeForget(t, cl[0], broker, sp, admin, bob)

	for i := range 3 * bound {
		k := newKey(t)
		fsp := feedSpec(t, fmt.Sprint("filler ", i), k)
		p := publish(t, cl[1], broker, fsp, k, 0)
		send(t, p, rosterMsg(t, k, fsp, 0))
		broker.rec.waitN(t, 3+i, "the filler's roster accepted", kind(bps.EventAccept))
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		broker.rec.waitN(t, 2+i, "the filler left", kind(bps.EventLeave))
	}
	if n := len(broker.svc.Cohorts()); n != 0 {
		t.Fatalf("%d cohorts after every stream left", n)
	}
	if n := broker.svc.HeldFeeds(); n > bound {
		t.Fatalf("%d service feeds remembered, bound %d", n, bound)
	}

	replayUp(t, cl[1], broker, sp, admin, grant)
	// Dropped, or (on a node that forgot) taken as the grant was the first
	// time: either verdict ends the wait.
	grantTaken := func(e bps.Event) bool {
		return e.Kind == bps.EventAccept && e.Cohort == sp.String() && e.Service && e.Index == 0
	}
	broker.rec.waitN(t, 2, "the replay judged", func(e bps.Event) bool { return grantTaken(e) || dropped(bps.CounterRetransmit)(e) })
	c := cohortInfo(t, broker, sp)
	if c.ServiceNext != 2 || len(c.Roster) != 0 {
		t.Fatalf("after others' cohorts and the replay: service next %d, roster %x; want 2 and the revocation's empty roster", c.ServiceNext, c.Roster)
	}
}

// TestHostileEndedForgetByOthers: the memory of ended cohorts is bounded
// but shared fairly, as the held service feeds are: a peer that ends
// cohorts of its own three times over the bound, each under an admin key
// it minted, evicts only its own, so a late Join for the victim's ended
// cohort is still told the end — not a fresh cohort whose cursors start
// at 0 again (issue 24).
func TestHostileEndedForgetByOthers(t *testing.T) {
	t.Parallel()
	const bound = 16
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{EndedCohorts: bound}}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "the victim's ended cohort", admin)
	a := publishOpts(t, cl[0], broker, sp, admin, false)
	send(t, a, endMsg(t, admin, sp, 0))
	broker.rec.wait(t, "the victim's cohort ended", kind(bps.EventEnd))

	for i := range 3 * bound {
		k := newKey(t)
		fsp := feedSpec(t, fmt.Sprint("ended filler ", i), k)
		p := publishOpts(t, cl[1], broker, fsp, k, false)
		send(t, p, endMsg(t, k, fsp, 0))
		broker.rec.waitN(t, 2+i, "the filler ended", kind(bps.EventEnd))
	}

	late := openRaw(t, cl[2], broker)
	if ack := late.join(&pb.Join{Cohort: sp.PB()}); ack.Status != pb.Status_OK {
		t.Fatal(ack.Status)
	}
	// The admin's own Join was the first for the spec; the late one is the
	// second.
	e := broker.rec.waitN(t, 2, "the late Join answered", func(e bps.Event) bool {
		return e.Kind == bps.EventJoin && e.Cohort == sp.String()
	})
	if e.Status != "ENDED" {
		t.Fatalf("a late Join for the victim's ended cohort, after another peer ended %d of its own (bound %d): %s, want ENDED", 3*bound, bound, e.Status)
	}
}

// TestHostileRevokedKeepsReceivingClosed: in a closed cohort a publisher
// the admin revoked is told the revoking roster and then receives nothing
// more — it is no longer in the audience of a cohort that admits only by
// roster — until a later roster names it again.
func TestHostileRevokedKeepsReceivingClosed(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin, bob, carol := newKey(t), newKey(t), newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("revoked, closed"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	send(t, a, rosterMsg(t, admin, sp, 0, bob, carol))
	broker.rec.wait(t, "the grant", kind(bps.EventAccept))
	b := publishOpts(t, cl[1], broker, sp, bob, true)
	c := publishOpts(t, cl[2], broker, sp, carol, true)
	recvC(t, b.C(), "bob's first delivery")
	recvC(t, c.C(), "carol's first delivery")

	send(t, a, rosterMsg(t, admin, sp, 1, carol))
	if d := recvC(t, b.C(), "bob told his revocation"); d.Service == nil || d.Service.Index != 1 {
		t.Fatalf("bob got %+v, want the revoking roster", d)
	}
	recvC(t, c.C(), "carol told the roster")
	send(t, a, socMsg(t, admin, make([]byte, 32), "after bob's revocation"))
	if d := recvC(t, c.C(), "carol hears the admin"); string(d.Payload()) != "after bob's revocation" {
		t.Fatalf("carol heard %q", d.Payload())
	}
	send(t, a, rosterMsg(t, admin, sp, 2, bob, carol))
	if d := recvC(t, b.C(), "bob's next delivery"); d.Service == nil || d.Service.Index != 2 {
		t.Fatalf("bob's next delivery after his revocation is %+v (payload %q), want the roster that names him again", d, d.Payload())
	}
}

// hostileParent is a node that answers every Join OK over the envelope,
// stating depth, then writes each frame sent on down, and holds the stream
// until its peer closes it.
func hostileParent(t *testing.T, net *streamtest.Network, depth uint32, down <-chan *pb.Frame) *streamtest.Node {
	t.Helper()
	evil := net.NewNode()
	if err := evil.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(ctx context.Context, _ p2p.Peer, s p2p.Stream) error {
			if err := protodelim.UnmarshalFrom(newByteReader(s), new(pb.Join)); err != nil {
				return err
			}
			if _, err := s.Write(bps.EncodeFrame(&pb.Ack{Status: pb.Status_OK, Multihop: true, Depth: depth})); err != nil {
				return err
			}
			closed := make(chan struct{})
			go func() { _, _ = io.Copy(io.Discard, s); close(closed) }()
			for {
				select {
				case f := <-down:
					if _, err := s.Write(bps.EncodeFrame(f)); err != nil {
						return err
					}
				case <-closed:
					return s.Close()
				}
			}
		}}}}); err != nil {
		t.Fatal(err)
	}
	return evil
}

// TestHostileReparentToOwnChild: a parent that names the node's own child
// as where to move would close a cycle; the node refuses the move (and
// leaves that parent all the same) and never takes its child as a parent.
func TestHostileReparentToOwnChild(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	sp := feedSpec(t, "reparent into a cycle", newKey(t))
	down := make(chan *pb.Frame, 1)
	evil := hostileParent(t, net, 0, down)
	x, y := newNode(t, net, relayOptions(2)), newNode(t, net, relayOptions(2))
	root := referringRoot(t, net, x.Overlay(), 1) // y reaches x, at depth 1, through a candidate
	for _, pair := range [][2]*streamtest.Node{{x.Node, evil}, {y.Node, x.Node}, {y.Node, root}} {
		if err := net.Connect(pair[0], pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	subscribe(t, x, &tnode{Node: evil}, sp)
	subscribe(t, y, &tnode{Node: root}, sp)

	down <- &pb.Frame{Kind: &pb.Frame_Reparent{Reparent: &pb.Reparent{To: y.Overlay().Bytes()}}}
	ev := x.rec.wait(t, "the reparent handled", kind(bps.EventReparent))
	if ev.Err == nil || !strings.Contains(ev.Err.Error(), "own child") {
		t.Fatalf("reparent to its own child: %v, want refused", ev.Err)
	}
	for _, p := range x.svc.Tree() {
		if slices.ContainsFunc(p.Parents, y.Overlay().Equal) {
			t.Fatalf("x took its own child %s as a parent", y.Overlay())
		}
	}
}

// TestHostileParentDepthBound: a parent stating a depth at the bound (a
// lie, or a chain looping on itself) is refused at the join: the node's
// depth stays finite and no wrap can disable the cycle guard.
func TestHostileParentDepthBound(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	sp := feedSpec(t, "too deep", newKey(t))
	for _, depth := range []uint32{math.MaxUint32, math.MaxUint32 - 1, 1000} {
		evil := hostileParent(t, net, depth, nil)
		x := newNode(t, net, relayOptions(2))
		if err := net.Connect(x.Node, evil); err != nil {
			t.Fatal(err)
		}
		_, err := x.svc.Subscribe(ctxT(t), evil.Overlay(), sp)
		if err == nil || !strings.Contains(err.Error(), "depth past the bound") {
			t.Fatalf("a parent at depth %d: %v, want refused", depth, err)
		}
	}
}

// TestHostileNamedBrokerDepth: the node an application names as the
// cohort's broker is reached directly, not through a candidate, so the only
// depth its child can check for it is the root's, 0: one stating more —
// which prices every publication the child writes up at (depth + 1) × the
// publish price, up to 63 × — is refused; one stating 0 is taken (issue 24).
func TestHostileNamedBrokerDepth(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	sp := feedSpec(t, "the named broker's depth", newKey(t))
	for _, depth := range []uint32{62, 5, 1, 0} {
		evil := hostileParent(t, net, depth, nil)
		x := newNode(t, net, relayOptions(2))
		if err := net.Connect(x.Node, evil); err != nil {
			t.Fatal(err)
		}
		sub, err := x.svc.Subscribe(ctxT(t), evil.Overlay(), sp)
		if depth == 0 {
			if err != nil {
				t.Fatalf("a broker stating the root's depth 0: %v", err)
			}
			_ = sub.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "reached as the cohort's root") {
			if sub != nil {
				_ = sub.Close()
			}
			t.Fatalf("a named broker stating depth %d: %v, want refused", depth, err)
		}
	}
}

// TestHostileRelayForwardsOnce: a relay forwards a publication rootward
// once however often a child (or a loop) sends it: byte-identical frames
// within its window are dropped as retransmits, so no cycle can keep a
// frame travelling up for ever.
func TestHostileRelayForwardsOnce(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin := newKey(t)
	sp := feedSpec(t, "forward once", admin)
	broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}})
	relay, child := newNode(t, net, relayOptions(2)), newNode(t, net, bps.Options{})
	for _, pair := range [][2]*streamtest.Node{{relay.Node, broker.Node}, {child.Node, relay.Node}} {
		if err := net.Connect(pair[0], pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	subscribe(t, relay, broker, sp)
	r := openRaw(t, child, relay)
	relayJoin(t, r, sp)
	r.send(attestation(t, admin))
	pub := &pb.Frame{Kind: &pb.Frame_Message{Message: update(t, admin, sp, 0, "once")}}
	r.send(pub)
	r.send(pub)
	relay.rec.wait(t, "the copy dropped", dropped(bps.CounterRetransmit))
	if n := relay.rec.count(kind(bps.EventForward)); n != 1 {
		t.Fatalf("forwarded %d times, want once", n)
	}
}

// probedChild is a raw child attached to a full broker's only slot, and a
// join that makes the broker probe it: the child reads the Probe, answers
// with cands, and the joiner's Ack comes back.
func probedChild(t *testing.T, cands func(pr *pb.Probe) []*pb.Candidate) (broker *tnode, child *raw, ack *pb.Ack) {
	t.Helper()
	broker, child, ack, _ = probedChildWait(t, 5*time.Second, cands)
	return broker, child, ack
}

// probedChildWait is probedChild with the broker's probe wait; cands nil:
// the child does not answer in time.
func probedChildWait(t *testing.T, wait time.Duration, cands func(pr *pb.Probe) []*pb.Candidate) (broker *tnode, child *raw, ack *pb.Ack, probe *pb.Probe) {
	t.Helper()
	net := newNetwork(t)
	sp := feedSpec(t, "probed", newKey(t))
	broker = newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Tree: bps.Tree{ProbeWait: wait}})
	kid, joiner := newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})
	for _, n := range []*tnode{kid, joiner} {
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	child = openRaw(t, kid, broker)
	if a := child.join(&pb.Join{Cohort: sp.PB(), Multihop: true}); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	j := openRaw(t, joiner, broker)
	acked := make(chan *pb.Ack, 1)
	go func() {
		if _, err := j.s.Write(bps.EncodeFrame(&pb.Join{Cohort: sp.PB(), Multihop: true})); err != nil {
			acked <- nil
			return
		}
		a := new(pb.Ack)
		if err := j.read(a); err != nil {
			a = nil
		}
		acked <- a
	}()
	f := new(pb.Frame)
	if err := child.read(f); err != nil || f.GetProbe() == nil {
		t.Fatalf("the child read %v, %v; want a probe", f, err)
	}
	probe = f.GetProbe()
	if cands != nil {
		child.send(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: probe.Nonce, Candidates: cands(probe)}}})
	}
	select {
	case ack = <-acked:
	case <-ctxT(t).Done():
		t.Fatal("the joiner got no Ack")
	}
	return broker, child, ack, probe
}

// candidateAt is a candidate at depth, at an overlay nobody holds.
func candidateAt(t *testing.T, depth uint32) *pb.Candidate {
	return &pb.Candidate{Overlay: swarm.RandAddress(t).Bytes(), Depth: depth}
}

// TestHostileCandidateAboveProbe: a child answering a probe with a
// candidate shallower than the subtree it was probed for — depth 0, the
// root's own — provably lies: its stream is reset and its peer
// blocklisted, and the joiner is not sent there.
func TestHostileCandidateAboveProbe(t *testing.T) {
	t.Parallel()
	broker, child, ack := probedChild(t, func(pr *pb.Probe) []*pb.Candidate {
		return []*pb.Candidate{candidateAt(t, pr.Depth-1)}
	})
	expectReset(t, child)
	broker.rec.wait(t, "the liar blocklisted", kind(bps.EventViolation))
	if ack == nil || ack.Status != pb.Status_FULL || len(ack.Candidates) != 0 {
		t.Fatalf("the joiner's ack %v, want FULL without the forged candidate", ack)
	}
}

// TestHostileTwoCandidatesFromOneChild: the two candidates a joiner is
// given come from different subtrees: one child answering two (both
// plausible) yields one, so it can never be both parents.
func TestHostileTwoCandidatesFromOneChild(t *testing.T) {
	t.Parallel()
	_, _, ack := probedChild(t, func(pr *pb.Probe) []*pb.Candidate {
		return []*pb.Candidate{candidateAt(t, pr.Depth), candidateAt(t, pr.Depth+1)}
	})
	if ack == nil || ack.Status != pb.Status_FULL || len(ack.Candidates) != 1 {
		t.Fatalf("the joiner's ack %v, want FULL with one candidate", ack)
	}
}

// TestHostilePeerStreamsBounded: one peer holds a bounded number of
// plain streams (declaring no address: the ones a probe asks and a tree
// grows through) in one cohort, so more of them buy it no more say; the
// streams it opens as publishers — a bridge node's local publishers — are
// bounded by the cohort's own bounds only.
func TestHostilePeerStreamsBounded(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 1)
	admin := newKey(t)
	sp := mnemonicAll(t, "one peer, many streams", admin)
	for i := range 3 {
		ack := openRaw(t, cl[0], broker).join(&pb.Join{Cohort: sp.PB(), Multihop: true})
		if want := pb.Status_OK; i == 2 {
			if ack.Status != pb.Status_FULL {
				t.Fatalf("plain stream %d of one peer: %s, want FULL", i+1, ack.Status)
			}
		} else if ack.Status != want {
			t.Fatalf("plain stream %d of one peer: %s, want OK", i+1, ack.Status)
		}
	}
	for i := range 6 {
		if ack := openRaw(t, cl[0], broker).join(&pb.Join{Cohort: sp.PB(), Addr: newKey(t).addr, Multihop: true}); ack.Status != pb.Status_OK {
			t.Fatalf("publisher stream %d of one peer: %s, want OK", i+1, ack.Status)
		}
	}
}

// TestHostileReferFromStranger: asking where else to attach (a refer-Join)
// is a child's question to its parent; a peer that holds no stream in the
// cohort here gets a bare FULL and makes the node probe nothing.
func TestHostileReferFromStranger(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	sp := feedSpec(t, "refer from a stranger", newKey(t))
	broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Tree: bps.Tree{ProbeWait: 200 * time.Millisecond}})
	kid, stranger := newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})
	for _, n := range []*tnode{kid, stranger} {
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	if a := openRaw(t, kid, broker).join(&pb.Join{Cohort: sp.PB(), Multihop: true}); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	ack := openRaw(t, stranger, broker).join(&pb.Join{Cohort: sp.PB(), Multihop: true, Refer: true})
	if ack.Status != pb.Status_FULL || len(ack.Candidates) != 0 {
		t.Fatalf("a stranger's refer: %v, want a bare FULL", ack)
	}
	if n := broker.rec.count(kind(bps.EventProbe)); n != 0 {
		t.Fatalf("a stranger's refer made the node probe %d times", n)
	}
}

// TestHostileLateCandidatesFlood: a late answer to a probe is dropped
// without penalty — the child may simply be slow — but a child answers a
// probe once, so a stream of late answers is a flood: reset, blocklisted.
func TestHostileLateCandidatesFlood(t *testing.T) {
	t.Parallel()
	var nonce uint64
	broker, child, _ := probedChild(t, func(pr *pb.Probe) []*pb.Candidate {
		nonce = pr.Nonce
		return nil
	})
	late := &pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: nonce}}}
	for range 40 {
		if _, err := child.s.Write(bps.EncodeFrame(late)); err != nil {
			break // reset already
		}
	}
	expectReset(t, child)
	broker.rec.wait(t, "the flood blocklisted", kind(bps.EventViolation))
}

// TestHostileWithholdingFramesSister: under ALL anyone may author, so a
// parent can deliver valid messages that never went through the root and
// its honest sister never had. The node cannot tell them from withheld
// ones, so it blames nobody for them: lag is judged only on the cohort's
// own sequences (explicit feeds, the service feed), and the honest parent
// stays.
func TestHostileWithholdingFramesSister(t *testing.T) {
	t.Parallel()
	mt := newMTree(t, 1, 2, 2, func(a key) *bps.Spec { return mnemonicAll(t, "framing the sister", a) })
	mt.subscribeAll()
	honest := mt.nodes[0]
	down := make(chan *pb.Frame, 1)
	evil := hostileParent(t, mt.net, 1, down)
	joiner, sub := mt.joinUnder(honest, evil, 3)
	author := newKey(t)
	const n = 64 + 4 // the lag window, then enough to blame MaxLag
	for i := range n {
		msg, err := bps.SOCUpdate(author.signer, topicOf(fmt.Sprint("only down one path ", i)), []byte("framing"))
		if err != nil {
			t.Fatal(err)
		}
		down <- &pb.Frame{Kind: &pb.Frame_Message{Message: msg}}
		if d := recv(t, sub); !bytes.Equal(d.Address.Bytes(), msg.Address) {
			t.Fatalf("delivery %d: %s", i, d.Address)
		}
	}
	if n := joiner.rec.count(kind(bps.EventWithheld)); n != 0 {
		t.Fatalf("%d parents dropped for withholding what only the attacker delivered", n)
	}
	if !slices.ContainsFunc(sub.Parents(), honest.Overlay().Equal) {
		t.Fatal("the honest parent was dropped")
	}
}

// TestHostileRevokedCutAtDeadline: a publisher revoked in a closed cohort
// that no later roster names again is cut at the claim deadline (counted
// claim_timeout), like any silent stream: a revoked seat is not held for
// ever.
func TestHostileRevokedCutAtDeadline(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Timing: bps.Timing{ClaimDeadline: 2 * time.Second}}, 2)
	admin, bob := newKey(t), newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("revoked, cut"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	send(t, a, rosterMsg(t, admin, sp, 0, bob))
	broker.rec.wait(t, "the grant", kind(bps.EventAccept))
	b := publishOpts(t, cl[1], broker, sp, bob, true)
	recvC(t, b.C(), "bob's first delivery")
	send(t, a, rosterMsg(t, admin, sp, 1))
	recvC(t, b.C(), "bob told his revocation")
	select {
	case <-b.Done():
	case <-ctxT(t).Done():
		t.Fatal("the revoked stream was never cut")
	}
	if got := cohortInfo(t, broker, sp).Counters["claim_timeout"]; got != 1 {
		t.Fatalf("claim_timeout = %d, want 1", got)
	}
}

// TestHostileRelayedGarbageBounded: a child may forward anything up
// (SWIP-61 item 11), so relayed publications that fail are dropped, not
// punished — but each costs a signature check, so a child stream makes the
// node check at most a bounded number that fail per second; the rest are
// dropped unchecked.
func TestHostileRelayedGarbageBounded(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 1)
	admin := newKey(t)
	sp := feedSpec(t, "relayed garbage", admin)
	r := openRaw(t, cl[0], broker)
	relayJoin(t, r, sp)
	r.send(attestation(t, admin)) // what it relays then names the admin's chunks
	bad := update(t, admin, sp, 0, "tampered")
	bad.Data[len(bad.Data)-1] ^= 1
	frame := bps.EncodeFrame(&pb.Frame{Kind: &pb.Frame_Message{Message: bad}})
	const n = 200
	r.sendBytes(bytes.Repeat(frame, n))
	// Frames are read in order: a violation after them marks them all read.
	r.send(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: 1}}})
	broker.rec.wait(t, "the closing violation", kind(bps.EventViolation))
	checked := broker.rec.count(dropped(bps.CounterInvalidSOC))
	if checked == 0 || checked > 2*32 {
		t.Fatalf("the node checked %d of %d failing relayed publications, want at most 32 a second", checked, n)
	}
}

// TestHostileLateAnswerTolerated: a slow child that answers a probe after
// it closed is not punished — once; a second answer to the same probe is.
func TestHostileLateAnswerTolerated(t *testing.T) {
	t.Parallel()
	broker, child, ack, probe := probedChildWait(t, 100*time.Millisecond, nil)
	if ack == nil || ack.Status != pb.Status_FULL {
		t.Fatalf("the joiner's ack %v, want FULL", ack)
	}
	late := &pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: probe.Nonce}}}
	child.send(late)
	// Still served: a relayed publication that fails is read and counted.
	bad := update(t, newKey(t), feedSpec(t, "probed", newKey(t)), 0, "x")
	child.send(&pb.Frame{Kind: &pb.Frame_Message{Message: bad}})
	broker.rec.wait(t, "the stream still read", func(e bps.Event) bool { return e.Kind == bps.EventDrop })
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("a slow child punished for one late answer: %d violations", n)
	}
	child.send(late)
	expectReset(t, child)
	broker.rec.wait(t, "the second late answer punished", kind(bps.EventViolation))
}

// relayJoin joins r as a relay that forwards its subtree's claims.
func relayJoin(t *testing.T, r *raw, sp *bps.Spec) {
	t.Helper()
	if ack := r.join(&pb.Join{Cohort: sp.PB(), Multihop: true, Attests: true}); ack.Status != pb.Status_OK || !ack.Multihop || !ack.Attests {
		t.Fatalf("ack %v", ack)
	}
}

// attestation is a forwarded claim k signed, genuine, over a challenge and
// an attachment node of its own choosing.
func attestation(t *testing.T, k key) *pb.Frame {
	t.Helper()
	challenge, broker := swarm.RandAddress(t).Bytes(), swarm.RandAddress(t)
	c, err := bps.SignClaim(k.signer, k.addr, challenge, broker, 0)
	if err != nil {
		t.Fatal(err)
	}
	c.Challenge, c.Broker = challenge, broker.Bytes()
	return &pb.Frame{Kind: &pb.Frame_Claim{Claim: c}}
}

// TestHostilePublisherRateBounded: under ALL anyone may author, so nothing
// but a rate bounds one publisher. A spammer publishing far past
// PublishRate on the cohort is cut at the node that takes its
// publications — dropped and counted rate_limited, its stream kept —
// while an honest publisher on the same cohort, within its own rate, is
// delivered whole.
func TestHostilePublisherRateBounded(t *testing.T) {
	t.Parallel()
	const burst, n = 8, 100
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{PublishRate: 1, PublishBurst: burst}}, 3)
	sp := mnemonicAll(t, "one spammer", newKey(t))
	sub := subscribe(t, cl[2], broker, sp)
	spammer, honest := newKey(t), newKey(t)
	publishAll := func(c *tnode, k key) *bps.Publisher {
		p, err := c.svc.Publish(ctxT(t), broker.Overlay(), sp, bps.PublishOptions{Addr: k.addr})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		return p
	}
	sp1, hp := publishAll(cl[0], spammer), publishAll(cl[1], honest)
	soc := func(k key, id string) *pb.Message {
		m, err := bps.SOCUpdate(k.signer, topicOf(id), []byte(id))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for i := range n {
		send(t, sp1, soc(spammer, fmt.Sprint("spam ", i)))
	}
	want := make(map[string]bool)
	for i := range burst / 2 {
		m := soc(honest, fmt.Sprint("honest ", i))
		want[swarm.NewAddress(m.Address).ByteString()] = true
		send(t, hp, m)
	}
	// At 1 a second the spammer gets its burst and a token a second since:
	// far fewer than n in any run that has not already timed out.
	const cut = n - burst - 20
	for spam := 0; len(want) > 0; {
		d := recv(t, sub)
		if !want[d.Address.ByteString()] {
			if spam++; spam > n-cut {
				t.Fatalf("%d of the spammer's %d publications delivered", spam, n)
			}
			continue
		}
		delete(want, d.Address.ByteString())
	}
	broker.rec.waitN(t, cut, "the spam cut", dropped(bps.CounterRateLimited))
	if got := cohortInfo(t, broker, sp).Counters[bps.CounterRateLimited.String()]; got < cut {
		t.Fatalf("rate_limited %d, want at least %d", got, cut)
	}
}
