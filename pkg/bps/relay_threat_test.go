// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/proto"
)

// The threat-model rows of the multihop re-base on Rev 8 (docs/protocol.md,
// "Publishing from depth without the Claim frame: the root issues every
// publisher challenge in its tree"): a lying relay against the root that
// issues every publisher challenge in its tree. The liar is a hand-driven
// multihop stream joined as every relay's own stream is (the zero address,
// listening), which sends up whatever envelope frames the test makes up.

// liar is a lying relay's stream to its parent.
type liar struct {
	*raw
	node  *tnode
	nonce uint64
}

// newLiar is a lying relay attached to parent as its child in sp.
func newLiar(t *testing.T, net *streamtest.Network, parent *tnode, sp *bps.Spec) *liar {
	t.Helper()
	nd := newNode(t, net, bps.Options{})
	if err := net.Connect(nd.Node, parent.Node); err != nil {
		t.Fatal(err)
	}
	r := openRaw(t, nd, parent)
	if ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Listen: true, Multihop: true}); ack.Status != pb.Status_OK || !ack.Multihop {
		t.Fatalf("the liar's Ack: %v", ack)
	}
	return &liar{raw: r, node: nd}
}

// relay sends b up as a publication relayed from below.
func (l *liar) relay(b *pb.Broadcast) {
	l.t.Helper()
	l.send(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: b}})
}

// route tells the parent that publications under challenge, leased for
// addr, come up this stream too.
func (l *liar) route(challenge, addr []byte) {
	l.t.Helper()
	l.send(&pb.Frame{Kind: &pb.Frame_Route{Route: &pb.Route{Challenge: challenge, Addr: addr}}})
}

// askLease sends a Lease for addr and returns its nonce.
func (l *liar) askLease(addr []byte) uint64 {
	l.t.Helper()
	l.nonce++
	l.send(&pb.Frame{Kind: &pb.Frame_Lease{Lease: &pb.Lease{Nonce: l.nonce, Addr: addr}}})
	return l.nonce
}

// lease asks the root, through the parent, for a challenge leased for addr
// and returns it (nil: refused).
func (l *liar) lease(addr []byte) []byte {
	l.t.Helper()
	return l.leased(l.askLease(addr))
}

// leased reads frames until the answer to the Lease of nonce, skipping
// deliveries.
func (l *liar) leased(nonce uint64) []byte {
	l.t.Helper()
	for {
		f := l.frame()
		if ld := f.GetLeased(); ld != nil {
			if ld.Nonce != nonce {
				l.t.Fatalf("Leased for nonce %d, want %d", ld.Nonce, nonce)
			}
			return ld.Challenge
		}
	}
}

// delivery reads frames until the next delivery.
func (l *liar) delivery() *pb.Broadcast {
	l.t.Helper()
	for {
		if b := l.frame().GetBroadcast(); b != nil {
			return b
		}
	}
}

func (l *liar) frame() *pb.Frame {
	l.t.Helper()
	f := new(pb.Frame)
	if err := l.read(f); err != nil {
		l.t.Fatalf("the liar's read: %v", err)
	}
	return f
}

// counter is counter c of sp's cohort at nd.
func counter(t *testing.T, nd *tnode, sp *bps.Spec, c bps.Counter) uint64 {
	t.Helper()
	return cohortInfo(t, nd, sp).Counters[c.String()]
}

// notBlocklisted fails t if nd blocklisted peer.
func notBlocklisted(t *testing.T, nd, peer *tnode) {
	t.Helper()
	for _, b := range nd.Blocklists() {
		if b.Peer.Equal(peer.Overlay()) {
			t.Fatalf("%s blocklisted the relaying child %s: relayed frames are never held against it (SWIP-61 item 11)", nd.Overlay(), peer.Overlay())
		}
	}
}

// forgedSignature is b with its signature broken.
func forgedSignature(b *pb.Broadcast) *pb.Broadcast {
	f := proto.Clone(b).(*pb.Broadcast)
	f.Soc[32+1] ^= 1 // id(32) ‖ sig(65) ‖ span ‖ payload
	return f
}

