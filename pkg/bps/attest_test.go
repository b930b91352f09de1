// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"slices"
	"testing"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestMultihopExplicitPublishFromDepth: under explicit authorship the
// admin publishes from depth. The relay it attached to verifies its claim
// and forwards it rootward; each node on the way lets that child stream
// carry the admin's publications, so the update is accepted at the root
// and reaches every subscriber. When the relay takes a new parent (its
// old one left), it sends the new parent the claim before anything else:
// nothing it forwards there is dropped for want of one.
func TestMultihopExplicitPublishFromDepth(t *testing.T) {
	t.Parallel()
	// The broker takes one publisher stream: the admin's first; its
	// second attaches at depth.
	mt := newMTreeWith(t, 6, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2, MaxPublisherStreams: 1}}, 2, func(a key) *bps.Spec { return feedSpec(t, "explicit from depth", a) })
	mt.subscribeAll()
	publish(t, mt.nodes[4], mt.broker, mt.sp, mt.admin, 0)
	pub := publish(t, mt.nodes[5], mt.broker, mt.sp, mt.admin, 0)
	relay := findNode(mt.nodes, pub.Broker())
	if relay == nil {
		t.Fatal("the admin attached at the broker, which had no room")
	}
	send(t, pub, update(t, mt.admin, mt.sp, 0, "from depth"))
	for i, sub := range mt.subs {
		if i == 5 {
			continue // its own publication: the subscription on the same node sees it too, but the test reads the others
		}
		if d := recv(t, sub); d.Index != 0 {
			t.Fatalf("node %d got index %d, want 0", i, d.Index)
		}
	}
	mt.broker.rec.wait(t, "accepted at the root", kind(bps.EventAccept))
	if n := mt.broker.rec.count(dropped(bps.CounterWrongOwner)) + mt.broker.rec.count(dropped(bps.CounterWrongStream)); n != 0 {
		t.Fatalf("the root dropped %d relayed publications of the claimed admin", n)
	}

	// One of the relay's parents leaves; the relay takes another, and
	// the claim goes up it first.
	parents := mt.position(relay).Parents
	var gone *tnode
	for i, nd := range mt.nodes {
		if gone == nil && slices.ContainsFunc(parents, nd.Overlay().Equal) {
			gone = nd
			if err := mt.subs[i].Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if gone == nil {
		t.Fatalf("the relay's parents %v are not relays of the tree", parents)
	}
	fresh := func(e bps.Event) bool {
		return e.Kind == bps.EventParent && e.Status == pb.Status_OK.String() && !slices.ContainsFunc(parents, e.Peer.Equal)
	}
	e := relay.rec.wait(t, "the relay's new parent", fresh)
	above := findNode(append(mt.nodes, mt.broker), e.Peer)
	above.rec.wait(t, "the claim sent up the new parent", func(e bps.Event) bool {
		return e.Kind == bps.EventClaim && e.Peer.Equal(relay.Overlay())
	})
	if n := above.rec.count(dropped(bps.CounterWrongOwner)); n != 0 {
		t.Fatalf("the new parent dropped %d publications for want of a claim", n)
	}
}

// TestHostileClaimlessPublishing: under explicit authorship a child's
// stream carries publications only of owners whose claim came up it. A
// relay that forwarded no claim relays a genuine update of the admin: it
// is dropped without a signature check, counted as a wrong owner, and a
// stream that keeps doing it is reset and its peer blocklisted. A node
// that did not offer to forward claims (one from before them) has what
// it relays dropped as sent on the wrong stream, unpunished. Nothing
// reaches the cohort either way.
func TestHostileClaimlessPublishing(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "claimless", admin)
	watcher := subscribe(t, cl[2], broker, sp)

	old := openRaw(t, cl[0], broker)
	if ack := old.join(&pb.Join{Cohort: sp.PB(), Multihop: true}); ack.Status != pb.Status_OK || ack.Attests {
		t.Fatalf("ack %v, want OK without attests", ack)
	}
	old.send(&pb.Frame{Kind: &pb.Frame_Message{Message: update(t, admin, sp, 0, "unclaimed")}})
	broker.rec.wait(t, "dropped from a stream that forwards no claims", dropped(bps.CounterWrongStream))

	r := openRaw(t, cl[1], broker)
	relayJoin(t, r, sp)
	for i := range bps.DefaultMaxInvalidFrames {
		r.send(&pb.Frame{Kind: &pb.Frame_Message{Message: update(t, admin, sp, uint64(i), "unclaimed")}})
	}
	expectReset(t, r)
	broker.rec.wait(t, "the claimless relay punished", kind(bps.EventViolation))
	if n := broker.rec.count(dropped(bps.CounterWrongOwner)); n != bps.DefaultMaxInvalidFrames {
		t.Fatalf("%d dropped as wrong owner, want %d", n, bps.DefaultMaxInvalidFrames)
	}
	if n := broker.rec.count(kind(bps.EventAccept)) + broker.rec.count(dropped(bps.CounterInvalidSOC)); n != 0 {
		t.Fatalf("%d claimless publications checked or accepted", n)
	}
	select {
	case d := <-watcher.C():
		t.Fatalf("a claimless publication reached the cohort: %v", d.Index)
	default:
	}
	// The stream that forwards no claims was not punished.
	old.send(&pb.Frame{Kind: &pb.Frame_Message{Message: update(t, admin, sp, 1, "unclaimed")}})
	broker.rec.waitN(t, 2, "still read", dropped(bps.CounterWrongStream))
}

