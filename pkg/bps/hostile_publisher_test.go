// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// challengingParent is a node that answers every Join OK stating depth,
// with a challenge (a publisher stream takes nothing else), then reads what
// it is sent until the joiner ends the stream.
func challengingParent(t *testing.T, net *streamtest.Network, depth uint32) *streamtest.Node {
	t.Helper()
	return ackingParent(t, net, &pb.Ack{Status: pb.Status_OK, Multihop: true, Depth: depth, Challenge: make([]byte, 32)})
}

// publishBelow publishes as k from c at relay, a node at depth 1 (a child
// of the root): through a referring root that names relay as its candidate
// at depth 1, as the root does when it is full — a publisher stream takes a
// parent below the root only through a candidate, as a subscriber does
// (TestHostilePublisherStatedDepth).
func publishBelow(t *testing.T, net *streamtest.Network, c, relay *tnode, sp *bps.Spec, k key) *bps.Publisher {
	t.Helper()
	root := referringRoot(t, net, relay.Overlay(), 1)
	for _, n := range []*streamtest.Node{root, relay.Node} {
		if err := net.Connect(c.Node, n); err != nil {
			t.Fatal(err)
		}
	}
	return publish(t, c, &tnode{Node: root}, sp, k, 0)
}

// TestHostilePublisherStatedDepth: a publisher stream's parent prices every
// publication written up at (depth + 1) × the publish price, from the depth
// its Ack states, so a publisher holds it to what it can check, as a
// subscriber holds its parents (TestHostileNamedBrokerDepth,
// TestHostileCandidateNotAsOffered): the broker the application names is
// reached as the cohort's root and must state 0; a candidate the root
// offers may state no more than the candidate's depth. Before, a publisher
// stream took any depth below the bound (issue 24).
func TestHostilePublisherStatedDepth(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin := newKey(t)
	sp := feedSpec(t, "a publisher's parent's depth", admin)
	publishTo := func(broker *streamtest.Node) (*bps.Publisher, error) {
		x := newNode(t, net, bps.Options{})
		if err := net.Connect(x.Node, broker); err != nil {
			t.Fatal(err)
		}
		p, err := x.svc.Publish(ctxT(t), broker.Overlay(), sp, bps.PublishOptions{Addr: admin.addr, Signer: admin.signer})
		if p != nil {
			t.Cleanup(func() { _ = p.Close() })
		}
		return p, err
	}

	// The named broker, reached directly.
	for _, depth := range []uint32{62, 5, 1} {
		if _, err := publishTo(challengingParent(t, net, depth)); err == nil || !strings.Contains(err.Error(), "reached as the cohort's root") {
			t.Fatalf("a named broker stating depth %d: %v, want refused", depth, err)
		}
	}
	if _, err := publishTo(challengingParent(t, net, 0)); err != nil {
		t.Fatalf("a named broker stating the root's depth 0: %v", err)
	}

	// A candidate the full root names at depth 2: an Ack deeper than that
	// is refused, one at it is taken.
	for _, c := range []struct {
		depth uint32
		ok    bool
	}{{3, false}, {40, false}, {2, true}, {1, true}} {
		relay := challengingParent(t, net, c.depth)
		root := referringRoot(t, net, relay.Overlay(), 2)
		x := newNode(t, net, bps.Options{})
		for _, n := range []*streamtest.Node{root, relay} {
			if err := net.Connect(x.Node, n); err != nil {
				t.Fatal(err)
			}
		}
		p, err := x.svc.Publish(ctxT(t), root.Overlay(), sp, bps.PublishOptions{Addr: admin.addr, Signer: admin.signer})
		if p != nil {
			t.Cleanup(func() { _ = p.Close() })
		}
		switch {
		case c.ok && err != nil:
			t.Fatalf("a candidate offered at 2 stating %d: %v", c.depth, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "below the one its candidate stated")):
			t.Fatalf("a candidate offered at 2 stating %d: %v, want refused", c.depth, err)
		}
	}
}

// TestHostileRevokedCutInClosed: in a closed cohort a publisher the admin
// revoked is told the revoking roster, then must be named again or leave:
// its stream is cut at the claim deadline after the revocation grace
// (counted claim_timeout), while one named again keeps its stream
// (TestHostileRevokedKeepsReceivingClosed: it hears nothing meanwhile).
func TestHostileRevokedCutInClosed(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Timing: bps.Timing{ClaimDeadline: 200 * time.Millisecond, RevocationGrace: 100 * time.Millisecond}}, 3)
	admin, bob, carol := newKey(t), newKey(t), newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("revoked, cut"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
	a := publishOpts(t, cl[0], broker, sp, admin, true)
	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 0, bob, carol))
	broker.rec.wait(t, "the grant", kind(bps.EventAccept))
	b := publishOpts(t, cl[1], broker, sp, bob, true)
	c := publishOpts(t, cl[2], broker, sp, carol, true)
	recvC(t, b.C(), "bob's first delivery")
	recvC(t, c.C(), "carol's first delivery")
	broker.rec.waitN(t, 3, "three claims", kind(bps.EventClaim))

	send(t, a, rosterMsg(t, admin, sp, a.Challenge(), 1, carol))
	if d := recvC(t, b.C(), "bob told his revocation"); !isRoster(d, 1) {
		t.Fatalf("bob got %+v, want the revoking roster", d)
	}
	broker.rec.wait(t, "bob cut at the claim deadline", dropped(bps.CounterClaimTimeout))
	broker.rec.wait(t, "bob's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(cl[1].Overlay())
	})
	if n := broker.rec.count(dropped(bps.CounterClaimTimeout)); n != 1 {
		t.Fatalf("%d streams cut at the claim deadline, want bob's alone", n)
	}
}