// TestHostileRelayInventsChallenge: a lying relay forwards publications
// under a challenge it invented (it gave the admin, attached to it, a
// challenge of its own instead of a lease, and the admin signed under it).
// The root honours only leases it drew and still holds: every such frame is
// dropped and counted wrong_challenge before any signature is checked (a
// forged one is counted the same, not invalid_soc), a Route for it is
// refused, no cursor moves — the admin's genuine update 0 is still the
// subscriber's first delivery — and the relaying child is not held to
// account.
func TestHostileRelayInventsChallenge(t *testing.T) {
	t.Parallel()
	net, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "a relay invents a challenge", admin)
	sub := subscribe(t, cl[0], broker, sp)
	l := newLiar(t, net, broker, sp)

	invented := topicOf("a challenge no root drew")
	l.route(invented, admin.addr) // first: the reader takes frames in order
	for i := range uint64(3) {
		l.relay(update(t, admin, sp, invented, 5+i, "under an invented challenge"))
	}
	l.relay(forgedSignature(update(t, admin, sp, invented, 8, "forged")))
	broker.rec.waitN(t, 4, "the liar's four publications dropped", dropped(bps.CounterWrongChallenge))
	info := cohortInfo(t, broker, sp)
	if got := info.Counters[bps.CounterWrongChallenge.String()]; got != 5 {
		t.Fatalf("wrong_challenge %d, want 5: four publications and the Route", got)
	}
	if got := info.Counters[bps.CounterInvalidSOC.String()]; got != 0 {
		t.Fatalf("invalid_soc %d: a signature was checked under a challenge the root never drew", got)
	}
	if info.Accepted != 0 || info.Cursor != 0 {
		t.Fatalf("accepted %d, cursor %d: a publication under an invented challenge counted", info.Accepted, info.Cursor)
	}

	p := publish(t, cl[1], broker, sp, admin, 0)
	sendUpdate(t, p, 0, "genuine")
	if d := recv(t, sub); d.Index != 0 || !bytes.Equal(d.Owner, admin.addr) {
		t.Fatalf("first delivery %+v, want the admin's genuine update 0", d)
	}
	if d := l.delivery(); d.Index != 0 || !bytes.Equal(d.Challenge, p.Challenge()) {
		t.Fatalf("the liar's first delivery is index %d under %x, want the genuine update 0", d.Index, d.Challenge)
	}
	notBlocklisted(t, broker, l.node)
}

// TestHostileRelayReplaysOldSession: a lying relay replays an earlier
// session of the publisher — its updates captured as deliveries, signed
// under the challenge of a stream that has ended — at the broker that
// carried them and at another broker, where the cohort is fresh (its
// cursor at 0, as after a reclaim). Neither root drew that challenge as a
// lease: every replayed frame is dropped wrong_challenge, a Route for it is
// refused, nothing reaches the audience, and the fresh cohort's cursor
// stays at 0 — the admin's update 0 of its new session is delivered there
// first.
func TestHostileRelayReplaysOldSession(t *testing.T) {
	t.Parallel()
	net, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "a relay replays an old session", admin)
	l := newLiar(t, net, broker, sp)

	// The earlier session: updates 0..2 on the admin's own stream, which
	// then ends. The liar captures them as its deliveries.
	old := publish(t, cl[0], broker, sp, admin, 0)
	const n = 3
	for i := range uint64(n) {
		sendUpdate(t, old, i, "the earlier session")
	}
	var captured []*pb.Broadcast
	for range n {
		captured = append(captured, l.delivery())
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	broker.rec.wait(t, "the earlier session's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(cl[0].Overlay())
	})

	// At the broker that carried them.
	before := counter(t, broker, sp, bps.CounterWrongChallenge)
	l.route(captured[0].Challenge, admin.addr)
	for _, b := range captured {
		l.relay(b)
	}
	broker.rec.waitN(t, n, "the replayed frames dropped", dropped(bps.CounterWrongChallenge))
	if got := counter(t, broker, sp, bps.CounterWrongChallenge) - before; got != n+1 {
		t.Fatalf("wrong_challenge rose by %d, want %d: the replayed frames and the Route", got, n+1)
	}
	if got := counter(t, broker, sp, bps.CounterRetransmit); got != 0 {
		t.Fatalf("retransmit %d: a replayed frame got past the challenge check", got)
	}

	// At another broker, where the cohort is fresh.
	other := newNode(t, net, bps.Options{})
	watcher, pubNode := newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})
	for _, nd := range []*tnode{watcher, pubNode} {
		if err := net.Connect(nd.Node, other.Node); err != nil {
			t.Fatal(err)
		}
	}
	sub := subscribe(t, watcher, other, sp)
	l2 := newLiar(t, net, other, sp)
	l2.route(captured[0].Challenge, admin.addr)
	for _, b := range captured {
		l2.relay(b)
	}
	other.rec.waitN(t, n, "the replayed frames dropped at the other broker", dropped(bps.CounterWrongChallenge))
	if info := cohortInfo(t, other, sp); info.Accepted != 0 || info.Cursor != 0 {
		t.Fatalf("the other broker accepted %d, cursor %d: the replay counted", info.Accepted, info.Cursor)
	}
	p := publish(t, pubNode, other, sp, admin, 0)
	sendUpdate(t, p, 0, "the new session")
	d := recv(t, sub)
	if d.Index != 0 || !bytes.Equal(d.Challenge, p.Challenge()) {
		t.Fatalf("first delivery at the other broker: index %d under %x, want the new session's update 0", d.Index, d.Challenge)
	}
	notBlocklisted(t, broker, l.node)
	notBlocklisted(t, other, l2.node)
}

