// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

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

// unclaimed is a stream of k's at broker that sends nothing by itself (no
// signer): a spectator, a silent or a pending stream until its first valid
// frame, which the test sends.
func unclaimed(t *testing.T, c, broker *tnode, sp *bps.Spec, k key) *bps.Publisher {
	t.Helper()
	p, err := c.svc.Publish(ctxT(t), broker.Overlay(), sp, bps.PublishOptions{Addr: k.addr, Receive: true})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// noDelivery fails if c holds a delivery now.
func noDelivery(t *testing.T, c <-chan bps.Delivery, what string) {
	t.Helper()
	select {
	case d, ok := <-c:
		if ok {
			t.Fatalf("%s received %s %d", what, d.Kind, d.Index)
		}
	default:
	}
}

// isRoster reports whether d is the admin's ROSTER at index.
func isRoster(d bps.Delivery, index uint64) bool {
	return d.Kind == pb.Kind_ROSTER && d.Service != nil && d.Service.Kind == pb.Kind_ROSTER && d.Index == index
}

// TestConformance60_SpectatorJam covers grant and revocation (rev 14 items
// 8, 9), the roster from the admin's ROSTER feed (item 10) and the latest
// roster as a new stream's first delivery (item 6), on a spectator-jam: an
// admin, a grantee, an audience. Rev 14: a spectator named by a roster
// claims on the stream it holds, with its first valid frame (here an AUTH);
// a revoked publisher's frame past RevocationGrace is a violation.
func TestConformance60_SpectatorJam(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Timing: bps.Timing{RevocationGrace: 200 * time.Millisecond}}, 4)
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "spectator-jam", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a := publishOpts(t, cl[1], broker, sp, admin, true)
	broker.rec.wait(t, "admin claimed", kind(bps.EventClaim))

	// Bob declares his address before any roster names him: a spectator,
	// within the fan-out set, which sends nothing.
	b := unclaimed(t, cl[2], broker, sp, bob)

	// The grant: a roster naming bob, which he receives as a spectator,
	// then his claim — an AUTH — on the same stream.
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, bob))
	d := recvC(t, sub.C(), "roster at the subscriber")
	if !isRoster(d, 0) || len(sub.Roster()) != 1 || !bytes.Equal(sub.Roster()[0], bob.addr) {
		t.Fatalf("subscriber did not take the roster: %+v", d.Service)
	}
	if d := recvC(t, b.C(), "roster at bob"); !isRoster(d, 0) {
		t.Fatalf("bob got %s %d, want the roster", d.Kind, d.Index)
	}
	send(t, b, auth(t, bob, sp, b.Challenge()))
	broker.rec.waitN(t, 2, "bob's claim taken", kind(bps.EventClaim))

	// Both publish on their own session feeds; each receives the other's,
	// never its own.
	send(t, a, update(t, admin, sp, a.Challenge(), 0, "from the admin"))
	send(t, b, update(t, bob, sp, b.Challenge(), 0, "from bob"))
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

	// A newcomer's first delivery is the latest roster.
	late := subscribe(t, cl[3], broker, sp)
	if d := recvC(t, late.C(), "late subscriber"); !isRoster(d, 0) {
		t.Fatalf("first delivery to a new stream is not the roster: %s %d", d.Kind, d.Index)
	}

	// Revocation: once the reduced roster reached bob's stream and the
	// grace passed, his next publication is a violation.
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 1))
	if d := recvC(t, b.C(), "bob sees his revocation"); !isRoster(d, 1) {
		t.Fatalf("bob got %s %d", d.Kind, d.Index)
	}
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for i := uint64(1); ; i++ {
		if err := b.Send(ctxT(t), update(t, bob, sp, b.Challenge(), i, "after revocation")); err != nil {
			break // reset
		}
		select {
		case <-b.Done():
		case <-deadline.C:
			t.Fatal("a revoked publisher kept publishing past the grace")
		case <-time.After(20 * time.Millisecond): // pacing the retry loop only
			continue
		}
		break
	}
	waitBlocklisted(t, broker, cl[2])
	if r := recvC(t, sub.C(), "roster 1 at the subscriber"); !isRoster(r, 1) || len(sub.Roster()) != 0 {
		t.Fatalf("subscriber roster after revocation: %x", sub.Roster())
	}
	if c := cohortInfo(t, broker, sp); c.Counters["revoked"] == 0 || c.Counters["wrong_stream"] != 1 {
		t.Fatalf("counters %v: want frames within the grace counted revoked, the one after wrong_stream", c.Counters)
	}
	noDelivery(t, sub.C(), "the subscriber, of a revoked publisher,")
}

