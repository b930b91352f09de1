// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build rev8todo

package bps_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/proto"
)

// TestConformance60_SpectatorJam covers grant and two-phase revocation
// (items 8, 9), the roster from the service feed (item 10) and the latest
// service SOC as a new stream's first delivery (item 6), on a spectator-jam:
// an admin, its grantees, an audience.
func TestConformance60_SpectatorJam(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 4)
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "spectator-jam", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a := publishOpts(t, cl[1], broker, sp, admin, true)
	broker.rec.wait(t, "admin claimed", kind(bps.EventClaim))

	// Bob claims before any roster names him: verified, not taken, no penalty.
	b := publishOpts(t, cl[2], broker, sp, bob, true)
	broker.rec.wait(t, "bob's early claim", dropped(bps.CounterInvalidClaim))
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("an early claim was penalised: %v", bl)
	}

	// The grant: a roster naming bob, then his claim on the same stream.
	send(t, a, rosterMsg(t, admin, sp, 0, bob))
	d := recvC(t, sub.C(), "roster at the subscriber")
	if d.Service == nil || d.Service.Kind != pb.ServiceKind_ROSTER || len(sub.Roster()) != 1 || !bytes.Equal(sub.Roster()[0], bob.addr) {
		t.Fatalf("subscriber did not take the roster: %+v", d.Service)
	}
	recvC(t, b.C(), "roster at bob")
	if err := b.Reclaim(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	broker.rec.waitN(t, 2, "bob's claim taken", kind(bps.EventClaim))

	// Both publish on their own feeds; each receives the other's, never its own.
	send(t, a, update(t, admin, sp, 0, "from the admin"))
	send(t, b, update(t, bob, sp, 0, "from bob"))
	got := map[string]bool{}
	for range 2 {
		d := recvC(t, sub.C(), "subscriber")
		got[string(d.Payload())] = true
	}
	if !got["from the admin"] || !got["from bob"] {
		t.Fatalf("subscriber received %v", got)
	}
	if d := recvC(t, a.C(), "admin receives bob"); string(d.Payload()) != "from bob" || !bytes.Equal(d.Owner, bob.addr) {
		t.Fatalf("admin received %q from %x", d.Payload(), d.Owner)
	}
	if d := recvC(t, b.C(), "bob receives the admin"); string(d.Payload()) != "from the admin" {
		t.Fatalf("bob received %q", d.Payload())
	}

	// A newcomer's first delivery is the latest service SOC.
	late := subscribe(t, cl[3], broker, sp)
	if d := recvC(t, late.C(), "late subscriber"); d.Service == nil || d.Service.Index != 0 {
		t.Fatalf("first delivery to a new stream is not the roster: %+v", d)
	}

	// Revocation: after the reduced roster reached bob's stream, his next
	// publication is a violation.
	send(t, a, rosterMsg(t, admin, sp, 1))
	if d := recvC(t, b.C(), "bob sees his revocation"); d.Service == nil || d.Service.Index != 1 {
		t.Fatalf("bob got %+v", d)
	}
	for i := uint64(1); ; i++ {
		if err := b.Send(ctxT(t), update(t, bob, sp, i, "after revocation")); err != nil {
			break // reset
		}
		select {
		case <-b.Done():
		case <-time.After(10 * time.Millisecond): // pacing the retry loop only
			if i < 50 {
				continue
			}
			t.Fatal("a revoked publisher kept publishing after the reduced roster")
		}
		break
	}
	waitBlocklisted(t, broker, cl[2])
	if r := recvC(t, sub.C(), "roster 1 at the subscriber"); r.Service == nil || len(sub.Roster()) != 0 {
		t.Fatalf("subscriber roster after revocation: %x", sub.Roster())
	}
}

