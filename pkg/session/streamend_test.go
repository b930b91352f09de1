// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/ethersphere/bps/pkg/session/mock"
)

// TestReleasedStreamHandsOnWhatItTook: a node's streams of one cohort share
// its feed cursors, so an update one of them took is dropped by the others
// as a retransmit. A publisher stream released while an update it took
// waits in its queue hands it to the room all the same: the node's
// audience gets it. (Released as an update arrived, the stream's reader
// chose the release over the queue about half the time, and the audience
// never got the update: TestSWIP60SpectatorJam, about 1 run in 100 under
// load.) Each round delivers and releases in the same instant of a
// synctest bubble, so that both are ready when the reader wakes.
func TestReleasedStreamHandsOnWhatItTook(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mr := newMockRoom(t, "released")
		audience := &fakeSession{}
		mr.r.Add(audience, session.MemberOptions{}, true)
		carol := newKey(t)
		var want []string
		for i := range uint64(16) {
			e, stream := mr.publish(t, carol)
			payload := fmt.Sprintf("update %d", i)
			if !stream.Deliver(delivery(update(t, mr.admin, mr.sp, i, payload), mr.admin.addr, i, nil)) {
				t.Fatal("the stream took no delivery")
			}
			e.Release()
			synctest.Wait()
			want = append(want, payload)
			if got := audience.got(); !slices.Equal(got, want) {
				t.Fatalf("round %d: the audience got %q, want %q", i, got, want)
			}
		}
	})
}

// mockRoom is a mux over pkg/session/mock and the room of a cohort under
// admin there; closed and released when the test ends.
type mockRoom struct {
	svc   *mock.Service
	x     session.Mux
	r     *session.Room
	admin key
	sp    *bps.Spec
}

func newMockRoom(t *testing.T, topic string) *mockRoom {
	t.Helper()
	mr := &mockRoom{svc: mock.New(), admin: newKey(t)}
	mr.x = session.NewMux(mr.svc, session.MuxOptions{})
	t.Cleanup(func() {
		if err := mr.x.Close(); err != nil {
			t.Error(err)
		}
	})
	mr.sp = feedSpec(t, topic, mr.admin)
	r, err := mr.x.Room(swarm.NewAddress(make([]byte, swarm.HashSize)), mr.sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Release)
	mr.r = r
	return mr
}

// publish opens the room's receiving publisher stream of k, and the mock
// stream under it.
func (mr *mockRoom) publish(t *testing.T, k key) (*session.PubStream, *mock.Stream) {
	t.Helper()
	e, err := mr.x.Publish(t.Context(), mr.r, session.StreamOptions{Addr: k.addr, Receive: true})
	if err != nil {
		t.Fatal(err)
	}
	<-e.Ready()
	if e.Err() != nil {
		t.Fatal(e.Err())
	}
	opened := mr.svc.Opened()
	return e, opened[len(opened)-1]
}

// orderSession records, in order, how the room and its stream end it; its
// EndOfCohort tells entered and then waits for hold, as a session's own
// work would take time; its End closes ended.
type orderSession struct {
	fakeSession
	entered, ended chan struct{}
	hold           <-chan struct{}
	mu             sync.Mutex
	seen           []string
}

func (o *orderSession) EndOfCohort(*bps.ServiceMsg, bool) {
	close(o.entered)
	<-o.hold
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, "end of cohort")
}

func (o *orderSession) End(error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seen = append(o.seen, "stream ended")
	close(o.ended)
}

// TestEndOfCohortBeforeTheStreamsEnd: after the admin's EOS the broker
// closes every stream of the cohort; a publisher stream it closed without
// the EOS on it (another stream of the node brought it) waits for the room
// to apply it, then ends its sessions. A session is told the end of the
// cohort (its service frame) before its stream's end (an error frame):
// the room marks the cohort ended only once it told every member. (It
// marked it first, and a stream's end raced the room's telling: a dApp got
// "end of stream" as an error, TestSWIP60GroupChat 1–2 runs in 150.)
func TestEndOfCohortBeforeTheStreamsEnd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mr := newMockRoom(t, "the end first")
		r, admin, sp := mr.r, mr.admin, mr.sp
		e, stream := mr.publish(t, newKey(t))
		defer e.Release()
		hold := make(chan struct{})
		s := &orderSession{entered: make(chan struct{}), ended: make(chan struct{}), hold: hold}
		r.Add(s, session.MemberOptions{}, true)
		if err := e.Add(s); err != nil {
			t.Fatal(err)
		}
		stream.End(nil) // closed by the broker, no EOS on it
		synctest.Wait() // the stream waits for the room's EOS

		em, eos := service(t, admin, sp, pb.Kind_EOS, 0)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Deliver(delivery(em, admin.addr, 0, eos)) // another stream's EOS
		}()
		<-s.entered // the room is telling s the end of the cohort
		select {
		case <-s.ended:
			t.Error("the stream ended its session while the room was telling it the end of the cohort")
		case <-time.After(time.Second): // virtual time: everything else waits
		}
		close(hold)
		<-done
		<-s.ended
		s.mu.Lock()
		defer s.mu.Unlock()
		if want := []string{"end of cohort", "stream ended"}; !slices.Equal(s.seen, want) {
			t.Fatalf("the session saw %q, want %q", s.seen, want)
		}
	})
}
