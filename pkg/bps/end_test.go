// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// TestEndOfStreamClosesEveryStream: after the admin's EOS the
// broker delivers it, then closes every stream of the cohort — a
// subscriber's, a granted publisher's, the admin's own, a silent one in a
// closed cohort — from its side (the peer reads EOF right after the
// delivery, not a reset), and forgets the cohort. Each handler ends cleanly
// once its peer closed too (issue 8 item 4).
func TestEndOfStreamClosesEveryStream(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin, bob := newKey(t), newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("the end, closed"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, bob))
	broker.rec.wait(t, "roster", kind(bps.EventAccept))
	b := publishOpts(t, cl[1], broker, sp, bob, true)
	recvC(t, b.C(), "bob's first delivery")
	silent := openRaw(t, cl[2], broker)
	if ack := silent.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress}); ack.Status != pb.Status_OK {
		t.Fatal(ack.Status)
	}
	broker.rec.waitN(t, 3, "three streams", kind(bps.EventJoin))
	broker.rec.waitN(t, 2, "the admin's and bob's claims", kind(bps.EventClaim))

	end := endMsg(t, admin, sp, a.Challenge())
	send(t, a, end)
	if d := recvC(t, b.C(), "bob hears the end"); d.Kind != pb.Kind_EOS || d.Service == nil || !d.Service.Ends() || !proto.Equal(d.Broadcast(), end) {
		t.Fatalf("bob got %+v", d)
	}
	<-b.Done()
	if !errors.Is(b.Err(), bps.ErrEndOfStream) {
		t.Fatalf("bob's stream ended with %v", b.Err())
	}
	// The admin's own stream is not sent its end back; it closes cleanly.
	if d := recvC(t, a.C(), "the admin's own end"); d.Kind != pb.Kind_EOS || !d.Service.Ends() {
		t.Fatalf("the admin got %+v", d)
	}
	<-a.Done()
	if !errors.Is(a.Err(), bps.ErrEndOfStream) {
		t.Fatalf("the admin's stream ended with %v", a.Err())
	}
	// The silent stream receives nothing, then the broker's close: EOF.
	if err := silent.expectEnd(); !errors.Is(err, io.EOF) {
		t.Fatalf("the silent stream ended with %v, want EOF", err)
	}
	_ = silent.s.Close()
	broker.rec.waitN(t, 3, "every stream left cleanly", func(e bps.Event) bool { return e.Kind == bps.EventLeave && e.Err == nil })
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations", n)
	}
	broker.rec.wait(t, "cohort ended", kind(bps.EventEnd))
	if n := len(broker.svc.Cohorts()); n != 0 {
		t.Fatalf("the broker still lists %d cohorts", n)
	}
}

// TestEndOfStreamGrace: a peer that keeps its side open after the broker
// delivered EOS and closed its own is reset after EndGrace, not
// blocklisted.
func TestEndOfStreamGrace(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Timing: bps.Timing{EndGrace: 50 * time.Millisecond}}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "the end, stayed", admin)
	stay := openRaw(t, cl[0], broker)
	if ack := stay.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress}); ack.Status != pb.Status_OK {
		t.Fatal(ack.Status)
	}
	a := publishOpts(t, cl[1], broker, sp, admin, false)
	end := endMsg(t, admin, sp, a.Challenge())
	send(t, a, end)
	if got := stay.recvMessage(); !proto.Equal(got, end) {
		t.Fatalf("first delivery kind %s, want the end", got.Kind)
	}
	if err := stay.expectEnd(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v, want EOF", err)
	}
	// The peer does not close: the broker resets it at EndGrace.
	leave := broker.rec.wait(t, "the lingering stream reset", func(e bps.Event) bool { return e.Kind == bps.EventLeave && e.Err != nil })
	if !errors.Is(leave.Err, bps.ErrEndGrace) {
		t.Fatalf("left with %v", leave.Err)
	}
	blocked, err := broker.Blocklisted(cl[0].Overlay())
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 || blocked || err != nil {
		t.Fatalf("a lingering peer was punished: %d violations, blocklisted %v (%v)", n, blocked, err)
	}
}

// TestEndedCohortsBounded: the broker remembers ended cohorts in a bounded
// LRU — past EndedCohorts the least recently ended is forgotten, and a Join
// for it creates a fresh cohort — while a remembered one is told.
func TestEndedCohortsBounded(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{EndedCohorts: 1}}, 2)
	admin := newKey(t)
	first, second := feedSpec(t, "ended first", admin), feedSpec(t, "ended second", admin)
	for _, sp := range []*bps.Spec{first, second} {
		a := publishOpts(t, cl[0], broker, sp, admin, false)
		send(t, a, endMsg(t, admin, sp, a.Challenge()))
		<-a.Done()
	}
	broker.rec.waitN(t, 2, "both ended", kind(bps.EventEnd))

	told := openRaw(t, cl[1], broker)
	if ack := told.join(&pb.Join{Cohort: second.PB(), Addr: bps.ZeroAddress}); ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
		t.Fatalf("%s, challenge %x", ack.Status, ack.Challenge)
	}
	if got := told.recvMessage(); got.Kind != pb.Kind_EOS {
		t.Fatalf("first delivery kind %s, want the end", got.Kind)
	}
	if err := told.expectEnd(); !errors.Is(err, io.EOF) {
		t.Fatalf("the told stream ended with %v, want EOF", err)
	}
	fresh := openRaw(t, cl[1], broker)
	if ack := fresh.join(&pb.Join{Cohort: first.PB(), Addr: bps.ZeroAddress}); ack.Status != pb.Status_OK {
		t.Fatal(ack.Status)
	}
	broker.rec.wait(t, "a fresh cohort", func(e bps.Event) bool {
		return e.Kind == bps.EventJoin && e.Cohort == first.String() && e.Status == pb.Status_OK.String()
	})
	if c := cohortInfo(t, broker, first); c.Ended || c.Subscribers != 1 {
		t.Fatalf("the forgotten spec: %+v", c)
	}
}

// TestEndedSpecsTTL: an ended cohort is remembered for EndedTTL, then
// forgotten; the memory holds at most its bound.
func TestEndedSpecsTTL(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		e := bps.NewEndedSpecs(2, time.Minute)
		e.Put("a", []byte("end a"))
		time.Sleep(time.Minute)
		if got := e.Get("a"); string(got) != "end a" {
			t.Fatalf("at the TTL: %q", got)
		}
		time.Sleep(time.Nanosecond)
		if got := e.Get("a"); got != nil {
			t.Fatalf("past the TTL: %q", got)
		}
		for _, k := range []string{"b", "c", "d"} {
			e.Put(k, []byte("end "+k))
		}
		if e.Len() != 2 || e.Get("b") != nil || e.Get("d") == nil {
			t.Fatalf("bounded memory: %d entries", e.Len())
		}
	})
}

// TestCloseDuringEndGrace: the service's Close ends a stream of an ended
// cohort whose peer has not closed yet, within Close's bound.
func TestCloseDuringEndGrace(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Timing: bps.Timing{EndGrace: time.Hour}}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "closed while ending", admin)
	stay := openRaw(t, cl[0], broker)
	if ack := stay.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress}); ack.Status != pb.Status_OK {
		t.Fatal(ack.Status)
	}
	a := publishOpts(t, cl[1], broker, sp, admin, false)
	send(t, a, endMsg(t, admin, sp, a.Challenge()))
	stay.recvMessage()
	if err := stay.expectEnd(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the end: %v, want EOF", err)
	}
	broker.rec.wait(t, "cohort ended", kind(bps.EventEnd))
	if err := broker.svc.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
}
