// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// TestRev8_09_StreamsPerCohort (Rev 8 item 9): FULL at the fan-out bound
// and only there; a Join declaring the admin's address is admitted past
// it as a pending stream — one per address at a time: a second replaces
// the first, which is reset without penalty (Rev 8: "admitted as a
// pending stream whether or not its old one is still held") — and stands
// outside the bound once it claims; a returning admin, a publisher stream
// of its own present, is admitted pending again (docs/protocol.md
// "Bounds").
func TestRev8_09_StreamsPerCohort(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}}, 4)
	admin := newKey(t)
	sp := feedSpec(t, "bound", admin)
	subscribe(t, cl[0], broker, sp)
	subscribe(t, cl[1], broker, sp)
	if _, err := cl[2].svc.Subscribe(ctxT(t), broker.Overlay(), sp); !errors.Is(err, bps.ErrFull) {
		t.Fatalf("third subscriber: %v, want FULL", err)
	}
	if ack := openRaw(t, cl[3], broker).join(&pb.Join{Cohort: sp.PB(), Addr: newKey(t).addr}); ack.Status != pb.Status_FULL {
		t.Fatalf("a stranger declaring an address: %s, want FULL", ack.Status)
	}
	old := openRaw(t, cl[3], broker)
	if ack := old.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr}); ack.Status != pb.Status_OK {
		t.Fatalf("the admin past the bound: %s, want OK", ack.Status)
	}
	pending := openRaw(t, cl[2], broker)
	ack := pending.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	if ack.Status != pb.Status_OK {
		t.Fatalf("a second pending stream of the admin's: %s, want OK", ack.Status)
	}
	expectReset(t, old)
	broker.rec.wait(t, "the replaced stream left", func(e bps.Event) bool { return e.Kind == bps.EventLeave && e.Err != nil })
	pending.send(auth(t, admin, sp, ack.Challenge))
	broker.rec.wait(t, "the pending stream's claim", kind(bps.EventClaim))
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 || len(broker.Blocklists()) != 0 {
		t.Fatalf("the replaced pending stream was punished: %d violations, blocklisted %v", n, broker.Blocklists())
	}
	if c := cohortInfo(t, broker, sp); c.Publishers != 1 || c.Subscribers != 2 {
		t.Fatalf("publishers %d subscribers %d, want 1 2", c.Publishers, c.Subscribers)
	}
	back := openRaw(t, cl[3], broker)
	ack = back.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	if ack.Status != pb.Status_OK {
		t.Fatalf("a returning admin at the bound: %s, want OK", ack.Status)
	}
	back.send(auth(t, admin, sp, ack.Challenge))
	broker.rec.waitN(t, 2, "the returning admin's claim", kind(bps.EventClaim))
	if c := cohortInfo(t, broker, sp); c.Publishers != 2 || c.Subscribers != 2 {
		t.Fatalf("publishers %d subscribers %d, want 2 2", c.Publishers, c.Subscribers)
	}
	if _, err := cl[2].svc.Subscribe(ctxT(t), broker.Overlay(), sp); !errors.Is(err, bps.ErrFull) {
		t.Fatalf("a subscriber with the publisher streams outside the bound: %v, want FULL", err)
	}
}

// TestRev8_09_StreamsPerConnectionCountEvery (Rev 8 item 9; issue 23's
// second hole): the streams one peer connection holds in a cohort are
// bounded, counting every stream whatever it declares — pending, spectator
// (the zero address or made-up ones), publisher: one overlay declaring
// made-up addresses holds 4 seats (docs/protocol.md "Bounds": 4, Rev 8
// recommends 2), then FULL, while an honest joiner gets in.
func TestRev8_09_StreamsPerConnectionCountEvery(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 6}}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "one overlay", admin)
	evil, honest := cl[0], cl[1]
	// The admin's own stream, claimed before the overlay's streams come
	// (one pending stream per address at a time: docs/protocol.md
	// "Bounds").
	pub := publish(t, honest, broker, sp, admin, 0)
	broker.rec.wait(t, "the admin's claim", kind(bps.EventClaim))

	for i, addr := range [][]byte{admin.addr, bps.ZeroAddress, newKey(t).addr, newKey(t).addr} {
		if ack := openRaw(t, evil, broker).join(&pb.Join{Cohort: sp.PB(), Addr: addr}); ack.Status != pb.Status_OK {
			t.Fatalf("stream %d of one overlay: %s, want OK", i, ack.Status)
		}
	}
	if bps.MaxPeerStreams != 4 {
		t.Fatalf("the bound is %d, this test counts 4", bps.MaxPeerStreams)
	}
	for name, addr := range map[string][]byte{"a made-up address": newKey(t).addr, "the zero address": bps.ZeroAddress} {
		if ack := openRaw(t, evil, broker).join(&pb.Join{Cohort: sp.PB(), Addr: addr}); ack.Status != pb.Status_FULL {
			t.Fatalf("a fifth stream of one overlay, %s: %s, want FULL", name, ack.Status)
		}
	}
	if _, err := evil.svc.Subscribe(ctxT(t), broker.Overlay(), sp); !errors.Is(err, bps.ErrFull) {
		t.Fatalf("a fifth stream of one overlay, subscribing: %v, want FULL", err)
	}
	// A publisher stream counts too: the overlay's pending stream claims,
	// and still a fifth is FULL.
	p, err := evil.svc.Publish(ctxT(t), broker.Overlay(), sp, bps.PublishOptions{Addr: admin.addr, Signer: admin.signer})
	if !errors.Is(err, bps.ErrFull) {
		if err == nil {
			_ = p.Close()
		}
		t.Fatalf("the admin's fifth stream from one overlay: %v, want FULL", err)
	}
	// Another overlay is not held back: the cohort has room for its
	// subscriber, which the admin's stream reaches.
	sub := subscribe(t, honest, broker, sp)
	sendUpdate(t, pub, 0, "honest")
	if d := recv(t, sub); string(d.Payload()) != "honest" {
		t.Fatalf("the honest subscriber got %q", d.Payload())
	}
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("FULL blocklisted %v", bl)
	}
}

