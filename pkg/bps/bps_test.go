// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestSeedFlow is the flow the review of the first attempt asked for, on
// the Rev 8 wire: join a subscriber; join the admin declaring its address
// (a pending stream); claim with an AUTH under the Ack's challenge; publish
// index 0; receive it; close; a second stream of the admin's gets another
// challenge and claims again; close both; nothing leaks (goleak in
// TestMain).
func TestSeedFlow(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "seed-flow", admin)

	sub := subscribe(t, cl[0], broker, sp)

	p1 := publish(t, cl[1], broker, sp, admin, 0) // its AUTH claims
	broker.rec.wait(t, "the first stream's claim", kind(bps.EventClaim))
	if err := p1.PublishUpdate(ctxT(t), 0, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	d := recv(t, sub)
	if d.Index != 0 || string(d.Payload()) != "hello" || !bytes.Equal(d.Challenge, p1.Challenge()) {
		t.Fatalf("got index %d payload %q challenge %x", d.Index, d.Payload(), d.Challenge)
	}
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}
	broker.rec.wait(t, "the first stream left", kind(bps.EventLeave))

	// A second stream from the same node: a challenge of its own, its own
	// claim; the broker's cursor is the admin's, not the stream's.
	p2 := publish(t, cl[1], broker, sp, admin, 1)
	if bytes.Equal(p2.Challenge(), p1.Challenge()) {
		t.Fatal("the second stream was issued the first stream's challenge")
	}
	broker.rec.waitN(t, 2, "the second stream's claim", kind(bps.EventClaim))
	if err := p2.PublishUpdate(ctxT(t), 1, []byte("again")); err != nil {
		t.Fatal(err)
	}
	if d := recv(t, sub); d.Index != 1 || string(d.Payload()) != "again" || !bytes.Equal(d.Challenge, p2.Challenge()) {
		t.Fatalf("got index %d payload %q", d.Index, d.Payload())
	}
	if got := cohortInfo(t, broker, sp).Publishers; got != 1 {
		t.Fatalf("publisher streams = %d, want 1", got)
	}

	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	broker.rec.waitN(t, 3, "all streams left", kind(bps.EventLeave))
	if n := len(broker.svc.Cohorts()); n != 0 {
		t.Fatalf("%d cohorts left after every stream closed", n)
	}
	if sub.Err() != nil || p2.Err() != nil {
		t.Fatalf("clean close reported errors: sub %v, pub %v", sub.Err(), p2.Err())
	}
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("clean flow blocklisted %v", bl)
	}
}

