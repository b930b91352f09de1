// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"testing"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// TestJamAdmissionOrder: in a closed cohort a rostered performer is admitted
// whatever the order in which its Join and the roster naming it reach the
// broker (issue 8 item 5). On the Rev 8 wire (docs/protocol.md "Streams
// and their roles", "Service feeds"): joining after the roster, the stream
// is pending and its first delivery is that roster, at once; joining
// before it, the stream is silent and the roster, when it comes, is its
// first delivery and its cue. Either way its first valid frame (an AUTH)
// claims it. A frame from the silent stream before the roster named it is
// a violation (rev 14: "any frame from another addr a violation until a
// roster names it"; rev 3 held such a claim instead). An AUTH sent again
// on the stream once admitted is activity, not a publication.
func TestJamAdmissionOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		joinFirst   bool // the broker takes bob's Join before the roster
		claimAgain  bool // bob sends its AUTH again once admitted
		frameEarly  bool // bob sends a frame before the roster names it
		wrongStream uint64
	}{
		{name: "roster first"},
		{name: "join first", joinFirst: true},
		{name: "join first, then AUTH again once admitted", joinFirst: true, claimAgain: true},
		{name: "roster first, then AUTH again", claimAgain: true},
		{name: "join first, a frame before the roster", joinFirst: true, frameEarly: true, wrongStream: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 2)
			admin, bob := newKey(t), newKey(t)
			sp := specOf(t, &pb.CohortSpec{Topic: topicOf("jam " + tc.name), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
			a := publishOpts(t, cl[0], broker, sp, admin, true)
			broker.rec.wait(t, "the admin's claim", kind(bps.EventClaim))
			rm := rosterMsg(t, admin, sp, a.Challenge(), 0, bob)
			roster := func() {
				send(t, a, rm)
				broker.rec.wait(t, "roster accepted", kind(bps.EventAccept))
			}
			if !tc.joinFirst {
				roster()
			}

			b := openRaw(t, cl[1], broker)
			challenge := b.join(&pb.Join{Cohort: sp.PB(), Addr: bob.addr}).Challenge
			if tc.frameEarly {
				b.send(auth(t, bob, sp, challenge))
				expectReset(t, b)
				waitBlocklisted(t, broker, cl[1])
				if got := cohortInfo(t, broker, sp).Counters["wrong_stream"]; got != tc.wrongStream {
					t.Fatalf("wrong_stream = %d, want %d", got, tc.wrongStream)
				}
				if n := broker.rec.count(kind(bps.EventClaim)); n != 1 {
					t.Fatalf("%d claims, want the admin's alone", n)
				}
				return
			}
			if tc.joinFirst {
				broker.rec.wait(t, "bob's Join", func(e bps.Event) bool {
					return e.Kind == bps.EventJoin && e.Status == "OK" && e.Peer.Equal(cl[1].Overlay())
				})
				roster()
			}

			// Named: the stream's first delivery is the roster, before
			// its claim.
			if got := b.recvMessage(); !proto.Equal(got, rm) {
				t.Fatalf("bob's first delivery is kind %s index %d, want the roster", got.Kind, got.Index)
			}
			b.send(auth(t, bob, sp, challenge))
			broker.rec.waitN(t, 2, "bob admitted", kind(bps.EventClaim))
			if tc.claimAgain {
				b.send(auth(t, bob, sp, challenge))
			}
			b.send(update(t, bob, sp, challenge, 0, "bob plays"))
			if d := recvC(t, a.C(), "alice hears bob"); string(d.Payload()) != "bob plays" || d.Kind != pb.Kind_DATA {
				t.Fatalf("alice heard %s %q", d.Kind, d.Payload())
			}
			c := cohortInfo(t, broker, sp)
			for name, n := range c.Counters {
				if n != 0 {
					t.Errorf("counter %s = %d, want 0", name, n)
				}
			}
			if c.Publishers != 2 || c.Accepted != 2 {
				t.Errorf("publisher streams %d accepted %d, want 2 and 2 (the roster, bob's update)", c.Publishers, c.Accepted)
			}
		})
	}
}