// TestConformance60_RevocationBeforeAnnouncement: a revoked publisher's
// frames are dropped and tolerated until the reduced roster has been written
// to its stream.
func TestConformance60_RevocationBeforeAnnouncement(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{QueueLen: 256}}, 2, streamtest.WithBufferSize(600))
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "revocation", admin)
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	send(t, a, rosterMsg(t, admin, sp, 0, bob))
	broker.rec.wait(t, "roster 0", kind(bps.EventAccept))

	// Bob, by hand: claims in his Join, then stops reading.
	r := openRaw(t, cl[1], broker)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: bob.addr})
	r.send(claimFor(t, bob, ack.Challenge, broker.Overlay(), 0))
	broker.rec.waitN(t, 2, "bob claimed", kind(bps.EventClaim))
	// Fill his inbound buffer with the admin's updates so the broker's
	// writer to him stalls, then revoke: the reduced roster waits in his queue.
	for i := range uint64(4) {
		send(t, a, update(t, admin, sp, i, string(make([]byte, 500))))
	}
	send(t, a, rosterMsg(t, admin, sp, 1))
	broker.rec.wait(t, "roster 1", func(e bps.Event) bool { return e.Kind == bps.EventAccept && e.Service && e.Index == 1 })

	r.send(update(t, bob, sp, 0, "sent before he could know"))
	broker.rec.wait(t, "tolerated", dropped(bps.CounterWrongOwner))
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("tolerated frame penalised: %v", bl)
	}

	// Bob reads until the reduced roster, then publishes: a violation.
	for {
		m := r.recvMessage()
		svc := new(pb.ServiceMessage)
		if proto.Unmarshal(m.Data[105:], svc) == nil && svc.Kind == pb.ServiceKind_ROSTER && svc.Index == 1 {
			break
		}
	}
	go func() {
		for i := uint64(1); i < 100; i++ {
			if _, err := r.s.Write(bps.EncodeFrame(update(t, bob, sp, i, "after"))); err != nil {
				return
			}
		}
	}()
	waitBlocklisted(t, broker, cl[1])
}

// TestConformance60_Jam: a closed cohort (item 8): a stream without a claim
// is silent — it receives nothing — and is disconnected at the claim deadline;
// rostered seats claim and talk to each other (explicit ANCHOR: any id).
func TestConformance60_Jam(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Timing: bps.Timing{ClaimDeadline: time.Second}}, 3)
	admin, bob := newKey(t), newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("jam-tuesday"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	send(t, a, rosterMsg(t, admin, sp, 0, bob))
	broker.rec.wait(t, "roster", kind(bps.EventAccept))

	intruder := openRaw(t, cl[2], broker)
	if ack := intruder.join(&pb.Join{Cohort: sp.PB()}); ack.Status != pb.Status_OK {
		t.Fatal(ack.Status)
	}
	b := publishOpts(t, cl[1], broker, sp, bob, true)
	if d := recvC(t, b.C(), "bob's first delivery"); d.Service == nil {
		t.Fatalf("bob's first delivery is not the roster")
	}
	send(t, b, socMsg(t, bob, make([]byte, 32), "bob plays"))
	send(t, a, socMsg(t, admin, make([]byte, 32), "alice plays"))
	if d := recvC(t, a.C(), "alice hears bob"); string(d.Payload()) != "bob plays" {
		t.Fatalf("alice heard %q", d.Payload())
	}
	if d := recvC(t, b.C(), "bob hears alice"); string(d.Payload()) != "alice plays" {
		t.Fatalf("bob heard %q", d.Payload())
	}
	// The intruder received nothing and is cut off at the deadline.
	expectReset(t, intruder)
	waitBlocklisted(t, broker, cl[2])
	if got := cohortInfo(t, broker, sp).Counters["claim_timeout"]; got != 1 {
		t.Fatalf("claim_timeout = %d", got)
	}
}