// TestConformance60_RevocationBeforeAnnouncement: a revoked publisher's
// frames are dropped and tolerated (counted revoked) until the reduced
// roster has been written to its stream and RevocationGrace has passed
// since (docs/protocol.md, "Revocation, with a grace"); after both, a
// frame is a violation.
func TestConformance60_RevocationBeforeAnnouncement(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{QueueLen: 256}, Timing: bps.Timing{RevocationGrace: 300 * time.Millisecond}}, 2, streamtest.WithBufferSize(600))
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "revocation", admin)
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, bob))
	broker.rec.wait(t, "roster 0", kind(bps.EventAccept))

	// Bob, by hand: claims with an AUTH, then stops reading.
	r := openRaw(t, cl[1], broker)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: bob.addr})
	r.send(auth(t, bob, sp, ack.Challenge))
	broker.rec.waitN(t, 2, "bob claimed", kind(bps.EventClaim))
	// Fill his inbound buffer with the admin's updates so the broker's
	// writer to him stalls, then revoke: the reduced roster waits in his queue.
	for i := range uint64(4) {
		send(t, a, update(t, admin, sp, a.Challenge(), i, string(make([]byte, 500))))
	}
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 1))
	broker.rec.wait(t, "roster 1", func(e bps.Event) bool { return e.Kind == bps.EventAccept && e.Service && e.Index == 1 })

	r.send(update(t, bob, sp, ack.Challenge, 0, "sent before he could know"))
	broker.rec.wait(t, "tolerated", dropped(bps.CounterRevoked))
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("tolerated frame penalised: %v", bl)
	}

	// Bob reads until the reduced roster, then publishes: a violation once
	// the grace has passed.
	for {
		m := r.recvMessage()
		if m.Kind == pb.Kind_ROSTER && m.Index == 1 {
			break
		}
	}
	stop := make(chan struct{})
	sent := make(chan struct{})
	defer func() { close(stop); <-sent }()
	go func() {
		defer close(sent)
		for i := uint64(1); i < 1000; i++ {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond): // the publisher's pace
			}
			if _, err := r.s.Write(bps.EncodeFrame(update(t, bob, sp, ack.Challenge, i, "after"))); err != nil {
				return
			}
		}
	}()
	waitBlocklisted(t, broker, cl[1])
	if c := cohortInfo(t, broker, sp); c.Counters["wrong_stream"] != 1 || c.Cursors[swarm.NewAddress(bob.addr).String()] != 0 {
		t.Fatalf("counters %v cursors %v: want one violation and no cursor of bob's", c.Counters, c.Cursors)
	}
}

// TestConformance60_Jam: a closed cohort (rev 14 item 8): a stream whose
// address no roster names is silent — it receives nothing — and is
// disconnected at the claim deadline; rostered seats claim and talk to
// each other. Every chunk is a session-feed chunk whatever the binding
// (here ANCHOR).
func TestConformance60_Jam(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Timing: bps.Timing{ClaimDeadline: time.Second}}, 3)
	admin, bob := newKey(t), newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("jam-tuesday"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, bob))
	broker.rec.wait(t, "roster", kind(bps.EventAccept))

	intruder := openRaw(t, cl[2], broker)
	if ack := intruder.join(&pb.Join{Cohort: sp.PB(), Addr: newKey(t).addr}); ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
		t.Fatalf("%s, challenge %x", ack.Status, ack.Challenge)
	}
	b := publishOpts(t, cl[1], broker, sp, bob, true)
	if d := recvC(t, b.C(), "bob's first delivery"); !isRoster(d, 0) {
		t.Fatalf("bob's first delivery is %s %d, not the roster", d.Kind, d.Index)
	}
	// Claimed before alice plays: a pending stream receives nothing.
	broker.rec.waitN(t, 2, "bob's claim", kind(bps.EventClaim))
	send(t, b, update(t, bob, sp, b.Challenge(), 0, "bob plays"))
	send(t, a, update(t, admin, sp, a.Challenge(), 0, "alice plays"))
	if d := recvC(t, a.C(), "alice hears bob"); string(d.Payload()) != "bob plays" {
		t.Fatalf("alice heard %q", d.Payload())
	}
	if d := recvC(t, b.C(), "bob hears alice"); string(d.Payload()) != "alice plays" {
		t.Fatalf("bob heard %q", d.Payload())
	}
	// A session-feed update is judged by its owner's cursor whatever the
	// binding: a second one is no duplicate of the first.
	send(t, b, update(t, bob, sp, b.Challenge(), 1, "bob plays on"))
	if d := recvC(t, a.C(), "alice hears bob again"); string(d.Payload()) != "bob plays on" {
		t.Fatalf("alice heard %q", d.Payload())
	}
	// The intruder received nothing and is cut off at the deadline.
	expectReset(t, intruder)
	waitBlocklisted(t, broker, cl[2])
	if got := cohortInfo(t, broker, sp).Counters["claim_timeout"]; got != 1 {
		t.Fatalf("claim_timeout = %d", got)
	}
}