// TestRev8_01_Spec (SWIP-74 Rev 8 item 1): FEED_TOPIC with an admin is
// accepted; values outside what this broker serves — an unset or unknown
// binding, a wrong-length admin or topic, SWIP-60 combinations SWIP-60
// itself refuses, history off a self-indexed feed — are REJECTED, and so
// is a Join whose addr is absent or not 20 bytes (Rev 8: every stream
// declares its address; docs/protocol.md "Frames and fields"); fields the
// wire does not define are ignored. As a full SWIP-60 broker it also
// serves the other bindings, and ALL with any binding (docs/protocol.md
// "Implicit authorship and ALL").
func TestRev8_01_Spec(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 1)
	admin := newKey(t)
	topic := topicOf("spec")
	good := &pb.CohortSpec{Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}

	if ack := openRaw(t, cl[0], broker).join(&pb.Join{Cohort: good, Addr: bps.ZeroAddress}); ack.Status != pb.Status_OK {
		t.Fatalf("feed spec answered %s", ack.Status)
	}

	rejected := func(name string, j *pb.Join) {
		t.Helper()
		r := openRaw(t, cl[0], broker)
		if ack := r.join(j); ack.Status != pb.Status_REJECTED || ack.Challenge != nil {
			t.Errorf("%s: answered %s (challenge %x), want REJECTED", name, ack.Status, ack.Challenge)
			return
		}
		if err := r.expectEnd(); err == nil {
			t.Errorf("%s: stream still open after REJECTED", name)
		}
	}
	for name, spec := range map[string]*pb.CohortSpec{
		"unspecified":       {Topic: topic, Admin: admin.addr},
		"unknown binding":   {Topic: topic, Binding: 99, Admin: admin.addr},
		"short admin":       {Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr[:19]},
		"short topic":       {Topic: topic[:31], Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr},
		"ALL implicit":      {Topic: topic, Binding: pb.TopicBinding_MNEMONIC, Publishers: pb.PublisherRegime_ALL},
		"unknown regime":    {Topic: topic, Binding: pb.TopicBinding_MNEMONIC, Admin: admin.addr, Publishers: 7},
		"closed with ALL":   {Topic: topic, Binding: pb.TopicBinding_MNEMONIC, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL, Closed: true},
		"closed implicit":   {Topic: topic, Binding: pb.TopicBinding_ANCHOR, Closed: true},
		"history (refused)": {Topic: topic, Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, History: true},
		"history implicit":  {Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, History: true},
	} {
		rejected(name, &pb.Join{Cohort: spec, Addr: bps.ZeroAddress})
	}
	rejected("no spec", &pb.Join{Addr: bps.ZeroAddress})
	// Rev 8: a Join without a 20-byte addr is REJECTED, whatever its spec.
	rejected("no addr", &pb.Join{Cohort: good})
	rejected("addr of 19 bytes", &pb.Join{Cohort: good, Addr: admin.addr[:19]})
	rejected("addr of 32 bytes", &pb.Join{Cohort: good, Addr: topic})

	// ALL is served with any binding: under ALL every chunk is a
	// session-feed chunk and the binding only names the cohort.
	for _, b := range []pb.TopicBinding{pb.TopicBinding_FEED_TOPIC, pb.TopicBinding_ANCHOR, pb.TopicBinding_MNEMONIC} {
		all := &pb.CohortSpec{Topic: topic, Binding: b, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL}
		if ack := openRaw(t, cl[0], broker).join(&pb.Join{Cohort: all, Addr: bps.ZeroAddress}); ack.Status != pb.Status_OK {
			t.Errorf("ALL with %s: answered %s, want OK", b, ack.Status)
		}
	}

	// An undefined field (99) is ignored: the spec is the same cohort.
	withUnknown := bps.EncodeFrame(good)[1:]                  // drop the length prefix
	withUnknown = append(withUnknown, 0xa2, 0x06, 0x01, 0x7a) // field 99, bytes, "z"
	join := append([]byte{0x0a, byte(len(withUnknown))}, withUnknown...)
	join = append(append(join, 0x12, 20), bps.ZeroAddress...) // addr
	r := openRaw(t, cl[0], broker)
	r.sendBytes(append([]byte{byte(len(join))}, join...))
	ack := new(pb.Ack)
	if err := r.read(ack); err != nil || ack.Status != pb.Status_OK {
		t.Fatalf("spec with an unknown field: %v %s", err, ack.Status)
	}
	if got := cohortInfo(t, broker, feedSpec(t, "spec", admin)).Subscribers; got != 2 {
		t.Fatalf("subscribers = %d, want 2: the unknown field made another cohort", got)
	}
}

// TestRev8_02_CreateOrAttach (Rev 8 item 2): the first Join for a spec
// creates the cohort whoever sends it, a byte-identical spec attaches, a
// different one is another cohort; only OK, FULL and REJECTED are ever
// sent.
func TestRev8_02_CreateOrAttach(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "attach", admin)

	subscribe(t, cl[0], broker, sp) // a subscriber creates
	if got := cohortInfo(t, broker, sp).Subscribers; got != 1 {
		t.Fatalf("subscribers = %d, want 1", got)
	}
	subscribe(t, cl[1], broker, sp) // attaches
	if n, got := len(broker.svc.Cohorts()), cohortInfo(t, broker, sp).Subscribers; n != 1 || got != 2 {
		t.Fatalf("cohorts %d subscribers %d, want 1 and 2", n, got)
	}
	other := feedSpec(t, "attach", newKey(t)) // same topic, other admin
	subscribe(t, cl[2], broker, other)
	if n := len(broker.svc.Cohorts()); n != 2 {
		t.Fatalf("cohorts = %d, want 2: a spec differing in admin is another cohort", n)
	}
	if _, err := cl[2].svc.Subscribe(ctxT(t), broker.Overlay(), sp); !errors.Is(err, bps.ErrFull) {
		t.Fatalf("third subscriber: %v, want FULL", err)
	}
	r := openRaw(t, cl[2], broker)
	r.join(&pb.Join{Cohort: &pb.CohortSpec{Binding: pb.TopicBinding_FEED_TOPIC}, Addr: bps.ZeroAddress})

	statuses := map[string]bool{}
	broker.rec.waitN(t, 5, "five joins answered", kind(bps.EventJoin))
	broker.rec.count(func(e bps.Event) bool {
		if e.Kind == bps.EventJoin {
			statuses[e.Status] = true
		}
		return false
	})
	for s := range statuses {
		if s != "OK" && s != "FULL" && s != "REJECTED" {
			t.Errorf("broker sent status %s", s)
		}
	}
	if !statuses["OK"] || !statuses["FULL"] || !statuses["REJECTED"] {
		t.Errorf("statuses seen %v, want all three", statuses)
	}
}

