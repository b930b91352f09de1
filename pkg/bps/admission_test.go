// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build rev8todo

package bps_test

import (
	"bytes"
	"testing"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestJamAdmissionOrder: in a closed cohort a rostered performer is admitted
// whatever the order in which its claim and the roster naming it reach the
// broker (issue 8 item 5). The roster travels on the admin's stream and the
// claim on the performer's, so the broker may read either first: a claim
// read first is held and taken when the roster comes; the stream's first
// delivery is then that roster. A claim sent again on a stream already
// upgraded for its address — the client cannot know its earlier claim was
// taken before that delivery — is redundant, not a publication.
func TestJamAdmissionOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		claimFirst   bool // the broker reads bob's claim before the roster
		claimAgain   bool // bob claims again once admitted
		invalidClaim uint64
	}{
		{name: "roster first", claimFirst: false},
		{name: "claim first", claimFirst: true, invalidClaim: 1},
		{name: "claim first, then again once admitted", claimFirst: true, claimAgain: true, invalidClaim: 1},
		{name: "roster first, then claim again", claimAgain: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 2)
			admin, bob := newKey(t), newKey(t)
			sp := specOf(t, &pb.CohortSpec{Topic: topicOf("jam " + tc.name), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
			a := publishOpts(t, cl[0], broker, sp, admin, true)
			rm := rosterMsg(t, admin, sp, 0, bob)
			roster := func() {
				send(t, a, rm)
				broker.rec.wait(t, "roster accepted", kind(bps.EventAccept))
			}
			if !tc.claimFirst {
				roster()
			}

			b := openRaw(t, cl[1], broker)
			challenge := b.join(&pb.Join{Cohort: sp.PB(), Addr: bob.addr}).Challenge
			b.send(claimFor(t, bob, challenge, broker.Overlay(), 0))
			if tc.claimFirst {
				broker.rec.wait(t, "bob's early claim counted", dropped(bps.CounterInvalidClaim))
			} else {
				broker.rec.wait(t, "bob admitted", kind(bps.EventClaim))
			}
			if tc.claimFirst {
				roster()
			}

			// Admitted: the stream's first delivery is the roster naming bob.
			if got := b.recvMessage(); !bytes.Equal(got.Address, rm.Address) || !bytes.Equal(got.Data, rm.Data) {
				t.Fatalf("bob's first delivery %x, want the roster %x", got.Address, rm.Address)
			}
			if tc.claimAgain {
				b.send(claimFor(t, bob, challenge, broker.Overlay(), 0))
			}
			b.send(socMsg(t, bob, make([]byte, 32), "bob plays"))
			if d := recvC(t, a.C(), "alice hears bob"); string(d.Payload()) != "bob plays" {
				t.Fatalf("alice heard %q", d.Payload())
			}
			c := cohortInfo(t, broker, sp)
			for name, n := range c.Counters {
				want := uint64(0)
				if name == "invalid_claim" {
					want = tc.invalidClaim
				}
				if n != want {
					t.Errorf("counter %s = %d, want %d", name, n, want)
				}
			}
			if c.Publishers != 2 {
				t.Errorf("publisher streams %d, want 2", c.Publishers)
			}
		})
	}
}