// TestConformance60_GroupChat: ALL (rev 14 item 8: no claim, every
// publication a session-feed chunk validated at the declared address,
// accepted with any binding: docs/protocol.md, "Implicit authorship and
// ALL"); each member hears the others, never itself, every update of
// each; a listener hears everyone. Speaking as someone else on one's own
// stream is not valid at keccak256(id ‖ addr), the owner forced:
// invalid_soc, a violation.
func TestConformance60_GroupChat(t *testing.T) {
	t.Parallel()
	for _, binding := range []pb.TopicBinding{pb.TopicBinding_MNEMONIC, pb.TopicBinding_ANCHOR, pb.TopicBinding_FEED_TOPIC} {
		t.Run(binding.String(), func(t *testing.T) {
			t.Parallel()
			groupChat(t, binding)
		})
	}
}

func groupChat(t *testing.T, binding pb.TopicBinding) {
	_, broker, cl := cluster(t, bps.Options{}, 4)
	admin := newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("chat"), Binding: binding, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL})
	listener := subscribe(t, cl[0], broker, sp)
	keys := []key{newKey(t), newKey(t), newKey(t)}
	pubs := make([]*bps.Publisher, 3)
	for i, k := range keys {
		pubs[i] = unclaimed(t, cl[i+1], broker, sp, k) // a publisher stream from its Join
	}
	for round := range uint64(2) {
		for i, p := range pubs {
			send(t, p, update(t, keys[i], sp, p.Challenge(), round, fmt.Sprintf("hello %d from %d", round, i)))
			broker.rec.waitN(t, int(round)*3+i+1, "accepted", kind(bps.EventAccept))
		}
		for i := range 3 {
			if d := recvC(t, listener.C(), "listener"); string(d.Payload()) != fmt.Sprintf("hello %d from %d", round, i) || !bytes.Equal(d.Owner, keys[i].addr) {
				t.Fatalf("listener got %q from %x", d.Payload(), d.Owner)
			}
		}
		for i, p := range pubs {
			for j := range 3 {
				if j == i {
					continue
				}
				if d := recvC(t, p.C(), "member"); !bytes.Equal(d.Owner, keys[j].addr) || d.Index != round {
					t.Fatalf("member %d got %d from %x, want %d from %x", i, d.Index, d.Owner, round, keys[j].addr)
				}
			}
		}
	}
	// Speaking as someone else is refused.
	send(t, pubs[0], update(t, keys[1], sp, pubs[0].Challenge(), 2, "not me"))
	broker.rec.wait(t, "spoof", dropped(bps.CounterInvalidSOC))
	waitBlocklisted(t, broker, cl[1])
	// Nothing lost for the others.
	send(t, pubs[1], update(t, keys[1], sp, pubs[1].Challenge(), 2, "still here"))
	if d := recvC(t, listener.C(), "listener after the spoof"); string(d.Payload()) != "still here" {
		t.Fatalf("listener got %q", d.Payload())
	}
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

