// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// TestHostileServiceReplayAfterReclaim: a cohort forgotten when its last
// stream left is made again by the next Join; a child that replays the
// admin's old ROSTER up its envelope — genuine, signed, but older than
// what the broker took — neither rolls the roster back (re-admitting a
// revoked publisher) nor moves the service cursor: the broker remembers a
// forgotten cohort's service feed, and the replay is stale. Rev 8: the old
// frame itself, under the old stream's challenge, is dropped before any
// signature (wrong_challenge); the same roster index re-signed by the admin
// for the replayer's stream is below the remembered roster cursor
// (retransmit: an admin MUST NOT reuse a roster index across sessions).
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
	broker.rec.wait(t, "the old frame dropped", dropped(bps.CounterWrongChallenge))
	broker.rec.wait(t, "the replay dropped", dropped(bps.CounterRetransmit))
	c := cohortInfo(t, broker, sp)
	if c.ServiceNext != 2 || len(c.Roster) != 0 {
		t.Fatalf("after the replay: service next %d, roster %x; want 2 and the revocation's empty roster", c.ServiceNext, c.Roster)
	}
}

// grantRevokeForget has the admin grant bob and revoke him at broker
// through from, then leave, so that the cohort is forgotten with its
// service feed at 2; it returns the grant, for a replay.
func grantRevokeForget(t *testing.T, from, broker *tnode, sp *bps.Spec, admin, bob key) (grant *pb.Broadcast) {
	t.Helper()
	a := publish(t, from, broker, sp, admin, 0)
	grant = rosterMsg(t, admin, sp, a.Challenge(), 0, bob)
	send(t, a, grant)
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 1))
	broker.rec.waitN(t, 2, "grant and revocation accepted", kind(bps.EventAccept))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	broker.rec.wait(t, "the admin's stream left", kind(bps.EventLeave))
	return grant
}

