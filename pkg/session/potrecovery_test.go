// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/pot"
	"github.com/ethersphere/bps/pkg/session"
)

// potSession is a gapSession that recovers by pot descent: it records each
// delivery by its pot node's value ("value", "value*" recovered), and
// equivocations as "equivocation w-top".
type potSession struct {
	*gapSession
	mu     sync.Mutex
	equivs []*session.EquivocationError
	sigs   [][]byte // signatures of recovered deliveries
	addrs  []swarm.Address
}

func newPotSession() *potSession { return &potSession{gapSession: newGapSession()} }

func (p *potSession) PotProfile() bool { return true }

func (p *potSession) Equivocation(_ context.Context, err *session.EquivocationError) bool {
	p.mu.Lock()
	p.equivs = append(p.equivs, err)
	p.mu.Unlock()
	return p.record(fmt.Sprintf("equivocation %d-%d", err.Index, err.Top))
}

func (p *potSession) Deliver(v *session.View) bool {
	d := v.Delivery()
	n, err := pot.Decode(d.Payload())
	if err != nil {
		return p.record("not a pot node: " + err.Error())
	}
	e := string(n.Value())
	if d.Recovered {
		e += "*"
		p.mu.Lock()
		p.sigs = append(p.sigs, d.Signature())
		p.addrs = append(p.addrs, d.Address)
		p.mu.Unlock()
	}
	return p.record(e)
}

func (p *potSession) DeliverWait(_ context.Context, v *session.View) bool { return p.Deliver(v) }

// potFeed is a publisher's feed with the pot profile: update i's payload
// pins ⟨1000+10i, value(i)⟩ over updates 0 … i−1.
type potFeed struct {
	payloads [][]byte
	msgs     []*msg
}

// potUpdates signs n updates of k's feed on sp, the pot over values; a
// value "" is "i".
func potUpdates(t testing.TB, k key, sp *bps.Spec, values []string) *potFeed {
	t.Helper()
	f := &potFeed{}
	var prev []byte
	for i, v := range values {
		if v == "" {
			v = fmt.Sprint(i)
		}
		payload, err := bps.PotNext(prev, uint64(1000+10*i), []byte(v))
		if err != nil {
			t.Fatal(err)
		}
		m, err := feedUpdate(k, sp, uint64(i), payload)
		if err != nil {
			t.Fatal(err)
		}
		f.payloads, f.msgs = append(f.payloads, payload), append(f.msgs, m)
		prev = payload
	}
	return f
}

// store puts update i into st as a persistent publisher uploads it: the
// wrapped chunk by its own address, and, if soc, the SOC.
func (f *potFeed) store(t testing.TB, st *memStorage, sp *bps.Spec, i int, soc bool) {
	t.Helper()
	ch, err := cac.New(f.payloads[i])
	if err != nil {
		t.Fatal(err)
	}
	st.putAt(ch.Address(), ch.Data())
	if soc {
		st.put(sp, f.msgs[i], uint64(i))
	}
}

// potRoom is a FEED_TOPIC room on a mux with storage, and its admin.
func potRoom(t *testing.T, o session.MuxOptions) (*session.Room, key, *bps.Spec, *memStorage) {
	t.Helper()
	rr := newRecoveryRoom(t, o, 0)
	return rr.room, rr.key, rr.sp, rr.st
}

func deliverPot(r *session.Room, k key, f *potFeed, i int) {
	r.Deliver(delivery(f.msgs[i], k.addr, uint64(i), nil))
}

// TestSWIP65Item3PotDescent (SWIP-65 conformance item 3, pot profile): a
// session that verified update 0 and then sees 5 recovers 1…4 by descent
// from update 5's payload — from a storage that holds the updates' wrapped
// chunks and no SOC at all, so no feed lookup and no signature check —
// one retrieval per missed update (the anchor check costs none), in index
// order, before 5; each at its feed update's address, its payload the
// update's, its signature absent (zero).
func TestSWIP65Item3PotDescent(t *testing.T) {
	t.Parallel()
	r, k, sp, st := potRoom(t, session.MuxOptions{})
	f := potUpdates(t, k, sp, make([]string, 8))
	for i := range 8 {
		f.store(t, st, sp, i, false)
	}
	s := newPotSession()
	r.Add(s, session.MemberOptions{}, true)
	deliverPot(r, k, f, 0)
	deliverPot(r, k, f, 5)
	deliverPot(r, k, f, 6)
	wantEvents(t, s.await(t, 8), "0", "recovered 1-4", "1*", "2*", "3*", "4*", "5", "6")
	if n := st.fetched(); n != 4 {
		t.Fatalf("%d retrievals for 4 recovered updates", n)
	}
	for i, sig := range s.sigs {
		if !bytes.Equal(sig, make([]byte, swarm.SocSignatureSize)) {
			t.Fatalf("recovered update %d carries a signature %x", i+1, sig)
		}
		if !bytes.Equal(s.addrs[i].Bytes(), f.msgs[i+1].Address) {
			t.Fatalf("recovered update %d at %s, want its SOC address %x", i+1, s.addrs[i], f.msgs[i+1].Address)
		}
	}
}