// TestConformance60_Implicit: implicit authorship (rev 14 item 7) over each
// binding: a stream declaring an address publishes from its Join, no
// claim, no salt, every chunk held to the binding's SOC shape; under
// implicit FEED_TOPIC the frame's index is checked against the id
// (docs/protocol.md, "Implicit authorship and ALL"). A chunk that is not
// the binding's (another id, a tampered signature, another index) is
// invalid_soc, a violation (Rev 8: one invalid chunk ends the stream); a
// valid chunk too far from the topic is wrong_owner, dropped.
func TestConformance60_Implicit(t *testing.T) {
	t.Parallel()
	owner := newKey(t)
	ownerTopic, _ := crypto.LegacyKeccak256(owner.addr)
	socIDAnchor := mineID(t, owner.addr, func(id []byte) []byte { return id })
	ownerID := mineID(t, owner.addr, func([]byte) []byte { return ownerTopic })
	feedTopic := topicOf("an implicit feed")
	atIndex := func(b *pb.Broadcast, i uint64) *pb.Broadcast { b.Index = i; return b }

	cases := []struct {
		name      string
		spec      *pb.CohortSpec
		id        []byte
		good      *pb.Broadcast
		bad       *pb.Broadcast
		why       bps.Counter
		violation bool
	}{
		{"soc id", &pb.CohortSpec{Topic: socIDAnchor, Binding: pb.TopicBinding_SOC_ID}, socIDAnchor,
			socMsg(t, owner, socIDAnchor, "mined"), socMsg(t, owner, topicOf("other id"), "wrong id"), bps.CounterInvalidSOC, true},
		{"owner", &pb.CohortSpec{Topic: ownerTopic, Binding: pb.TopicBinding_OWNER}, ownerID,
			socMsg(t, owner, ownerID, "mined"), socMsg(t, owner, topicOf("unmined"), "too far"), bps.CounterWrongOwner, false},
		{"mnemonic", &pb.CohortSpec{Topic: topicOf("anything"), Binding: pb.TopicBinding_MNEMONIC}, topicOf("x"),
			socMsg(t, owner, topicOf("x"), "any soc"), func() *pb.Broadcast {
				// A signature that recovers no key (v out of range). A
				// tampered payload recovers another owner: wrong_owner,
				// as another's chunk on this stream.
				m := socMsg(t, owner, topicOf("y"), "unsigned")
				m.Soc[32+64] = 0xff
				return m
			}(), bps.CounterInvalidSOC, true},
		{"feed topic", &pb.CohortSpec{Topic: feedTopic, Binding: pb.TopicBinding_FEED_TOPIC}, bps.FeedID(feedTopic, 5),
			atIndex(socMsg(t, owner, bps.FeedID(feedTopic, 5), "update 5"), 5),
			atIndex(socMsg(t, owner, bps.FeedID(feedTopic, 6), "index 6 said 7"), 7), bps.CounterInvalidSOC, true},
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
			want, err := soc.CreateAddress(tc.id, owner.addr)
			if err != nil {
				t.Fatal(err)
			}
			send(t, p, tc.good)
			if d := recvC(t, sub.C(), "good message"); !d.Address.Equal(want) {
				t.Fatalf("delivered %s, want %s", d.Address, want)
			}
			send(t, p, tc.good)
			broker.rec.wait(t, "duplicate", dropped(bps.CounterRetransmit))
			send(t, p, tc.bad)
			broker.rec.wait(t, "bad message", dropped(tc.why))
			if tc.violation {
				waitBlocklisted(t, broker, cl[1])
			} else if bl := broker.Blocklists(); len(bl) != 0 {
				t.Fatalf("a dropped chunk was penalised: %v", bl)
			}
			noDelivery(t, sub.C(), "the subscriber, of a bad chunk,")
		})
	}
}