// replayUp sends the roster m up a relay stream from from to broker, as the
// strongest replayer would: a relay that holds a lease the root issued for
// the admin's address, so that its stream may carry the admin's chunks —
// first m as it was, then the same roster re-signed by the admin under the
// lease (the admin's client made to sign the old index again).
func replayUp(t *testing.T, from, broker *tnode, sp *bps.Spec, admin key, m *pb.Broadcast) {
	t.Helper()
	r := openRaw(t, from, broker)
	relayJoin(t, r, sp)
	lease := leaseFor(t, r, admin.addr)
	r.send(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: m}})
	again := chunk(t, admin, sp, pb.Kind_ROSTER, lease, m.Index, m.Soc[105:])
	r.send(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: again}})
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
		send(t, p, rosterMsg(t, k, fsp, p.Challenge(), 0))
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
	ch := a.Challenge()
	send(t, a, rosterMsg(t, admin, sp, ch, 0, bob, carol))
	broker.rec.wait(t, "the grant", kind(bps.EventAccept))
	b := publishOpts(t, cl[1], broker, sp, bob, true)
	c := publishOpts(t, cl[2], broker, sp, carol, true)
	recvC(t, b.C(), "bob's first delivery")
	recvC(t, c.C(), "carol's first delivery")
	// Claimed, not pending: a roster dropping a pending stream's address
	// resets it instead.
	broker.rec.waitN(t, 3, "three claims", kind(bps.EventClaim))

	send(t, a, rosterMsg(t, admin, sp, ch, 1, carol))
	if d := recvC(t, b.C(), "bob told his revocation"); !isRoster(d, 1) {
		t.Fatalf("bob got %+v, want the revoking roster", d)
	}
	recvC(t, c.C(), "carol told the roster")
	send(t, a, update(t, admin, sp, ch, 0, "after bob's revocation"))
	if d := recvC(t, c.C(), "carol hears the admin"); string(d.Payload()) != "after bob's revocation" {
		t.Fatalf("carol heard %q", d.Payload())
	}
	send(t, a, rosterMsg(t, admin, sp, ch, 2, bob, carol))
	if d := recvC(t, b.C(), "bob's next delivery"); !isRoster(d, 2) {
		t.Fatalf("bob's next delivery after his revocation is %+v (payload %q), want the roster that names him again", d, d.Payload())
	}
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
	for _, pair := range [][2]*streamtest.Node{{x.Node, evil}, {y.Node, x.Node}} {
		if err := net.Connect(pair[0], pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	subscribe(t, x, &tnode{Node: evil}, sp)
	subscribe(t, y, x, sp)

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

// TestHostileRelayForwardsOnce: a relay forwards a publication rootward
// once however often a child (or a loop) sends it: byte-identical frames
// within its window are dropped as retransmits, so no cycle can keep a
// frame travelling up for ever. Rev 8: the relay carries a relayed frame
// only under a lease the root issued for a publisher below that child.
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
	lease := leaseFor(t, r, admin.addr) // a publisher below the child
	pub := &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: update(t, admin, sp, lease, 0, "once")}}
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
	if a := child.join(listenJoin(sp)); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	j := openRaw(t, joiner, broker)
	acked := make(chan *pb.Ack, 1)
	go func() {
		if _, err := j.s.Write(bps.EncodeFrame(listenJoin(sp))); err != nil {
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

// TestHostilePeerStreamsBounded: one peer connection holds at most
// MaxPeerStreams streams in one cohort, counting every stream whatever it
// declares — listening, a made-up address, a publisher stream under ALL —
// so more streams buy it no more say (SWIP-74 Rev 8; docs/protocol.md
// "Bounds": 4, not Rev 8's recommended 2). Rev 3 bounded only the streams
// declaring no address; a made-up address was an ordinary subscriber.
// Another peer still joins.
func TestHostilePeerStreamsBounded(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := mnemonicAll(t, "one peer, many streams", admin)
	joins := []*pb.Join{
		listenJoin(sp),
		{Cohort: sp.PB(), Addr: newKey(t).addr, Multihop: true},
		{Cohort: sp.PB(), Addr: newKey(t).addr},
		listenJoin(sp),
		{Cohort: sp.PB(), Addr: newKey(t).addr},
		listenJoin(sp),
		{Cohort: sp.PB(), Addr: admin.addr},
	}
	for i, j := range joins {
		want := pb.Status_OK
		if i >= bps.MaxPeerStreams {
			want = pb.Status_FULL
		}
		if ack := openRaw(t, cl[0], broker).join(j); ack.Status != want {
			t.Fatalf("stream %d of one peer (addr %x): %s, want %s", i+1, j.Addr, ack.Status, want)
		}
	}
	if ack := openRaw(t, cl[1], broker).join(listenJoin(sp)); ack.Status != pb.Status_OK {
		t.Fatalf("another peer: %s", ack.Status)
	}
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("FULL is no penalty: %v", bl)
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
	if a := openRaw(t, kid, broker).join(listenJoin(sp)); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	refer := listenJoin(sp)
	refer.Refer = true
	ack := openRaw(t, stranger, broker).join(refer)
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
	// Signed under a stream of the author's at some node of the attacker's
	// (a receiver compares the challenge with nothing, Rev 8).
	ch := keccak([]byte("a stream nobody else saw"))
	const n = 64 + 4 // the lag window, then enough to blame MaxLag
	for i := range uint64(n) {
		msg := update(t, author, mt.sp, ch, i, fmt.Sprint("only down one path ", i))
		down <- &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: msg}}
		if d := recv(t, sub); d.Index != i || !bytes.Equal(d.Owner, author.addr) || !bytes.Equal(d.Data, msg.Soc) {
			t.Fatalf("delivery %d: %d from %x", i, d.Index, d.Owner)
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
// ever (its deadline runs from the revocation, past the grace).
func TestHostileRevokedCutAtDeadline(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Timing: bps.Timing{ClaimDeadline: 2 * time.Second, RevocationGrace: 100 * time.Millisecond}}, 2)
	admin, bob := newKey(t), newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("revoked, cut"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, bob))
	broker.rec.wait(t, "the grant", kind(bps.EventAccept))
	b := publishOpts(t, cl[1], broker, sp, bob, true)
	recvC(t, b.C(), "bob's first delivery")
	broker.rec.waitN(t, 2, "bob's claim", kind(bps.EventClaim)) // claimed, not pending: revoked, not unnamed
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 1))
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
	lease := leaseFor(t, r, admin.addr) // what it relays then names the admin's chunks
	bad := update(t, admin, sp, lease, 0, "tampered")
	bad.Soc[len(bad.Soc)-1] ^= 1
	frame := bps.EncodeFrame(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: bad}})
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
	bad := update(t, newKey(t), feedSpec(t, "probed", newKey(t)), make([]byte, 32), 0, "x")
	child.send(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: bad}})
	broker.rec.wait(t, "the stream still read", func(e bps.Event) bool { return e.Kind == bps.EventDrop })
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("a slow child punished for one late answer: %d violations", n)
	}
	child.send(late)
	expectReset(t, child)
	broker.rec.wait(t, "the second late answer punished", kind(bps.EventViolation))
}