// TestSWIP65Item4Equivocation (SWIP-65 conformance item 4): the publisher
// signs a second update 2 and builds its pot on it; a follower that holds
// the first update 2 and sees update 6 finds, by the anchor check, that
// update 6's pot does not reference what it holds: the session is told
// (a protocol error naming the index it holds and the update that revealed
// it), and the missed updates are recovered by feed lookup, each signature
// checked.
func TestSWIP65Item4Equivocation(t *testing.T) {
	t.Parallel()
	r, k, sp, st := potRoom(t, session.MuxOptions{})
	a := potUpdates(t, k, sp, make([]string, 3))
	b := potUpdates(t, k, sp, []string{"", "", "2'", "3'", "4'", "5'", "6'"})
	for i := range 7 {
		b.store(t, st, sp, i, true)
	}
	s := newPotSession()
	r.Add(s, session.MemberOptions{}, true)
	for i := range 3 {
		deliverPot(r, k, a, i)
	}
	deliverPot(r, k, b, 6)
	wantEvents(t, s.await(t, 9), "0", "1", "2", "equivocation 2-6", "recovered 3-5", "3'*", "4'*", "5'*", "6'")
	e := s.equivs[0]
	if !errors.Is(e, pot.ErrAnchor) || !bytes.Equal(e.Owner, k.addr) {
		t.Fatalf("equivocation error %v", e)
	}
	if bytes.Equal(s.sigs[0], make([]byte, swarm.SocSignatureSize)) {
		t.Fatal("updates recovered by feed lookup after an equivocation carry no signature")
	}

	// The same gap on the honest branch passes the check.
	r2, k2, sp2, st2 := potRoom(t, session.MuxOptions{})
	c := potUpdates(t, k2, sp2, make([]string, 7))
	for i := range 7 {
		c.store(t, st2, sp2, i, false)
	}
	s2 := newPotSession()
	r2.Add(s2, session.MemberOptions{}, true)
	for _, i := range []int{0, 1, 2, 6} {
		deliverPot(r2, k2, c, i)
	}
	wantEvents(t, s2.await(t, 8), "0", "1", "2", "recovered 3-5", "3*", "4*", "5*", "6")
}

// TestSWIP65Item4EquivocationLive (SWIP-65 conformance item 4, with no
// gap): an update whose pot does not extend the update just before it —
// the anchor check at a gap of zero, no retrieval — is told to the
// session before it is handed; the feed goes on from it. A feed whose
// updates carry no pot node is not checked.
func TestSWIP65Item4EquivocationLive(t *testing.T) {
	t.Parallel()
	r, k, sp, _ := potRoom(t, session.MuxOptions{})
	a := potUpdates(t, k, sp, make([]string, 3))
	b := potUpdates(t, k, sp, []string{"", "", "2'", "3'", "4'"})
	s := newPotSession()
	r.Add(s, session.MemberOptions{}, true)
	for i := range 3 {
		deliverPot(r, k, a, i)
	}
	deliverPot(r, k, b, 3)
	deliverPot(r, k, b, 4)
	wantEvents(t, s.await(t, 6), "0", "1", "2", "equivocation 2-3", "3'", "4'")
	if !errors.Is(s.equivs[0], pot.ErrAnchor) || !errors.Is(s.equivs[0], bps.ErrNotPotStep) {
		t.Fatalf("equivocation error %v", s.equivs[0])
	}

	plain, pk, psp, _ := potRoom(t, session.MuxOptions{})
	ps := newGapSession()
	plain.Add(&potOn{ps}, session.MemberOptions{}, true)
	for i := range uint64(3) {
		plain.Deliver(delivery(update(t, pk, psp, i, fmt.Sprint(i)), pk.addr, i, nil))
	}
	wantEvents(t, ps.await(t, 3), "0", "1", "2")
}