// TestConformance60_ServiceFeedHostile: a forged ROSTER, a replayed older
// roster, a ROSTER from a rostered publisher's stream and a squatted spec
// change nothing for the genuine cohort (rev 14: ROSTER and EOS are the
// admin's stream's only, each held to the admin's address, forced).
func TestConformance60_ServiceFeedHostile(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 4)
	admin, mallory := newKey(t), newKey(t)
	sp := feedSpec(t, "hostile", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a := publishOpts(t, cl[1], broker, sp, admin, false)
	ch := a.Challenge()
	send(t, a, rosterMsg(t, admin, sp, ch, 0))
	send(t, a, rosterMsg(t, admin, sp, ch, 1, mallory))
	send(t, a, rosterMsg(t, admin, sp, ch, 0)) // replay of the older roster
	broker.rec.wait(t, "replayed roster", dropped(bps.CounterRetransmit))

	// Mallory, rostered, sends a roster of her own on her publisher
	// stream: a kind her stream may not send.
	m := publishOpts(t, cl[2], broker, sp, mallory, false)
	broker.rec.waitN(t, 2, "mallory claimed", kind(bps.EventClaim))
	send(t, m, rosterMsg(t, mallory, sp, m.Challenge(), 2, mallory))
	broker.rec.wait(t, "roster from a publisher's stream", dropped(bps.CounterWrongStream))
	waitBlocklisted(t, broker, cl[2])

	// Declaring the admin's address, she signs a roster herself under that
	// stream's challenge: not valid at the admin's address.
	r := openRaw(t, cl[3], broker)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	r.send(rosterMsg(t, mallory, sp, ack.Challenge, 2, mallory))
	expectReset(t, r)
	broker.rec.wait(t, "forged roster", dropped(bps.CounterInvalidSOC))
	waitBlocklisted(t, broker, cl[3])
	if c := cohortInfo(t, broker, sp); c.ServiceNext != 2 || len(c.Roster) != 1 {
		t.Fatalf("service next %d roster %x", c.ServiceNext, c.Roster)
	}
	if d := recvC(t, sub.C(), "roster 0"); !isRoster(d, 0) {
		t.Fatalf("got %s %d", d.Kind, d.Index)
	}
	if d := recvC(t, sub.C(), "roster 1"); !isRoster(d, 1) {
		t.Fatalf("got %s %d", d.Kind, d.Index)
	}

	// The squatter creates the same topic under its own admin: another cohort.
	squat := feedSpec(t, "hostile", mallory)
	sq := publishOpts(t, cl[1], broker, squat, mallory, false)
	send(t, sq, update(t, mallory, squat, sq.Challenge(), 0, "squatted"))
	broker.rec.wait(t, "squat accepted in its own cohort", func(e bps.Event) bool { return e.Kind == bps.EventAccept && e.Cohort == squat.String() })
	send(t, a, update(t, admin, sp, ch, 0, "genuine"))
	if d := recvC(t, sub.C(), "genuine update"); string(d.Payload()) != "genuine" {
		t.Fatalf("subscriber got %q", d.Payload())
	}
	if sub.Dropped() != 0 {
		t.Fatalf("subscriber dropped %d", sub.Dropped())
	}
}

// TestConformance60_EndOfStream: an EOS ends the channel (rev 14; decided
// as written): every subscription receives it and ends with
// ErrEndOfStream; the broker closes every stream of the cohort, the
// admin's included, and forgets the cohort; a newcomer, subscriber or
// publisher, is told at once.
func TestConformance60_EndOfStream(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "the-end", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a := publishOpts(t, cl[1], broker, sp, admin, false)
	send(t, a, endMsg(t, admin, sp, a.Challenge()))
	if d := recvC(t, sub.C(), "end of stream"); d.Kind != pb.Kind_EOS || !d.Service.Ends() {
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
	if d := recvC(t, late.C(), "newcomer"); d.Kind != pb.Kind_EOS {
		t.Fatalf("newcomer got %+v", d)
	}
	<-late.Done()
	if !errors.Is(late.Err(), bps.ErrEndOfStream) {
		t.Fatalf("newcomer ended with %v", late.Err())
	}
	lp := unclaimed(t, cl[2], broker, sp, admin)
	if d := recvC(t, lp.C(), "late publisher"); d.Kind != pb.Kind_EOS {
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

// TestConformance60_ExtraSeatPerAbsentPublisher: a Join declaring a
// rostered address is admitted pending past the fan-out bound, one per
// address at a time: a newer one takes the seat and the older is reset
// without penalty, so that nobody can hold an absent publisher's seat
// against it (docs/protocol.md, "Bounds"); a stranger meets the bound.
func TestConformance60_ExtraSeatPerAbsentPublisher(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}}, 3)
	admin, bob, carol := newKey(t), newKey(t), newKey(t)
	sp := feedSpec(t, "seats", admin)
	a := publishOpts(t, cl[0], broker, sp, admin, false)
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, bob, carol))
	broker.rec.wait(t, "roster", kind(bps.EventAccept))
	subscribe(t, cl[1], broker, sp) // the fan-out set is full
	var first *raw
	for _, k := range []key{bob, carol} {
		r := openRaw(t, cl[2], broker)
		if ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: k.addr}); ack.Status != pb.Status_OK {
			t.Fatalf("absent rostered publisher refused: %s", ack.Status)
		}
		if first == nil {
			first = r
		}
	}
	if ack := openRaw(t, cl[2], broker).join(&pb.Join{Cohort: sp.PB(), Addr: bob.addr}); ack.Status != pb.Status_OK {
		t.Fatalf("a newer pending stream for bob: %s", ack.Status)
	}
	expectReset(t, first) // the older gives its seat up
	if blocked, err := broker.Blocklisted(cl[2].Overlay()); blocked || err != nil {
		t.Fatalf("the replaced pending stream's peer punished: %v (%v)", blocked, err)
	}
	if ack := openRaw(t, cl[2], broker).join(&pb.Join{Cohort: sp.PB(), Addr: newKey(t).addr}); ack.Status != pb.Status_FULL {
		t.Fatalf("a stranger: %s", ack.Status)
	}
}