// TestRev8_09_ClaimDeadline (Rev 8 item 9): a pending stream, and a silent
// one in a closed cohort, that has not claimed within the claim deadline
// is disconnected, counted claim_timeout and briefly blocklisted; a
// spectator of an open cohort holds its seat. Runs on synctest's clock.
func TestRev8_09_ClaimDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const deadline = bps.DefaultClaimDeadline
		_, broker, cl := cluster(t, bps.Options{}, 3)
		admin := newKey(t)
		open := feedSpec(t, "deadline", admin)
		closed := specOf(t, &pb.CohortSpec{Topic: topicOf("deadline, closed"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
		sub := subscribe(t, cl[0], broker, open)
		joined := func(c *tnode, sp *bps.Spec, addr []byte) {
			t.Helper()
			if ack := openRaw(t, c, broker).join(&pb.Join{Cohort: sp.PB(), Addr: addr}); ack.Status != pb.Status_OK {
				t.Fatal(ack.Status)
			}
		}
		joined(cl[1], open, admin.addr)         // pending
		joined(cl[2], closed, newKey(t).addr)   // silent
		joined(cl[0], open, newKey(t).addr)     // a spectator
		time.Sleep(deadline - time.Millisecond) // each joined at the start
		synctest.Wait()
		if n := broker.rec.count(dropped(bps.CounterClaimTimeout)); n != 0 {
			t.Fatalf("%d cut before the deadline", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := cohortInfo(t, broker, open).Counters["claim_timeout"]; got != 1 {
			t.Fatalf("open cohort: claim_timeout = %d, want 1", got)
		}
		for _, c := range cl[1:] {
			if ok, err := broker.Blocklisted(c.Overlay()); !ok || err != nil {
				t.Fatalf("%s not blocklisted: %v", c.Overlay(), err)
			}
		}
		if ok, _ := broker.Blocklisted(cl[0].Overlay()); ok {
			t.Fatal("the spectator's peer was blocklisted")
		}
		if c := cohortInfo(t, broker, open); c.Subscribers != 2 {
			t.Fatalf("open cohort: %d subscriber streams, want 2 (the subscription, the spectator)", c.Subscribers)
		}
		select {
		case <-sub.Done():
			t.Fatalf("the subscriber lost its stream: %v", sub.Err())
		default:
		}
	})
}

// TestRev8_09_CohortBounds (Rev 8 item 9): live cohorts per broker and
// cohorts per peer connection answer FULL; attaching to an existing
// cohort is not refused by the node bound.
func TestRev8_09_CohortBounds(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{MaxCohorts: 3, MaxCohortsPerPeer: 2}}, 3)
	admin := newKey(t)
	specs := []*bps.Spec{feedSpec(t, "a", admin), feedSpec(t, "b", admin), feedSpec(t, "c", admin), feedSpec(t, "d", admin)}

	subscribe(t, cl[0], broker, specs[0])
	subscribe(t, cl[0], broker, specs[1])
	if _, err := cl[0].svc.Subscribe(ctxT(t), broker.Overlay(), specs[2]); !errors.Is(err, bps.ErrFull) {
		t.Fatalf("third cohort from one peer: %v, want FULL", err)
	}
	subscribe(t, cl[0], broker, specs[0]) // a second stream in a cohort it holds is fine
	subscribe(t, cl[1], broker, specs[2]) // another peer creates the third cohort
	if _, err := cl[1].svc.Subscribe(ctxT(t), broker.Overlay(), specs[3]); !errors.Is(err, bps.ErrFull) {
		t.Fatalf("fourth cohort at the broker: %v, want FULL", err)
	}
	subscribe(t, cl[2], broker, specs[1]) // attaching is not creating
	if n := len(broker.svc.Cohorts()); n != 3 {
		t.Fatalf("%d cohorts, want 3", n)
	}
}

