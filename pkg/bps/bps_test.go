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

// TestSeedFlow is the flow the review of the first attempt asked for: join a
// subscriber; join the admin declaring its address; claim on the Ack's
// challenge, and once more with the claim inside Join; publish index 0;
// receive it; close both; nothing leaks (goleak in TestMain).
func TestSeedFlow(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "seed-flow", admin)

	sub := subscribe(t, cl[0], broker, sp)

	// First publisher stream: no challenge held, so the claim follows the Ack.
	p1 := publish(t, cl[1], broker, sp, admin, 0)
	broker.rec.wait(t, "claim after ack", kind(bps.EventClaim))
	if err := p1.PublishUpdate(ctxT(t), 0, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	d := recv(t, sub)
	if d.Index != 0 || string(d.Payload()) != "hello" {
		t.Fatalf("got index %d payload %q", d.Index, d.Payload())
	}
	if err := p1.Close(); err != nil {
		t.Fatal(err)
	}

	// Second stream from the same node: it holds S now and claims in Join.
	p2 := publish(t, cl[1], broker, sp, admin, 1)
	broker.rec.waitN(t, 2, "claim in join", kind(bps.EventClaim))
	if err := p2.PublishUpdate(ctxT(t), 1, []byte("again")); err != nil {
		t.Fatal(err)
	}
	if d := recv(t, sub); d.Index != 1 || string(d.Payload()) != "again" {
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

// TestConformance74_01_Spec: FEED_TOPIC with an admin is accepted; values
// outside what this broker serves — an unset or unknown binding, a
// wrong-length admin or topic, SWIP-60 combinations SWIP-60 itself refuses,
// history off a self-indexed feed — are REJECTED; fields the wire does not define are ignored. As a
// full SWIP-60 broker it also serves the other bindings (SWIP-74, "Relation to
// SWIP-60"); TestConformance60_Spec covers those.
func TestConformance74_01_Spec(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 1)
	admin := newKey(t)
	topic := topicOf("spec")
	good := &pb.CohortSpec{Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}

	if ack := openRaw(t, cl[0], broker).join(&pb.Join{Cohort: good}); ack.Status != pb.Status_OK {
		t.Fatalf("feed spec answered %s", ack.Status)
	}

	for name, spec := range map[string]*pb.CohortSpec{
		"unspecified":       {Topic: topic, Admin: admin.addr},
		"unknown binding":   {Topic: topic, Binding: 99, Admin: admin.addr},
		"short admin":       {Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr[:19]},
		"short topic":       {Topic: topic[:31], Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr},
		"ALL not mnemonic":  {Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL},
		"ALL implicit":      {Topic: topic, Binding: pb.TopicBinding_MNEMONIC, Publishers: pb.PublisherRegime_ALL},
		"unknown regime":    {Topic: topic, Binding: pb.TopicBinding_MNEMONIC, Admin: admin.addr, Publishers: 7},
		"closed with ALL":   {Topic: topic, Binding: pb.TopicBinding_MNEMONIC, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL, Closed: true},
		"closed implicit":   {Topic: topic, Binding: pb.TopicBinding_ANCHOR, Closed: true},
		"history (refused)": {Topic: topic, Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, History: true},
		"history implicit":  {Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, History: true},
	} {
		r := openRaw(t, cl[0], broker)
		if ack := r.join(&pb.Join{Cohort: spec}); ack.Status != pb.Status_REJECTED || ack.Challenge != nil {
			t.Errorf("%s: answered %s (challenge %x), want REJECTED", name, ack.Status, ack.Challenge)
			continue
		}
		if err := r.expectEnd(); err == nil {
			t.Errorf("%s: stream still open after REJECTED", name)
		}
	}
	if r := openRaw(t, cl[0], broker); r.join(&pb.Join{}).Status != pb.Status_REJECTED {
		t.Error("a Join without a spec was not REJECTED")
	}

	// An undefined field (99) is ignored: the spec is the same cohort.
	withUnknown := bps.EncodeFrame(good)[1:]                  // drop the length prefix
	withUnknown = append(withUnknown, 0xa2, 0x06, 0x01, 0x7a) // field 99, bytes, "z"
	join := append([]byte{0x0a, byte(len(withUnknown))}, withUnknown...)
	r := openRaw(t, cl[0], broker)
	r.sendBytes(append([]byte{byte(len(join))}, join...))
	ack := new(pb.Ack)
	if err := r.read(ack); err != nil || ack.Status != pb.Status_OK {
		t.Fatalf("spec with an unknown field: %v %s", err, ack.Status)
	}
	if n := len(broker.svc.Cohorts()); n != 1 {
		t.Fatalf("%d cohorts: the unknown field made a new one", n)
	}
	if got := cohortInfo(t, broker, feedSpec(t, "spec", admin)).Subscribers; got != 2 {
		t.Fatalf("subscribers = %d, want 2", got)
	}
}

// TestConformance74_02_CreateOrAttach: the first Join for a spec creates the
// cohort whoever sends it, a byte-identical spec attaches, a different one is
// another cohort; only OK, FULL and REJECTED are ever sent.
func TestConformance74_02_CreateOrAttach(t *testing.T) {
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
	r.join(&pb.Join{Cohort: &pb.CohortSpec{Binding: pb.TopicBinding_FEED_TOPIC}})

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

// TestConformance74_03_Challenge: a challenge is issued iff an address is
// declared: 32 random bytes per stream (SWIP-74 Rev 7), so two
// streams declaring the same address — from one node or two, at one
// broker or another — never share one.
func TestConformance74_03_Challenge(t *testing.T) {
	t.Parallel()
	net, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "challenge", admin)

	if ack := openRaw(t, cl[0], broker).join(&pb.Join{Cohort: sp.PB()}); ack.Challenge != nil {
		t.Fatalf("subscriber got a challenge %x", ack.Challenge)
	}
	broker2 := newNode(t, net, bps.Options{})
	if err := net.Connect(cl[0].Node, broker2.Node); err != nil {
		t.Fatal(err)
	}
	var seen [][]byte
	for _, at := range []struct{ from, to *tnode }{{cl[0], broker}, {cl[0], broker}, {cl[1], broker}, {cl[0], broker2}} {
		a := openRaw(t, at.from, at.to).join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
		if len(a.Challenge) != 32 {
			t.Fatalf("a %d-byte challenge", len(a.Challenge))
		}
		if slices.ContainsFunc(seen, func(c []byte) bool { return bytes.Equal(c, a.Challenge) }) {
			t.Fatalf("challenge %x issued twice", a.Challenge)
		}
		seen = append(seen, a.Challenge)
	}
}