// TestHostileRelaySwapsChallenge: a lying relay holds a live lease for the
// admin's address and puts its challenge on chunks the admin signed for an
// earlier stream. The challenge is in the id's preimage: the chunk fails
// validation at the honest relay above it — dropped, counted invalid_soc,
// not forwarded, not held against the liar (SWIP-61 item 11) — and at the
// root the same.
func TestHostileRelaySwapsChallenge(t *testing.T) {
	t.Parallel()
	mt := newMTree(t, 1, 4, 2, func(a key) *bps.Spec { return feedSpec(t, "a relay swaps the challenge", a) })
	mt.subscribeAll()
	honest := mt.nodes[0]

	// Captured: the admin's updates of its own stream at the root.
	l := newLiar(t, mt.net, honest, mt.sp)
	p := mt.adminPublisher()
	captured := mt.sendN(p, 2, "captured")
	for i := range captured {
		if d := l.delivery(); !proto.Equal(d, captured[i]) {
			t.Fatalf("the liar's delivery %d is not the admin's update", i)
		}
	}
	expectUpdates(t, mt.subs[0], 0, 2)

	// Below the honest relay.
	leased := l.lease(mt.admin.addr)
	if len(leased) != 32 {
		t.Fatalf("the root refused the liar a lease: %x", leased)
	}
	swapped := proto.Clone(captured[1]).(*pb.Broadcast)
	swapped.Challenge, swapped.Index = leased, 2
	l.relay(swapped)
	honest.rec.wait(t, "the swapped chunk dropped at the relay", dropped(bps.CounterInvalidSOC))
	if n := honest.rec.count(kind(bps.EventForward)); n != 0 {
		t.Fatalf("the relay forwarded %d swapped chunks", n)
	}
	notBlocklisted(t, honest, l.node)

	// At the root.
	l2 := newLiar(t, mt.net, mt.broker, mt.sp)
	leased2 := l2.lease(mt.admin.addr)
	swapped2 := proto.Clone(captured[1]).(*pb.Broadcast)
	swapped2.Challenge, swapped2.Index = leased2, 2
	before := counter(t, mt.broker, mt.sp, bps.CounterInvalidSOC)
	l2.relay(swapped2)
	mt.broker.rec.wait(t, "the swapped chunk dropped at the root", dropped(bps.CounterInvalidSOC))
	if got := counter(t, mt.broker, mt.sp, bps.CounterInvalidSOC) - before; got != 1 {
		t.Fatalf("invalid_soc rose by %d at the root, want 1", got)
	}
	if info := cohortInfo(t, mt.broker, mt.sp); info.Cursor != 2 {
		t.Fatalf("the root's cursor %d, want 2: a swapped chunk moved it", info.Cursor)
	}
	notBlocklisted(t, mt.broker, l2.node)

	// Both liars' streams survive: the admin's next update reaches them.
	mt.publishN(p, 2, 3)
	for _, x := range []*liar{l, l2} {
		if d := x.delivery(); d.Index != 2 || !bytes.Equal(d.Challenge, p.Challenge()) {
			t.Fatalf("a liar's next delivery is index %d, want the admin's update 2", d.Index)
		}
	}
	expectUpdates(t, mt.subs[0], 2, 3)
}