// TestConformance60_GroupChat: ALL over MNEMONIC (item 8: no claim, every
// message checked against the declared address); each member hears the
// others, never itself; a listener hears everyone.
func TestConformance60_GroupChat(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 4)
	admin := newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("chat"), Binding: pb.TopicBinding_MNEMONIC, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL})
	listener := subscribe(t, cl[0], broker, sp)
	keys := []key{newKey(t), newKey(t), newKey(t)}
	pubs := make([]*bps.Publisher, 3)
	for i, k := range keys {
		p, err := cl[i+1].svc.Publish(ctxT(t), broker.Overlay(), sp, bps.PublishOptions{Addr: k.addr, Receive: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Close() })
		pubs[i] = p
	}
	for i, p := range pubs {
		send(t, p, socMsg(t, keys[i], topicOf(fmt.Sprint(i)), fmt.Sprintf("hello from %d", i)))
		broker.rec.waitN(t, i+1, "accepted", kind(bps.EventAccept))
	}
	for i := range 3 {
		if d := recvC(t, listener.C(), "listener"); string(d.Payload()) != fmt.Sprintf("hello from %d", i) || !bytes.Equal(d.Owner, keys[i].addr) {
			t.Fatalf("listener got %q from %x", d.Payload(), d.Owner)
		}
	}
	for i, p := range pubs {
		for j := range 3 {
			if j == i {
				continue
			}
			if d := recvC(t, p.C(), "member"); !bytes.Equal(d.Owner, keys[j].addr) {
				t.Fatalf("member %d got a message from %x, want %x", i, d.Owner, keys[j].addr)
			}
		}
	}
	// Speaking as someone else is refused.
	send(t, pubs[0], socMsg(t, keys[1], topicOf("spoof"), "not me"))
	broker.rec.wait(t, "spoof", dropped(bps.CounterWrongOwner))
}

// mineID finds an id whose SOC address with owner shares PoMin bits with
// anchor (at most a few hundred thousand hashes).
func mineID(t *testing.T, owner []byte, anchor func(id []byte) []byte) []byte {
	t.Helper()
	id := make([]byte, 32)
	for i := uint64(0); i < 1<<24; i++ {
		for j := range 8 {
			id[24+j] = byte(i >> (8 * (7 - j)))
		}
		a, err := soc.CreateAddress(id, owner)
		if err != nil {
			t.Fatal(err)
		}
		if swarm.Proximity(a.Bytes(), anchor(id)) >= bps.PoMin {
			return id
		}
	}
	t.Fatal("no id mined")
	return nil
}

// TestConformance60_Implicit: implicit authorship (item 7) over each binding:
// a stream declaring an address publishes from its Join, every message held
// to the binding's SOC shape.
func TestConformance60_Implicit(t *testing.T) {
	t.Parallel()
	owner := newKey(t)
	ownerTopic, _ := crypto.LegacyKeccak256(owner.addr)
	socIDAnchor := mineID(t, owner.addr, func(id []byte) []byte { return id })
	ownerID := mineID(t, owner.addr, func([]byte) []byte { return ownerTopic })

	cases := []struct {
		name string
		spec *pb.CohortSpec
		good *pb.Message
		bad  *pb.Message
		why  bps.Counter
	}{
		{"soc id", &pb.CohortSpec{Topic: socIDAnchor, Binding: pb.TopicBinding_SOC_ID},
			socMsg(t, owner, socIDAnchor, "mined"), socMsg(t, owner, topicOf("other id"), "wrong id"), bps.CounterInvalidIndex},
		{"owner", &pb.CohortSpec{Topic: ownerTopic, Binding: pb.TopicBinding_OWNER},
			socMsg(t, owner, ownerID, "mined"), socMsg(t, owner, topicOf("unmined"), "too far"), bps.CounterWrongOwner},
		{"mnemonic", &pb.CohortSpec{Topic: topicOf("anything"), Binding: pb.TopicBinding_MNEMONIC},
			socMsg(t, owner, topicOf("x"), "any soc"), func() *pb.Message {
				m := socMsg(t, owner, topicOf("y"), "tampered")
				m.Data[len(m.Data)-1] ^= 1
				return m
			}(), bps.CounterInvalidSOC},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 2)
			sp := specOf(t, tc.spec)
			sub := subscribe(t, cl[0], broker, sp)
			p, err := cl[1].svc.Publish(ctxT(t), broker.Overlay(), sp, bps.PublishOptions{Addr: owner.addr})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = p.Close() })
			send(t, p, tc.bad)
			broker.rec.wait(t, "bad message", dropped(tc.why))
			send(t, p, tc.good)
			if d := recvC(t, sub.C(), "good message"); !bytes.Equal(d.Address.Bytes(), tc.good.Address) {
				t.Fatalf("delivered %s", d.Address)
			}
			send(t, p, tc.good)
			broker.rec.wait(t, "duplicate", dropped(bps.CounterRetransmit))
		})
	}
}