// TestConformance60_ServiceGap: a subscriber treats an index gap in the
// ROSTER feed as a liveness fault, and still takes the roster. It compares
// the frames' challenge with nothing (Rev 8): the hostile broker's chunks
// are signed under a challenge of their own.
func TestConformance60_ServiceGap(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "gap", admin)
	ch := keccak([]byte("some stream of the admin's"))
	frames := []*pb.Broadcast{rosterMsg(t, admin, sp, ch, 0), rosterMsg(t, admin, sp, ch, 2, bob), update(t, bob, sp, keccak([]byte("bob's")), 0, "bob")}
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

// TestRev14_06_RosterFirst: the latest ROSTER is a stream's first
// delivery (rev 14, decided as written): at attach for a spectator, at
// once for a pending or silent stream whose address it names (the cue to
// claim, before the claim), and never to the admin's own streams; a
// pending or silent stream it does not name receives nothing.
func TestRev14_06_RosterFirst(t *testing.T) {
	t.Parallel()
	for _, closed := range []bool{false, true} {
		t.Run(fmt.Sprintf("closed=%v", closed), func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 5)
			admin, bob, carol := newKey(t), newKey(t), newKey(t)
			sp := specOf(t, &pb.CohortSpec{Topic: topicOf("roster first"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr, Closed: closed})
			a := publishOpts(t, cl[0], broker, sp, admin, true)
			send(t, a, update(t, admin, sp, a.Challenge(), 0, "before anyone"))
			send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, bob))
			broker.rec.waitN(t, 2, "update and roster", kind(bps.EventAccept))

			// Bob, named: pending; the roster reaches him before any claim.
			pend := openRaw(t, cl[1], broker)
			pack := pend.join(&pb.Join{Cohort: sp.PB(), Addr: bob.addr})
			if m := pend.recvMessage(); m.Kind != pb.Kind_ROSTER || m.Index != 0 {
				t.Fatalf("bob's pending stream got %s %d first, want the roster", m.Kind, m.Index)
			}
			// Carol, not named: a spectator (open) receives the roster first,
			// a silent stream (closed) receives nothing.
			cs := unclaimed(t, cl[2], broker, sp, carol)
			if !closed {
				if d := recvC(t, cs.C(), "carol's spectator stream"); !isRoster(d, 0) {
					t.Fatalf("a spectator's first delivery is %s %d", d.Kind, d.Index)
				}
			}
			// A listener: the roster first.
			sub := subscribe(t, cl[3], broker, sp)
			if !closed {
				if d := recvC(t, sub.C(), "listener"); !isRoster(d, 0) {
					t.Fatalf("a listener's first delivery is %s %d", d.Kind, d.Index)
				}
			}
			// The admin's second stream: never its own roster.
			a2 := publishOpts(t, cl[4], broker, sp, admin, true)
			broker.rec.waitN(t, 2, "two claims", kind(bps.EventClaim))

			// Bob claims: then he receives what every publisher stream does.
			pend.send(auth(t, bob, sp, pack.Challenge))
			broker.rec.waitN(t, 3, "bob's claim", kind(bps.EventClaim))
			send(t, a, update(t, admin, sp, a.Challenge(), 1, "after the claims"))
			if m := pend.recvMessage(); m.Kind != pb.Kind_DATA || m.Index != 1 {
				t.Fatalf("bob's publisher stream got %s %d", m.Kind, m.Index)
			}
			if !closed {
				if d := recvC(t, sub.C(), "listener"); d.Kind != pb.Kind_DATA || d.Index != 1 {
					t.Fatalf("listener got %s %d", d.Kind, d.Index)
				}
				if d := recvC(t, cs.C(), "carol"); d.Kind != pb.Kind_DATA || d.Index != 1 {
					t.Fatalf("carol got %s %d", d.Kind, d.Index)
				}
			}
			// Nothing else reached anyone: the admin's streams got neither
			// the roster nor their own update; in a closed cohort the silent
			// streams got nothing.
			send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 1, bob))
			if m := pend.recvMessage(); m.Kind != pb.Kind_ROSTER || m.Index != 1 {
				t.Fatalf("bob got %s %d", m.Kind, m.Index)
			}
			if !closed {
				if d := recvC(t, sub.C(), "listener"); !isRoster(d, 1) {
					t.Fatalf("listener got %s %d", d.Kind, d.Index)
				}
			}
			broker.rec.wait(t, "roster 1", func(e bps.Event) bool { return e.Kind == bps.EventAccept && e.Service && e.Index == 1 })
			noDelivery(t, a.C(), "the admin's stream")
			noDelivery(t, a2.C(), "the admin's second stream")
			if closed {
				noDelivery(t, cs.C(), "a silent stream")
				noDelivery(t, sub.C(), "a silent listener")
			}
		})
	}
}

