// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build rev8todo

package bps_test

import (
	"bytes"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// The rows of SWIP-74's security table that can be exercised in-process.
// Claim over another overlay, for another address and with a changed index
// are in TestConformance74_04_BadClaimAfterAck; a publication on a subscriber
// stream in TestConformance74_05_SubscriberStreamFrames; the admin's own
// retransmits in TestConformance74_07_Cursor.

// TestSecurity_ForwardedChallenge: a relay the publisher was pointed at
// fetches S from the honest broker and forwards the publisher's signature;
// the publisher signed the relay's overlay, so the honest broker refuses it.
func TestSecurity_ForwardedChallenge(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "forwarded", admin)
	subscribe(t, cl[1], broker, sp) // keeps the cohort, and its counters, alive
	relay := cl[0]
	victimSees := relay.Overlay() // the publisher thinks the relay is its broker

	r := openRaw(t, relay, broker)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	// The relay hands S to the publisher, which signs over the overlay it talks to.
	forwarded := claimFor(t, admin, ack.Challenge, victimSees, 0)
	r.send(forwarded)
	expectReset(t, r)
	waitBlocklisted(t, broker, relay)
	if got := cohortInfo(t, broker, sp).Counters["invalid_claim"]; got != 1 {
		t.Fatalf("invalid_claim = %d, want 1", got)
	}
}

// TestSecurity_StaleClaimInJoin: a claim inside the Join — over a
// challenge from before a restart, or any other — cannot name the challenge
// the stream is about to be issued: it is treated as absent (no penalty),
// and the publisher claims after the Ack over the one it was issued.
func TestSecurity_StaleClaimInJoin(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "stale", admin)
	sub := subscribe(t, cl[0], broker, sp)
	r := openRaw(t, cl[1], broker)
	stale := claimFor(t, admin, keccak([]byte("S before the restart")), broker.Overlay(), 0)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr, Claim: stale})
	if ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
		t.Fatalf("ack %v", ack)
	}
	r.send(claimFor(t, admin, ack.Challenge, broker.Overlay(), 0))
	broker.rec.wait(t, "the claim after the Ack taken", kind(bps.EventClaim))
	r.send(update(t, admin, sp, 0, "after restart"))
	if d := recv(t, sub); d.Index != 0 {
		t.Fatalf("delivered %d", d.Index)
	}
	if c := cohortInfo(t, broker, sp); c.Counters["invalid_claim"] != 0 {
		t.Fatalf("a stale claim in Join was penalised: %v", c.Counters)
	}
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("blocklisted %v", bl)
	}
}

// TestSecurity_ClaimReplayedFromAnotherNode: whoever saw the admin's claim
// — the node that bridged it, a relay — cannot present it again: each
// stream is issued a challenge of its own (SWIP-74 Rev 7), so the replayed
// claim is treated as absent inside a Join and is an invalid claim after
// the Ack, a violation. The admin's identity stays the admin's.
func TestSecurity_ClaimReplayedFromAnotherNode(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "replayed-claim", admin)
	sub := subscribe(t, cl[0], broker, sp)
	r1 := openRaw(t, cl[1], broker)
	ack := r1.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	claim := claimFor(t, admin, ack.Challenge, broker.Overlay(), 0)
	r1.send(claim)
	broker.rec.wait(t, "the admin's claim taken", kind(bps.EventClaim))

	r2 := openRaw(t, cl[2], broker)
	a := r2.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr, Claim: claim})
	if a.Status != pb.Status_OK || bytes.Equal(a.Challenge, ack.Challenge) {
		t.Fatalf("the second stream: %s, challenge %x (the first's %x)", a.Status, a.Challenge, ack.Challenge)
	}
	r2.send(claim)
	expectReset(t, r2)
	waitBlocklisted(t, broker, cl[2])
	if got := cohortInfo(t, broker, sp).Counters["invalid_claim"]; got != 1 {
		t.Fatalf("invalid_claim = %d, want 1", got)
	}
	if n := broker.rec.count(kind(bps.EventClaim)); n != 1 {
		t.Fatalf("%d claims taken, want the admin's own only", n)
	}
	select {
	case d := <-sub.C():
		t.Fatalf("the subscriber received %d", d.Index)
	default:
	}
}

// TestSecurity_DeclaringTheAdminIsHarmless: anyone may obtain S by declaring
// the admin's address; without the key its claim fails (a violation) and its
// publications are violations too.
func TestSecurity_DeclaringTheAdminIsHarmless(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "squat", admin)
	sub := subscribe(t, cl[0], broker, sp)
	r := openRaw(t, cl[1], broker)
	if ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr}); len(ack.Challenge) != 32 {
		t.Fatalf("no challenge for a declared address: %x", ack.Challenge)
	}
	// Without a claim a publication is a frame on a subscriber stream.
	r.send(update(t, admin, sp, 0, "replayed admin update"))
	expectReset(t, r)
	waitBlocklisted(t, broker, cl[1])
	if got := cohortInfo(t, broker, sp).Counters["wrong_stream"]; got != 1 {
		t.Fatalf("wrong_stream = %d, want 1", got)
	}
	select {
	case d := <-sub.C():
		t.Fatalf("the subscriber received %d from a squatter", d.Index)
	default:
	}
}

// TestSecurity_SOCSignatureIsNotAClaim: the domain separator keeps SOC and
// claim signatures disjoint: a SOC signature by the admin presented as a
// claim does not verify.
func TestSecurity_SOCSignatureIsNotAClaim(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 1)
	admin := newKey(t)
	sp := feedSpec(t, "domain", admin)
	r := openRaw(t, cl[0], broker)
	r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	u := update(t, admin, sp, 0, "x")
	sig := u.Data[32 : 32+swarm.SocSignatureSize]
	claim, err := bps.ClaimFromSignature(admin.addr, 0, sig)
	if err != nil {
		t.Fatal(err)
	}
	r.send(claim)
	expectReset(t, r)
	waitBlocklisted(t, broker, cl[0])
}

// TestSecurity_ChallengeBoundToBroker: the same address gets different
// challenges at different brokers, so a claim made for one is refused at the
// other.
func TestSecurity_ChallengeBoundToBroker(t *testing.T) {
	t.Parallel()
	net, b1, cl := cluster(t, bps.Options{}, 1)
	b2 := newNode(t, net, bps.Options{})
	if err := net.Connect(cl[0].Node, b2.Node); err != nil {
		t.Fatal(err)
	}
	admin := newKey(t)
	sp := feedSpec(t, "bound-to-broker", admin)
	a1 := openRaw(t, cl[0], b1).join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	r2 := openRaw(t, cl[0], b2)
	a2 := r2.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	if bytes.Equal(a1.Challenge, a2.Challenge) {
		t.Fatal("two brokers issued the same challenge")
	}
	// A claim over b1's S, even naming b2's overlay, fails at b2.
	r2.send(claimFor(t, admin, a1.Challenge, b2.Overlay(), 0))
	expectReset(t, r2)
	waitBlocklisted(t, b2, cl[0])
}