// TestHostileRelayHoardsLeases: a lying relay leases challenges for
// addresses and never uses them, to fill the root's table. The root holds
// at most MaxLeasesPerChild for one root child stream and refuses the next
// (Leased without a challenge); the liar fills its own share only — the
// admin attached at an honest relay, another root child, is still leased a
// challenge, claims and publishes — and its hoard ends with its stream: a
// Route for a hoarded challenge is refused afterwards. An honest relay's
// pending stream that never claims gives its lease back at the claim
// deadline: the root refuses a Route for it after.
func TestHostileRelayHoardsLeases(t *testing.T) {
	if testing.Short() {
		t.Skip("4,097 leases")
	}
	t.Parallel()
	mt := newMTreeWith(t, 1, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 4}, Timing: bps.Timing{ClaimDeadline: 500 * time.Millisecond}}, 2,
		func(a key) *bps.Spec { return feedSpec(t, "a relay hoards leases", a) })
	mt.subscribeAll()
	honest := mt.nodes[0]
	hoarder := newLiar(t, mt.net, mt.broker, mt.sp)

	// In rounds the root's queue to the liar holds (QueueLen 64).
	const round = 32
	var hoard, hoardAddrs [][]byte
	for len(hoard) < bps.MaxLeasesPerChild {
		var nonces []uint64
		for range min(round, bps.MaxLeasesPerChild-len(hoard)) {
			a := newKey(t).addr
			hoardAddrs = append(hoardAddrs, a)
			nonces = append(nonces, hoarder.askLease(a))
		}
		for _, nc := range nonces {
			ch := hoarder.leased(nc)
			if len(ch) != 32 {
				t.Fatalf("lease %d refused within the bound", len(hoard))
			}
			hoard = append(hoard, ch)
		}
	}
	if ch := hoarder.lease(newKey(t).addr); ch != nil {
		t.Fatalf("lease %d granted past the bound of %d per root child stream", bps.MaxLeasesPerChild+1, bps.MaxLeasesPerChild)
	}

	// A pending stream at the honest relay — the admin's address, never
	// claimed — is leased a challenge and cut at the claim deadline.
	pendingNode := newNode(t, mt.net, bps.Options{})
	if err := mt.net.Connect(pendingNode.Node, honest.Node); err != nil {
		t.Fatal(err)
	}
	pending := openRaw(t, pendingNode, honest)
	ack := pending.join(&pb.Join{Cohort: mt.sp.PB(), Addr: mt.admin.addr})
	if ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
		t.Fatalf("the pending stream's Ack: %v", ack)
	}
	honest.rec.wait(t, "the pending stream cut at the claim deadline", dropped(bps.CounterClaimTimeout))
	honest.rec.wait(t, "the pending stream's end", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(pendingNode.Overlay())
	})

	// The admin at the honest relay is leased a challenge, claims with it
	// and publishes. Its Lease goes up the relay's stream after the
	// pending stream's Release: once its update is accepted, the release
	// was taken.
	pubNode := newNode(t, mt.net, bps.Options{})
	p := publishBelow(t, mt.net, pubNode, honest, mt.sp, mt.admin)
	sendUpdate(t, p, 0, "leased beside the hoard")
	if d := recv(t, mt.subs[0]); d.Index != 0 || !bytes.Equal(d.Owner, mt.admin.addr) {
		t.Fatalf("delivery %+v, want the admin's update at the honest relay", d)
	}

	// Whether the root holds a lease, seen by a third liar: a Route it
	// refuses is counted wrong_challenge (untraced), then a marker under an
	// invented challenge, which the reader takes after the Route, is.
	l := newLiar(t, mt.net, mt.broker, mt.sp)
	marked := 0
	holds := func(ch, addr []byte) bool {
		t.Helper()
		before := counter(t, mt.broker, mt.sp, bps.CounterWrongChallenge)
		l.route(ch, addr)
		l.relay(update(t, mt.admin, mt.sp, topicOf("an invented challenge"), 1, "a marker"))
		marked++
		mt.broker.rec.waitN(t, marked, "the marker dropped", dropped(bps.CounterWrongChallenge))
		return counter(t, mt.broker, mt.sp, bps.CounterWrongChallenge)-before == 1
	}
	if !holds(p.Challenge(), mt.admin.addr) || !holds(hoard[1], hoardAddrs[1]) {
		t.Fatal("the root refused a Route for a lease it holds")
	}
	if holds(ack.Challenge, mt.admin.addr) {
		t.Fatal("the root holds the lease of a pending stream cut at the claim deadline")
	}

	// The hoard ends with the hoarder's stream.
	_ = hoarder.s.Reset()
	mt.broker.rec.wait(t, "the hoarder's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(hoarder.node.Overlay())
	})
	if holds(hoard[0], hoardAddrs[0]) {
		t.Fatal("the root holds a lease hoarded by a stream that ended")
	}
}

