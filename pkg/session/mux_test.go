// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session_test

import (
	"sync"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
)

// fakeSession records what a room hands it.
type fakeSession struct {
	mu        sync.Mutex
	delivered [][]byte // payloads
	services  []uint64 // service indexes
	ended     error
	eoc       *bps.ServiceMsg
	eocCalled bool
	pokes     int
	refuse    bool // a full queue
}

func (f *fakeSession) Deliver(v *session.View) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refuse {
		return false
	}
	f.delivered = append(f.delivered, v.Delivery().Payload())
	return true
}

func (f *fakeSession) Service(svc *bps.ServiceMsg, _ bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.services = append(f.services, svc.Index)
	return true
}

func (f *fakeSession) EndOfCohort(final *bps.ServiceMsg, _ bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eoc, f.eocCalled = final, true
}

func (f *fakeSession) End(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = err
}

func (f *fakeSession) Poke() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pokes++
}

func (f *fakeSession) Closed() bool { return false }

func (f *fakeSession) got() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.delivered))
	for i, p := range f.delivered {
		out[i] = string(p)
	}
	return out
}

// TestMuxRoom: a room hands a message once whichever stream brings it, to
// every receiving member but its owner's and an echo filter's; a session
// that cannot take a delivery leaves the room; the roster and the end of
// the cohort reach every member.
func TestMuxRoom(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	nd := newNode(t, net, bps.Options{})
	x := session.NewMux(session.Node{Service: nd.svc}, session.MuxOptions{})
	t.Cleanup(func() {
		if err := x.Close(); err != nil {
			t.Error(err)
		}
	})
	admin, bob := newKey(t), newKey(t)
	sp := feedSpec(t, "mux-room", admin)
	broker := swarm.RandAddress(t)
	r, err := x.Room(broker, sp)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := x.Room(broker, sp); again != r || x.LookupRoom(broker, sp) != r {
		t.Fatal("a second room for the same cohort")
	}
	r.Release()

	plain, owner, echo, slow, waiting := &fakeSession{}, &fakeSession{}, &fakeSession{}, &fakeSession{refuse: true}, &fakeSession{}
	filter := session.NewEchoFilter(4)
	r.Add(plain, session.MemberOptions{}, true)
	r.Add(owner, session.MemberOptions{Owner: admin.addr}, true)
	r.Add(echo, session.MemberOptions{Owner: admin.addr, Echo: filter}, true)
	r.Add(slow, session.MemberOptions{}, true)
	r.Add(waiting, session.MemberOptions{}, false)

	m0, m1 := update(t, admin, sp, 0, "zero"), update(t, admin, sp, 1, "one")
	filter.Add(bps.FrameKey(m0.b)) // echo sent m0 itself
	r.Deliver(delivery(m0, admin.addr, 0, nil))
	r.Deliver(delivery(m0, admin.addr, 0, nil)) // the copy another stream brings
	r.Deliver(delivery(m1, admin.addr, 1, nil))
	if got := plain.got(); len(got) != 2 || got[0] != "zero" || got[1] != "one" {
		t.Fatalf("plain got %v, want zero, one once each", got)
	}
	if got := owner.got(); len(got) != 0 {
		t.Fatalf("the owner got its own messages %v", got)
	}
	if got := echo.got(); len(got) != 1 || got[0] != "one" {
		t.Fatalf("echo got %v, want only what it did not send", got)
	}
	if got := waiting.got(); len(got) != 0 {
		t.Fatalf("a member not receiving got %v", got)
	}

	rm, roster := service(t, admin, sp, pb.Kind_ROSTER, 0, bob.addr)
	if r.Rostered(bob.addr) {
		t.Fatal("bob rostered before the roster")
	}
	r.Deliver(delivery(rm, admin.addr, 0, roster))
	if !r.Rostered(bob.addr) || !r.Rostered(admin.addr) || r.Service().Next != 1 {
		t.Fatalf("after the roster: %+v", r.Service())
	}
	if plain.services[0] != 0 || plain.pokes != 1 || waiting.pokes != 1 || len(waiting.services) != 0 {
		t.Fatalf("roster: plain %v/%d, waiting %v/%d", plain.services, plain.pokes, waiting.services, waiting.pokes)
	}
	r.Receive(waiting) // told the roster in force first
	if len(waiting.services) != 1 {
		t.Fatalf("a member starting to receive was not told the roster: %v", waiting.services)
	}

	em, eos := service(t, admin, sp, pb.Kind_EOS, 0)
	r.Deliver(delivery(em, admin.addr, 0, eos))
	if plain.eoc == nil || waiting.eoc == nil || slow.eocCalled {
		t.Fatal("the end of the cohort did not reach every member, or reached the one that left")
	}
	late := &fakeSession{}
	r.Add(late, session.MemberOptions{}, true)
	if !late.eocCalled || late.eoc != nil {
		t.Fatal("a member joining an ended cohort was not ended")
	}
	r.Release()
	if x.LookupRoom(broker, sp) != nil {
		t.Fatal("the room outlived its last reference")
	}
}

// TestMuxSharesStreams: sessions watching a cohort share one subscriber
// stream, listed with its sessions; the last release closes it.
func TestMuxSharesStreams(t *testing.T) {
	t.Parallel()
	_, broker, clients := cluster(t, bps.Options{}, 1)
	c := clients[0]
	x := session.NewMux(session.Node{Service: c.svc}, session.MuxOptions{})
	t.Cleanup(func() {
		if err := x.Close(); err != nil {
			t.Error(err)
		}
	})
	admin := newKey(t)
	sp := feedSpec(t, "mux-shares", admin)
	r, err := x.Room(broker.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	a, b := &fakeSession{}, &fakeSession{}
	h1, err := x.Subscribe(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	h2, err := x.Subscribe(ctxT(t), r)
	if err != nil {
		t.Fatal(err)
	}
	if h1 != h2 || h1.Add(a) != nil || h2.Add(b) != nil {
		t.Fatal("two subscriber streams for one cohort")
	}
	if ci := cohortInfo(t, broker, sp); ci.Subscribers != 1 {
		t.Fatalf("the broker holds %d subscriber streams, want 1", ci.Subscribers)
	}
	if st := x.Streams(); len(st) != 1 || st[0].Publisher || st[0].Sessions != 2 || !st[0].Broker.Equal(broker.Overlay()) {
		t.Fatalf("streams %+v", st)
	}
	h1.Remove(a)
	h1.Release()
	h2.Remove(b)
	h2.Release()
	r.Release()
	if st := x.Streams(); len(st) != 0 {
		t.Fatalf("streams after the last release: %+v", st)
	}
}