// TestConformance60_ServiceFeedHostile: a forged service SOC, a replayed
// older roster and a squatted spec change nothing for the genuine cohort.
func TestConformance60_ServiceFeedHostile(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin, mallory := newKey(t), newKey(t)
	sp := feedSpec(t, "hostile", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a := publishOpts(t, cl[1], broker, sp, admin, false)
	send(t, a, rosterMsg(t, admin, sp, 0))
	send(t, a, rosterMsg(t, admin, sp, 1, mallory))
	send(t, a, rosterMsg(t, admin, sp, 0)) // replay of the older roster
	broker.rec.wait(t, "replayed roster", dropped(bps.CounterRetransmit))
	forged := rosterMsg(t, mallory, sp, 2, mallory) // signed by mallory, not the admin
	send(t, a, forged)
	broker.rec.wait(t, "forged roster", dropped(bps.CounterWrongOwner))
	if c := cohortInfo(t, broker, sp); c.ServiceNext != 2 || len(c.Roster) != 1 {
		t.Fatalf("service next %d roster %x", c.ServiceNext, c.Roster)
	}
	recvC(t, sub.C(), "roster 0")
	recvC(t, sub.C(), "roster 1")

	// The squatter creates the same topic under its own admin: another cohort.
	squat := feedSpec(t, "hostile", mallory)
	m := publishOpts(t, cl[2], broker, squat, mallory, false)
	send(t, m, update(t, mallory, squat, 0, "squatted"))
	broker.rec.wait(t, "squat accepted in its own cohort", func(e bps.Event) bool { return e.Kind == bps.EventAccept && e.Cohort == squat.String() })
	send(t, a, update(t, admin, sp, 0, "genuine"))
	if d := recvC(t, sub.C(), "genuine update"); string(d.Payload()) != "genuine" {
		t.Fatalf("subscriber got %q", d.Payload())
	}
	if sub.Dropped() != 0 {
		t.Fatalf("subscriber dropped %d", sub.Dropped())
	}
}

// TestConformance60_EndOfStream: END_OF_STREAM ends the cohort attributably:
// every subscription receives it and ends with ErrEndOfStream; the broker
// closes every stream of the cohort, the admin's included, and forgets the
// cohort; a newcomer, subscriber or publisher, is told at once.
func TestConformance60_EndOfStream(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "the-end", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a := publishOpts(t, cl[1], broker, sp, admin, false)
	send(t, a, endMsg(t, admin, sp, 0))
	if d := recvC(t, sub.C(), "end of stream"); d.Service == nil || d.Service.Kind != pb.ServiceKind_END_OF_STREAM {
		t.Fatalf("got %+v", d)
	}
	<-sub.Done()
	if !errors.Is(sub.Err(), bps.ErrEndOfStream) {
		t.Fatalf("subscription ended with %v", sub.Err())
	}
	<-a.Done() // the admin's own stream is closed too, cleanly: by its own end
	if err := a.Err(); !errors.Is(err, bps.ErrEndOfStream) {
		t.Fatalf("the admin's stream ended with %v", err)
	}
	broker.rec.waitN(t, 2, "both streams left cleanly", func(e bps.Event) bool { return e.Kind == bps.EventLeave && e.Err == nil })
	broker.rec.wait(t, "cohort ended", kind(bps.EventEnd))
	if n := len(broker.svc.Cohorts()); n != 0 {
		t.Fatalf("the broker still lists %d cohorts", n)
	}
	late, err := cl[2].svc.Subscribe(ctxT(t), broker.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	if d := recvC(t, late.C(), "newcomer"); d.Service == nil || d.Service.Kind != pb.ServiceKind_END_OF_STREAM {
		t.Fatalf("newcomer got %+v", d)
	}
	<-late.Done()
	if !errors.Is(late.Err(), bps.ErrEndOfStream) {
		t.Fatalf("newcomer ended with %v", late.Err())
	}
	lp := publishOpts(t, cl[2], broker, sp, admin, true)
	if d := recvC(t, lp.C(), "late publisher"); d.Service == nil || d.Service.Kind != pb.ServiceKind_END_OF_STREAM {
		t.Fatalf("late publisher got %+v", d)
	}
	<-lp.Done()
	if !errors.Is(lp.Err(), bps.ErrEndOfStream) {
		t.Fatalf("late publisher ended with %v", lp.Err())
	}
	if n := len(broker.svc.Cohorts()); n != 0 {
		t.Fatalf("a late Join made %d cohorts", n)
	}
}

// TestConformance60_ExtraSeatPerAbsentPublisher: one extra stream over the
// fan-out bound for every rostered publisher without a publisher stream.
func TestConformance60_ExtraSeatPerAbsentPublisher(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}}, 3)
	admin, bob, carol := newKey(t), newKey(t), newKey(t)
	sp := feedSpec(t, "seats", admin)
	a := publishOpts(t, cl[0], broker, sp, admin, false)
	send(t, a, rosterMsg(t, admin, sp, 0, bob, carol))
	broker.rec.wait(t, "roster", kind(bps.EventAccept))
	subscribe(t, cl[1], broker, sp) // the fan-out set is full
	for _, k := range []key{bob, carol} {
		if ack := openRaw(t, cl[2], broker).join(&pb.Join{Cohort: sp.PB(), Addr: k.addr}); ack.Status != pb.Status_OK {
			t.Fatalf("absent rostered publisher refused: %s", ack.Status)
		}
	}
	if ack := openRaw(t, cl[2], broker).join(&pb.Join{Cohort: sp.PB(), Addr: bob.addr}); ack.Status != pb.Status_FULL {
		t.Fatalf("a second extra seat for bob: %s", ack.Status)
	}
	if ack := openRaw(t, cl[2], broker).join(&pb.Join{Cohort: sp.PB(), Addr: newKey(t).addr}); ack.Status != pb.Status_FULL {
		t.Fatalf("a stranger: %s", ack.Status)
	}
}

// TestConformance60_ServiceGap: a subscriber treats an index gap in the
// service feed as a liveness fault, and still takes the roster.
func TestConformance60_ServiceGap(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "gap", admin)
	frames := []*pb.Message{rosterMsg(t, admin, sp, 0), rosterMsg(t, admin, sp, 2, bob), update(t, bob, sp, 0, "bob")}
	sub := subscribeToHostile(t, net, sp, frames)
	var got []bps.Delivery
	for d := range sub.C() {
		got = append(got, d)
	}
	if len(got) != 3 || got[0].Gap || !got[1].Gap || got[2].Service != nil || !bytes.Equal(got[2].Owner, bob.addr) {
		t.Fatalf("deliveries %+v", got)
	}
	if sub.LivenessFaults() != 1 {
		t.Fatalf("liveness faults %d", sub.LivenessFaults())
	}
}