// TestRelayIsATransparentHop: a relay leases a challenge for the admin and
// hands it to the admin, which signs under it. Nothing is needed: the
// admin's updates, signed by its key, reach the root as the admin's (the
// audience gets them, owner the admin) — the relay can withhold one, not
// author one: a chunk it signs under that lease with its own key is not
// valid at the admin's address (invalid_soc at the root, not held against
// it) and reaches nobody (Rev 8's forwarded-challenge row).
func TestRelayIsATransparentHop(t *testing.T) {
	t.Parallel()
	net, broker, cl := cluster(t, bps.Options{}, 1)
	admin := newKey(t)
	sp := feedSpec(t, "a relay is a transparent hop", admin)
	sub := subscribe(t, cl[0], broker, sp)
	l := newLiar(t, net, broker, sp)
	leased := l.lease(admin.addr)
	if len(leased) != 32 {
		t.Fatalf("the root refused the lease: %x", leased)
	}

	// What the admin signed under the challenge the relay handed it.
	l.relay(auth(t, admin, sp, leased))
	u0, u1, u2 := update(t, admin, sp, leased, 0, "zero"), update(t, admin, sp, leased, 1, "one"), update(t, admin, sp, leased, 2, "two")
	l.relay(u0)
	// u1 withheld.
	relayKey := newKey(t)
	authored := chunk(t, relayKey, sp, pb.Kind_DATA, leased, 1, []byte("authored by the relay"))
	l.relay(authored)
	broker.rec.wait(t, "the relay's own chunk dropped", dropped(bps.CounterInvalidSOC))
	l.relay(u2)

	for _, want := range []*pb.Broadcast{u0, u2} {
		d := recv(t, sub)
		if d.Index != want.Index || !bytes.Equal(d.Owner, admin.addr) || !bytes.Equal(d.Data, want.Soc) {
			t.Fatalf("delivery %d by %x, want the admin's update %d", d.Index, d.Owner, want.Index)
		}
	}
	if n := broker.rec.count(func(e bps.Event) bool { return e.Kind == bps.EventAccept && !e.Service }); n != 2 {
		t.Fatalf("the root accepted %d updates, want the admin's two", n)
	}
	notBlocklisted(t, broker, l.node)
	_ = u1
}