// potOn is a gapSession that says the pot profile, for a feed without it.
type potOn struct{ *gapSession }

func (potOn) PotProfile() bool { return true }

func (p potOn) Equivocation(_ context.Context, err *session.EquivocationError) bool {
	return p.record("equivocation " + err.Error())
}

// TestPotRecoveryBounds: past RecoverMax the older missed updates are a
// gap, the latest recovered by descent and the anchor sought by key; a
// node storage cannot give stops the descent, and what lies below it is
// recovered by feed lookup, in order.
func TestPotRecoveryBounds(t *testing.T) {
	t.Parallel()
	t.Run("max", func(t *testing.T) {
		t.Parallel()
		r, k, sp, st := potRoom(t, session.MuxOptions{RecoverMax: 3})
		f := potUpdates(t, k, sp, make([]string, 10))
		for i := range 10 {
			f.store(t, st, sp, i, false)
		}
		s := newPotSession()
		r.Add(s, session.MemberOptions{}, true)
		deliverPot(r, k, f, 0)
		deliverPot(r, k, f, 9)
		wantEvents(t, s.await(t, 7), "0", "gap 1-5", "recovered 6-8", "6*", "7*", "8*", "9")
	})
	t.Run("hole", func(t *testing.T) {
		t.Parallel()
		r, k, sp, st := potRoom(t, session.MuxOptions{})
		f := potUpdates(t, k, sp, make([]string, 7))
		for i := range 7 {
			f.store(t, st, sp, i, true)
		}
		ch, _ := cac.New(f.payloads[3])
		st.mu.Lock()
		delete(st.chunks, ch.Address().ByteString()) // update 3's wrapped chunk is lost; its SOC is not
		st.mu.Unlock()
		s := newPotSession()
		r.Add(s, session.MemberOptions{}, true)
		deliverPot(r, k, f, 0)
		deliverPot(r, k, f, 6)
		wantEvents(t, s.await(t, 9), "0", "recovered 1-3", "1*", "2*", "3*", "recovered 4-5", "4*", "5*", "6")
	})
}

// TestPotHistory: a late joiner that asks for the whole history (a
// session resuming each feed at index 0) gets every earlier update from
// storage by descent from the first update it sees, in publication order,
// one retrieval each, before it; no anchor to check.
func TestPotHistory(t *testing.T) {
	t.Parallel()
	r, k, sp, st := potRoom(t, session.MuxOptions{})
	f := potUpdates(t, k, sp, make([]string, 10))
	for i := range 10 {
		f.store(t, st, sp, i, false)
	}
	s := newPotSession()
	zero := uint64(0)
	r.Add(s, session.MemberOptions{From: &zero}, true)
	deliverPot(r, k, f, 9)
	want := []string{"recovered 0-8"}
	for i := range 9 {
		want = append(want, fmt.Sprint(i, "*"))
	}
	wantEvents(t, s.await(t, 11), append(want, "9")...)
	if n := st.fetched(); n != 9 {
		t.Fatalf("%d retrievals for a history of 9", n)
	}
}

// TestPotRecoveryFarIndex: an update signed at an index far past the
// session's (2⁴⁰ after a resume at 0) overflows nothing: the older missed
// updates are one gap, the latest RecoverMax are sought by descent, and
// what the pot does not hold is a gap too.
func TestPotRecoveryFarIndex(t *testing.T) {
	t.Parallel()
	r, k, sp, st := potRoom(t, session.MuxOptions{})
	f := potUpdates(t, k, sp, make([]string, 5))
	for i := range 4 {
		f.store(t, st, sp, i, false)
	}
	const far = uint64(1) << 40
	m, err := feedUpdate(k, sp, far, f.payloads[4])
	if err != nil {
		t.Fatal(err)
	}
	s := newPotSession()
	zero := uint64(0)
	r.Add(s, session.MemberOptions{From: &zero}, true)
	r.Deliver(delivery(m, k.addr, far, nil))
	first := far - session.DefaultRecoverMax
	wantEvents(t, s.await(t, 8),
		fmt.Sprintf("gap 0-%d", first-1), fmt.Sprintf("gap %d-%d", first, far-5),
		fmt.Sprintf("recovered %d-%d", far-4, far-1), "0*", "1*", "2*", "3*", "4")
}