// listenJoin is a relay's Join of sp: the zero address, listening, over the
// multihop envelope (docs/protocol.md: our nodes' shared streams).
func listenJoin(sp *bps.Spec) *pb.Join {
	return &pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true}
}

// relayJoin joins r as a relay: a listening stream over the envelope, which
// carries its subtree's publications up under leases it asks for.
func relayJoin(t *testing.T, r *raw, sp *bps.Spec) {
	t.Helper()
	if ack := r.join(listenJoin(sp)); ack.Status != pb.Status_OK || !ack.Multihop {
		t.Fatalf("ack %v", ack)
	}
}

// leaseFor asks, up relay stream r, for a challenge leased for addr (a
// publisher below r), as a relay does for a joiner that may publish, and
// returns it; frames the parent sends meanwhile are skipped.
func leaseFor(t *testing.T, r *raw, addr []byte) []byte {
	t.Helper()
	nonce := uint64(time.Now().UnixNano())
	r.send(&pb.Frame{Kind: &pb.Frame_Lease{Lease: &pb.Lease{Nonce: nonce, Addr: addr}}})
	for {
		f := new(pb.Frame)
		if err := r.read(f); err != nil {
			t.Fatalf("waiting for the lease: %v", err)
		}
		if l := f.GetLeased(); l != nil && l.Nonce == nonce {
			if len(l.Challenge) != 32 {
				t.Fatalf("lease refused: %x", l.Challenge)
			}
			return l.Challenge
		}
	}
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
	for i := range uint64(n) {
		send(t, sp1, update(t, spammer, sp, sp1.Challenge(), i, fmt.Sprint("spam ", i)))
	}
	want := make(map[string]bool)
	for i := range uint64(burst / 2) {
		m := update(t, honest, sp, hp.Challenge(), i, fmt.Sprint("honest ", i))
		want[string(m.Soc)] = true
		send(t, hp, m)
	}
	// At 1 a second the spammer gets its burst and a token a second since:
	// far fewer than n in any run that has not already timed out.
	const cut = n - burst - 20
	for spam := 0; len(want) > 0; {
		d := recv(t, sub)
		if !want[string(d.Data)] {
			if spam++; spam > n-cut {
				t.Fatalf("%d of the spammer's %d publications delivered", spam, n)
			}
			continue
		}
		delete(want, string(d.Data))
	}
	broker.rec.waitN(t, cut, "the spam cut", dropped(bps.CounterRateLimited))
	if got := cohortInfo(t, broker, sp).Counters[bps.CounterRateLimited.String()]; got < cut {
		t.Fatalf("rate_limited %d, want at least %d", got, cut)
	}
}