// TestHostileForgedAttestation: a forwarded claim whose signature does not
// recover to the address it names is provably forged: the stream is reset
// and the peer blocklisted.
func TestHostileForgedAttestation(t *testing.T) {
	t.Parallel()
	broker, r, admin, _ := rawRelay(t, "forged attestation")
	f := attestation(t, admin)
	f.GetClaim().Index = 7 // signed over index 0
	r.send(f)
	expectReset(t, r)
	broker.rec.wait(t, "the forger punished", kind(bps.EventViolation))
	broker.rec.wait(t, "counted", dropped(bps.CounterInvalidClaim))
}

// TestHostileAttestationForStranger: a genuine forwarded claim by an
// address that may not publish lets the stream carry nothing: counted as
// an invalid claim, its publications dropped as a wrong owner; and a
// forwarded claim on a stream that did not offer to forward claims is a
// violation.
func TestHostileAttestationForStranger(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin, stranger := newKey(t), newKey(t)
	sp := feedSpec(t, "stranger", admin)
	r := openRaw(t, cl[0], broker)
	relayJoin(t, r, sp)
	r.send(attestation(t, stranger))
	broker.rec.wait(t, "the stranger's claim counted", dropped(bps.CounterInvalidClaim))
	r.send(&pb.Frame{Kind: &pb.Frame_Message{Message: update(t, stranger, sp, 0, "stranger")}})
	broker.rec.wait(t, "the stranger's publication dropped", dropped(bps.CounterWrongOwner))
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations for a genuine claim by a stranger", n)
	}

	old := openRaw(t, cl[1], broker)
	if ack := old.join(&pb.Join{Cohort: sp.PB(), Multihop: true}); ack.Status != pb.Status_OK {
		t.Fatalf("ack %v", ack)
	}
	old.send(attestation(t, admin))
	expectReset(t, old)
	broker.rec.wait(t, "an unoffered forwarded claim punished", dropped(bps.CounterWrongStream))
}

// TestHostileAttestationRepeated: a child that sends the same forwarded
// claim over and over makes its parent check the signature once.
func TestHostileAttestationRepeated(t *testing.T) {
	t.Parallel()
	broker, r, admin, sp := rawRelay(t, "repeated attestation")
	f := attestation(t, admin)
	for range 50 {
		r.send(f)
	}
	// Frames are read in order: the publication after them marks them read.
	r.send(&pb.Frame{Kind: &pb.Frame_Message{Message: update(t, admin, sp, 0, "after")}})
	broker.rec.wait(t, "the publication accepted", kind(bps.EventAccept))
	if n := broker.rec.count(kind(bps.EventClaim)); n != 1 {
		t.Fatalf("the claim taken %d times, want once", n)
	}
}

// rawRelay is a raw child of a broker, joined as a relay that forwards
// claims, in a cohort of explicit authorship named name.
func rawRelay(t *testing.T, name string) (broker *tnode, r *raw, admin key, sp *bps.Spec) {
	t.Helper()
	_, broker, cl := cluster(t, bps.Options{}, 1)
	admin = newKey(t)
	sp = feedSpec(t, name, admin)
	r = openRaw(t, cl[0], broker)
	relayJoin(t, r, sp)
	return broker, r, admin, sp
}