// TestRev14_08_SilentNamedThenClaims: in a closed cohort a stream whose
// address no roster names is silent — it receives nothing — until a roster
// names it: that roster reaches it at once, its cue to claim (rev 14), and
// its first valid frame claims on the stream it holds; from then on it
// receives what every publisher stream does, and publishes.
func TestRev14_08_SilentNamedThenClaims(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin, carol := newKey(t), newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("a seat later"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr, Closed: true})
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	broker.rec.wait(t, "the admin's claim", kind(bps.EventClaim))
	c := unclaimed(t, cl[1], broker, sp, carol) // silent
	send(t, a, update(t, admin, sp, a.Challenge(), 0, "before carol's seat"))
	broker.rec.wait(t, "update 0", acceptedIndex(0))

	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, carol))
	if d := recvC(t, c.C(), "carol's cue"); !isRoster(d, 0) {
		t.Fatalf("carol's first delivery is %s %d %q, want the roster naming her", d.Kind, d.Index, d.Payload())
	}
	send(t, c, auth(t, carol, sp, c.Challenge()))
	broker.rec.waitN(t, 2, "carol's claim", kind(bps.EventClaim))
	send(t, a, update(t, admin, sp, a.Challenge(), 1, "to the seats"))
	for {
		d := recvC(t, c.C(), "carol")
		if d.Kind == pb.Kind_ROSTER {
			continue // the latest roster again, at her upgrade: a retransmit to her cursor
		}
		if d.Index != 1 {
			t.Fatalf("carol got %s %d", d.Kind, d.Index)
		}
		break
	}
	send(t, c, update(t, carol, sp, c.Challenge(), 0, "carol plays"))
	if d := recvC(t, a.C(), "the admin hears carol"); string(d.Payload()) != "carol plays" || !bytes.Equal(d.Owner, carol.addr) {
		t.Fatalf("the admin heard %q from %x", d.Payload(), d.Owner)
	}
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations", n)
	}
}

// TestRev14_EOSEndsTheChannel: an EOS is the admin's empty chunk at index 0
// of its own feed: one at another index, or with a payload, is invalid_soc,
// a violation, and ends nothing. A valid one ends the channel, not a
// session (rev 14, decided as written): a later Join — the admin's own, on
// a new stream with a new challenge — is answered with the EOS, and a
// subscriber, which compares no challenge, ends on an EOS of any session
// of the admin's.
func TestRev14_EOSEndsTheChannel(t *testing.T) {
	t.Parallel()
	t.Run("at the broker", func(t *testing.T) {
		t.Parallel()
		_, broker, cl := cluster(t, bps.Options{}, 4)
		admin := newKey(t)
		sp := feedSpec(t, "the end of a channel", admin)
		sub := subscribe(t, cl[0], broker, sp)
		for i, bad := range []func(ch []byte) *pb.Broadcast{
			func(ch []byte) *pb.Broadcast {
				data, _, err := bps.SignSOC(admin.signer, admin.addr, bps.SessionID(pb.Kind_EOS, sp.Topic, ch, 1), nil)
				if err != nil {
					t.Fatal(err)
				}
				return &pb.Broadcast{Soc: data, Kind: pb.Kind_EOS, Challenge: ch, Index: 1}
			},
			func(ch []byte) *pb.Broadcast {
				data, _, err := bps.SignSOC(admin.signer, admin.addr, bps.SessionID(pb.Kind_EOS, sp.Topic, ch, 0), []byte("the end"))
				if err != nil {
					t.Fatal(err)
				}
				return &pb.Broadcast{Soc: data, Kind: pb.Kind_EOS, Challenge: ch}
			},
		} {
			r := openRaw(t, cl[1+i], broker)
			ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
			r.send(bad(ack.Challenge))
			expectReset(t, r)
			waitBlocklisted(t, broker, cl[1+i])
		}
		if c := cohortInfo(t, broker, sp); c.Ended || c.Counters["invalid_soc"] != 2 {
			t.Fatalf("ended %v, counters %v", c.Ended, c.Counters)
		}
		a := publishOpts(t, cl[3], broker, sp, admin, false)
		send(t, a, endMsg(t, admin, sp, a.Challenge()))
		if d := recvC(t, sub.C(), "the end"); d.Kind != pb.Kind_EOS || d.Index != 0 {
			t.Fatalf("got %s %d", d.Kind, d.Index)
		}
		<-a.Done()
		again := unclaimed(t, cl[3], broker, sp, admin)
		if bytes.Equal(again.Challenge(), a.Challenge()) {
			t.Fatal("the new stream has the old challenge")
		}
		if d := recvC(t, again.C(), "the admin's new session"); d.Kind != pb.Kind_EOS {
			t.Fatalf("got %s %d", d.Kind, d.Index)
		}
		<-again.Done()
		if !errors.Is(again.Err(), bps.ErrEndOfStream) {
			t.Fatalf("the admin's new session ended with %v", again.Err())
		}
	})
	t.Run("at the subscriber", func(t *testing.T) {
		t.Parallel()
		net := newNetwork(t)
		admin := newKey(t)
		sp := feedSpec(t, "the end of a channel", admin)
		s1, s2 := keccak([]byte("one session")), keccak([]byte("another session"))
		sub := subscribeToHostile(t, net, sp, []*pb.Broadcast{update(t, admin, sp, s1, 0, "zero"), eos(t, admin, sp, s2), update(t, admin, sp, s1, 1, "after the end")})
		var got []bps.Delivery
		for d := range sub.C() {
			got = append(got, d)
		}
		if len(got) != 2 || got[0].Index != 0 || got[1].Kind != pb.Kind_EOS {
			t.Fatalf("deliveries %+v", got)
		}
		if !errors.Is(sub.Err(), bps.ErrEndOfStream) {
			t.Fatalf("ended with %v", sub.Err())
		}
	})
}