// TestHostileRelayRoutesForeignLease: a lying relay routes up its own
// stream a lease the root issued for a publisher attached at an honest
// relay, its sibling, and replays that publisher's updates. They are
// accepted only as what they are, the publisher's genuine updates under a
// live lease: the root's cursor makes each count once (retransmit), and
// the audience gets each once. The liar cannot end the lease by leaving
// (the publisher publishes on); once the publisher's stream ends and its
// relay releases the lease, the root no longer honours it on the liar's
// stream either — a chunk the publisher signed under it and the liar held
// back is dropped (wrong_challenge).
func TestHostileRelayRoutesForeignLease(t *testing.T) {
	t.Parallel()
	mt := newMTree(t, 1, 4, 2, func(a key) *bps.Spec { return mnemonicAll(t, "a relay routes a foreign lease", a) })
	mt.subscribeAll()
	honest, sub := mt.nodes[0], mt.subs[0]
	publisherAt := func(k key) (*bps.Publisher, *tnode) {
		nd := newNode(t, mt.net, bps.Options{})
		return publishBelow(t, mt.net, nd, honest, mt.sp, k), nd
	}
	kp := newKey(t)
	p, pNode := publisherAt(kp)
	leased := p.Challenge()

	// The liar routes the sibling's lease and replays its updates.
	liar := newLiar(t, mt.net, mt.broker, mt.sp)
	liar.route(leased, kp.addr)
	for i := range uint64(3) {
		sendUpdate(t, p, i, "genuine")
	}
	var captured []*pb.Broadcast
	for range 3 {
		captured = append(captured, liar.delivery())
	}
	expectOwned(t, sub, kp, 0, 3)
	for _, b := range captured {
		liar.relay(b)
	}
	mt.broker.rec.waitN(t, 3, "the replays dropped as retransmits", dropped(bps.CounterRetransmit))
	if got := counter(t, mt.broker, mt.sp, bps.CounterWrongChallenge); got != 0 {
		t.Fatalf("wrong_challenge %d: the Route of a live lease was refused", got)
	}

	// The liar leaves; the lease is the publisher's still.
	_ = liar.s.Reset()
	mt.broker.rec.wait(t, "the liar's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(liar.node.Overlay())
	})
	sendUpdate(t, p, 3, "after the liar left")
	expectOwned(t, sub, kp, 3, 4)

	// A second liar routes the lease and holds back a chunk signed under
	// it; the publisher's stream ends and its relay releases the lease.
	holder := newLiar(t, mt.net, mt.broker, mt.sp)
	holder.route(leased, kp.addr)
	holder.relay(captured[0]) // a marker the reader takes after the Route: a retransmit iff the Route was taken
	mt.broker.rec.waitN(t, 4, "the marker dropped as a retransmit", dropped(bps.CounterRetransmit))
	if got := counter(t, mt.broker, mt.sp, bps.CounterWrongChallenge); got != 0 {
		t.Fatalf("wrong_challenge %d: the lease ended when the liar that routed it left", got)
	}
	withheld := update(t, kp, mt.sp, leased, 10, "held back")
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	honest.rec.wait(t, "the publisher's stream ended at its relay", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(pNode.Overlay())
	})
	// The relay's Release goes up its stream ahead of anything it forwards
	// later: once the root accepted a later publication through it, the
	// release was taken.
	kq := newKey(t)
	q, _ := publisherAt(kq)
	sendUpdate(t, q, 0, "after the release")
	expectOwned(t, sub, kq, 0, 1)
	holder.relay(withheld)
	mt.broker.rec.wait(t, "the held-back chunk dropped", dropped(bps.CounterWrongChallenge))
	sendUpdate(t, q, 1, "next")
	expectOwned(t, sub, kq, 1, 2) // nothing of the released lease's between
	notBlocklisted(t, mt.broker, holder.node)
}

// expectOwned reads updates from..to-1 by k from sub, in order, skipping
// service deliveries.
func expectOwned(t *testing.T, sub *bps.Subscription, k key, from, to uint64) {
	t.Helper()
	for i := from; i < to; i++ {
		d := recv(t, sub)
		if d.Service != nil {
			i--
			continue
		}
		if d.Index != i || !bytes.Equal(d.Owner, k.addr) {
			t.Fatalf("delivery %d by %x, want %d by %x", d.Index, d.Owner, i, k.addr)
		}
	}
}
