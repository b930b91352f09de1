// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build rev8todo

package bps_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// TestConformance74_09_StreamsPerCohort: FULL at the fan-out bound, one extra
// seat for a Join declaring the admin while no publisher stream exists.
func TestConformance74_09_StreamsPerCohort(t *testing.T) {
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
	extra := openRaw(t, cl[3], broker)
	ack := extra.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	if ack.Status != pb.Status_OK {
		t.Fatalf("the admin's extra seat: %s, want OK", ack.Status)
	}
	if ack := openRaw(t, cl[3], broker).join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr}); ack.Status != pb.Status_FULL {
		t.Fatalf("a second extra seat: %s, want FULL", ack.Status)
	}
	extra.send(claimFor(t, admin, ack.Challenge, broker.Overlay(), 0))
	broker.rec.wait(t, "extra seat claimed", kind(bps.EventClaim))
	if c := cohortInfo(t, broker, sp); c.Publishers != 1 || c.Subscribers != 2 {
		t.Fatalf("publishers %d subscribers %d, want 1 2", c.Publishers, c.Subscribers)
	}
	// A returning admin, a publisher stream of its own present, is not a
	// fan-out stream either: a provisional seat at the bound, taken by its
	// claim after the Ack.
	back := openRaw(t, cl[2], broker)
	ack = back.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	if ack.Status != pb.Status_OK {
		t.Fatalf("a returning admin at the bound: %s, want OK", ack.Status)
	}
	back.send(claimFor(t, admin, ack.Challenge, broker.Overlay(), 0))
	broker.rec.waitN(t, 2, "the returning admin's claim", kind(bps.EventClaim))
	if c := cohortInfo(t, broker, sp); c.Publishers != 2 || c.Subscribers != 2 {
		t.Fatalf("publishers %d subscribers %d, want 2 2", c.Publishers, c.Subscribers)
	}
}

// TestConformance74_09_ClaimDeadline: the extra seat is disconnected, counted
// and briefly blocklisted if it has not claimed within the claim deadline.
func TestConformance74_09_ClaimDeadline(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Timing: bps.Timing{ClaimDeadline: 50 * time.Millisecond}}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "deadline", admin)
	sub := subscribe(t, cl[0], broker, sp)
	extra := openRaw(t, cl[1], broker)
	if ack := extra.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr}); ack.Status != pb.Status_OK {
		t.Fatal(ack.Status)
	}
	expectReset(t, extra)
	waitBlocklisted(t, broker, cl[1])
	if got := cohortInfo(t, broker, sp).Counters["claim_timeout"]; got != 1 {
		t.Fatalf("claim_timeout = %d, want 1", got)
	}
	select {
	case <-sub.Done():
		t.Fatalf("the subscriber lost its stream: %v", sub.Err())
	default:
	}
}

// TestConformance74_09_CohortBounds: live cohorts per broker and cohorts per
// peer connection answer FULL; attaching to an existing cohort is not
// refused by the node bound.
func TestConformance74_09_CohortBounds(t *testing.T) {
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

// TestConformance74_10_SubscriberReverifies: a subscriber re-verifies every
// delivery against its spec and its own cursor, whatever its broker sends.
func TestConformance74_10_SubscriberReverifies(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin, forger := newKey(t), newKey(t)
	sp := feedSpec(t, "reverify", admin)
	tampered := update(t, admin, sp, 3, "tampered")
	tampered.Data[len(tampered.Data)-1] ^= 1
	notBare := update(t, admin, sp, 3, "full id")
	copy(notBare.Data, bps.FeedID(sp.Topic, 3))
	frames := []*pb.Message{
		update(t, admin, sp, 0, "zero"),
		update(t, forger, sp, 1, "forged"),
		tampered,
		notBare,
		update(t, admin, sp, 2, "two"),
		update(t, admin, sp, 0, "replayed zero"),
		update(t, admin, sp, 5, "five"),
	}

	sub := subscribeToHostile(t, net, sp, frames)
	var got []uint64
	for d := range sub.C() {
		got = append(got, d.Index)
	}
	if len(got) != 3 || got[0] != 0 || got[1] != 2 || got[2] != 5 {
		t.Fatalf("delivered %v, want [0 2 5]", got)
	}
	if sub.Dropped() != 4 {
		t.Fatalf("dropped %d, want 4", sub.Dropped())
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
	slow.join(&pb.Join{Cohort: sp.PB()})
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