// TestRev8_10_SubscriberReverifies (Rev 8 item 10): a subscriber
// re-verifies every delivery, deriving the id from the frame's kind,
// challenge and index, and compares the challenge with nothing: updates
// under many challenges are taken; one below its own cursor, one whose
// owner is not the admin, and a kind it does not deliver (AUTH) are
// dropped; a chunk that does not validate ends the parent stream
// (docs/protocol.md "Receivers"), and nothing after it is taken.
func TestRev8_10_SubscriberReverifies(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin, forger := newKey(t), newKey(t)
	sp := feedSpec(t, "reverify", admin)
	x, y, z := keccak([]byte("x")), keccak([]byte("y")), keccak([]byte("z"))
	indexChanged := update(t, admin, sp, x, 6, "six")
	indexChanged.Index = 7
	frames := []*pb.Broadcast{
		update(t, admin, sp, x, 0, "zero"),
		update(t, admin, sp, y, 1, "one, another stream's"),
		update(t, forger, sp, z, 2, "forged"),
		update(t, admin, sp, z, 0, "replayed zero, another session's"),
		auth(t, admin, sp, x),
		update(t, admin, sp, z, 5, "five"),
		indexChanged,
		update(t, admin, sp, x, 8, "never taken"),
	}

	sub := subscribeToHostile(t, net, sp, frames)
	var got []uint64
	for d := range sub.C() {
		got = append(got, d.Index)
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 1 || got[2] != 5 {
		t.Fatalf("delivered %v, want [0 1 5]", got)
	}
	if sub.Dropped() != 4 {
		t.Fatalf("dropped %d, want 4 (forged, replayed, AUTH, invalid)", sub.Dropped())
	}
	<-sub.Done()
	if err := sub.Err(); err == nil || !strings.Contains(err.Error(), "invalid_soc") {
		t.Fatalf("the subscription ended with %v, want the parent's invalid chunk", err)
	}
}

// TestQueueFullResetsOnlyThatStream: a subscriber that stops reading is reset
// when its queue fills (queue_reset); the publisher never blocks and every
// other subscriber receives everything.
func TestQueueFullResetsOnlyThatStream(t *testing.T) {
	t.Parallel()
	const n = 40
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{QueueLen: 4}}, 3, streamtest.WithBufferSize(2048))
	admin := newKey(t)
	sp := feedSpec(t, "slow", admin)
	fast := subscribe(t, cl[0], broker, sp)
	slow := openRaw(t, cl[1], broker) // never reads past the Ack
	slow.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress})
	p := publish(t, cl[2], broker, sp, admin, 0)

	// The publisher is paced by the fast subscriber, never by the slow one:
	// each publication returns before the slow stream's queue drains.
	for i := range uint64(n) {
		if err := p.PublishUpdate(ctxT(t), i, make([]byte, 1000)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if d := recv(t, fast); d.Index != i {
			t.Fatalf("fast subscriber got %d, want %d", d.Index, i)
		}
	}
	broker.rec.wait(t, "queue reset", kind(bps.EventQueueReset))
	expectReset(t, slow)
	if got := cohortInfo(t, broker, sp).Counters["queue_reset"]; got != 1 {
		t.Fatalf("queue_reset = %d, want 1", got)
	}
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("a slow subscriber was blocklisted: %v", bl)
	}
}

// TestBackoff: after FULL the next Join to that broker and cohort waits out a
// randomised delay in [1 s, 30 s]; the delays grow and are jittered.
func TestBackoff(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}})
	c1 := newNode(t, net, bps.Options{})
	c2 := newNode(t, net, bps.Options{})
	for _, c := range []*tnode{c1, c2} {
		if err := net.Connect(c.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	sp := feedSpec(t, "backoff", newKey(t))
	subscribe(t, c1, broker, sp)
	before := time.Now()
	if _, err := c2.svc.Subscribe(ctxT(t), broker.Overlay(), sp); !errors.Is(err, bps.ErrFull) {
		t.Fatalf("want FULL, got %v", err)
	}
	until := c2.svc.BackoffUntil(broker.Overlay(), sp)
	if d := until.Sub(before); d < time.Second || d > 2*time.Second+time.Since(before) {
		t.Fatalf("first backoff %s, want within [1s, 2s]", d)
	}
	joins := broker.rec.count(kind(bps.EventJoin))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c2.svc.Subscribe(ctx, broker.Overlay(), sp); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("rejoin during backoff: %v, want to wait", err)
	}
	if got := broker.rec.count(kind(bps.EventJoin)); got != joins {
		t.Fatalf("a Join reached the broker during backoff")
	}

	seen := map[time.Duration]bool{}
	for attempt := 1; attempt <= 10; attempt++ {
		for range 50 {
			d := c2.svc.BackoffDelay(attempt)
			ceil := min(time.Second<<attempt, 30*time.Second)
			if d < time.Second || d > ceil {
				t.Fatalf("attempt %d: delay %s outside [1s, %s]", attempt, d, ceil)
			}
			seen[d] = true
		}
	}
	if len(seen) < 100 {
		t.Fatalf("only %d distinct delays: no jitter", len(seen))
	}
}