// TestRev8_03_ChallengeOnEveryStream (Rev 8 item 3): every Ack{OK} carries
// 32 random bytes for that stream, whatever it declares — a spectator's
// zero address, a stranger's, the admin's — so that no two streams, from
// one node or two, at one broker or another, share one. A Join carries no
// credential: one with field 3 set (rev 3's claim, rev 11's auth) is
// answered as without it, and the stream it opens claims only with a
// frame under the challenge its Ack issued.
func TestRev8_03_ChallengeOnEveryStream(t *testing.T) {
	t.Parallel()
	net, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "challenge", admin)

	broker2 := newNode(t, net, bps.Options{})
	if err := net.Connect(cl[0].Node, broker2.Node); err != nil {
		t.Fatal(err)
	}
	var seen [][]byte
	for _, at := range []struct {
		from, to *tnode
		addr     []byte
	}{
		{cl[0], broker, bps.ZeroAddress}, {cl[0], broker, bps.ZeroAddress}, {cl[1], broker, newKey(t).addr},
		{cl[0], broker, admin.addr}, {cl[0], broker, admin.addr}, {cl[1], broker, admin.addr},
		{cl[0], broker2, admin.addr}, {cl[0], broker2, bps.ZeroAddress},
	} {
		r := openRaw(t, at.from, at.to)
		a := r.join(&pb.Join{Cohort: sp.PB(), Addr: at.addr})
		if a.Status != pb.Status_OK || len(a.Challenge) != 32 {
			t.Fatalf("declaring %x: %s with a %d-byte challenge, want OK and 32", at.addr, a.Status, len(a.Challenge))
		}
		if slices.ContainsFunc(seen, func(c []byte) bool { return bytes.Equal(c, a.Challenge) }) {
			t.Fatalf("challenge %x issued twice", a.Challenge)
		}
		seen = append(seen, a.Challenge)
		if bytes.Equal(at.addr, admin.addr) {
			// Claimed, so that the next Join of the admin's is not the
			// second pending stream of one address (FULL).
			n := at.to.rec.count(kind(bps.EventClaim))
			r.send(auth(t, admin, sp, a.Challenge))
			at.to.rec.waitN(t, n+1, "the admin's claim", kind(bps.EventClaim))
		}
	}

	// Field 3 carries a credential in older revisions: ignored. The
	// stream is pending like any other of the admin's; a claim under
	// the credential's bytes is not its challenge, only the Ack's is.
	credential := bytes.Repeat([]byte{7}, 32)
	join := bps.EncodeFrame(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})[1:]
	join = append(append(join, 0x1a, 32), credential...) // field 3, bytes
	r := openRaw(t, cl[1], broker)
	r.sendBytes(append([]byte{byte(len(join))}, join...))
	ack := new(pb.Ack)
	if err := r.read(ack); err != nil || ack.Status != pb.Status_OK || len(ack.Challenge) != 32 || bytes.Equal(ack.Challenge, credential) {
		t.Fatalf("a Join with field 3: %v, %s, challenge %x", err, ack.Status, ack.Challenge)
	}
	claims := broker.rec.count(kind(bps.EventClaim))
	r.send(auth(t, admin, sp, credential))
	broker.rec.wait(t, "the AUTH under the credential dropped", dropped(bps.CounterWrongChallenge))
	r.send(auth(t, admin, sp, ack.Challenge))
	broker.rec.waitN(t, claims+1, "the claim under the Ack's challenge", kind(bps.EventClaim))
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("blocklisted %v", bl)
	}
}