// TestRev14_InvalidRoster: a ROSTER chunk valid at the admin's address
// whose payload is not a Roster of 20-byte entries is dropped and counted
// invalid_roster, not a violation: it claims the admin's pending stream
// like any valid frame, moves no roster cursor and is delivered to nobody;
// the admin's next roster at the same index is taken.
func TestRev14_InvalidRoster(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "not a roster", admin)
	sub := subscribe(t, cl[0], broker, sp)
	r := openRaw(t, cl[1], broker)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	bad, err := proto.Marshal(&pb.Roster{Publishers: [][]byte{bob.addr[:19]}})
	if err != nil {
		t.Fatal(err)
	}
	r.send(chunk(t, admin, sp, pb.Kind_ROSTER, ack.Challenge, 0, bad))
	broker.rec.wait(t, "the claim", kind(bps.EventClaim))
	broker.rec.wait(t, "counted", dropped(bps.CounterInvalidRoster))
	if c := cohortInfo(t, broker, sp); c.ServiceNext != 0 || len(c.Roster) != 0 {
		t.Fatalf("roster cursor %d, roster %x", c.ServiceNext, c.Roster)
	}
	r.send(rosterMsg(t, admin, sp, ack.Challenge, 0, bob))
	if d := recvC(t, sub.C(), "the valid roster"); !isRoster(d, 0) || len(sub.Roster()) != 1 {
		t.Fatalf("got %s %d, roster %x", d.Kind, d.Index, sub.Roster())
	}
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("penalised: %v", bl)
	}
}

// TestRev14_PendingUnnamedReset: a pending stream whose address a new
// roster drops is reset without penalty (docs/protocol.md, decided): it
// was admitted past the bound only as a claimant.
func TestRev14_PendingUnnamedReset(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "unnamed", admin)
	a := publishOpts(t, cl[0], broker, sp, admin, false)
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, bob))
	broker.rec.wait(t, "the grant", kind(bps.EventAccept))
	r := openRaw(t, cl[1], broker)
	r.join(&pb.Join{Cohort: sp.PB(), Addr: bob.addr})
	if m := r.recvMessage(); m.Kind != pb.Kind_ROSTER {
		t.Fatalf("bob's cue is %s", m.Kind)
	}
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 1))
	expectReset(t, r)
	broker.rec.wait(t, "bob's stream left", kind(bps.EventLeave))
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("penalised: %v", bl)
	}
	if c := cohortInfo(t, broker, sp); c.Publishers != 1 || c.Subscribers != 0 {
		t.Fatalf("%d publishers, %d others", c.Publishers, c.Subscribers)
	}
}
