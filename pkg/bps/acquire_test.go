// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestUnusableCandidatesAskedOnce: a node asking a full root for its
// second parent is named only its own parent (a raw child of the root
// answers every probe with it, as a node whose second parent is the
// joiner's parent would in a narrow tree). Nothing was lost to a race, so
// the node does not ask the root again within the same request
// (maxJoinRounds is for lost races): each Join counts at the root as the
// peer's (ration.go), and a node asking three times a request became a
// hunter there within a minute — its rejoin after a crash answered from
// the pool only, 10 s without a parent in the short soak. Failed before
// the fix: three root Joins a request.
func TestUnusableCandidatesAskedOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		net := newNetwork(t)
		sp := feedSpec(t, "unusable-candidates", newKey(t))
		broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2, PeerProbeRounds: 10000, PrefixProbeRounds: 10000}, Tree: bps.Tree{ProbeWait: time.Second}})
		relay := newNode(t, net, relayOptions(1))
		o := relayOptions(1)
		o.BackoffMin, o.BackoffMax = 100*time.Millisecond, 100*time.Millisecond
		joiner := newNode(t, net, o)
		kid := newNode(t, net, bps.Options{})
		for _, n := range []*tnode{relay, joiner, kid} {
			if err := net.Connect(n.Node, broker.Node); err != nil {
				t.Fatal(err)
			}
		}
		if err := net.Connect(joiner.Node, relay.Node); err != nil {
			t.Fatal(err)
		}
		// The raw child takes the root's other slot and names the relay
		// to every probe.
		child := openRaw(t, kid, broker)
		if a := child.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true}); a.Status != pb.Status_OK {
			t.Fatalf("raw child: %v", a.Status)
		}
		go child.answerProbes(func(pr *pb.Probe) []*pb.Candidate {
			return []*pb.Candidate{{Overlay: relay.Overlay().Bytes(), Depth: pr.Depth}}
		})
		subscribe(t, relay, broker, sp)
		sub := subscribe(t, joiner, broker, sp)
		if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(relay.Overlay()) {
			t.Fatalf("parents %v, want the relay alone", ps)
		}
		// The relay (capacity 1) is full, the root too: every request for a
		// second parent is answered FULL at the relay and FULL naming the
		// relay at the root.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		from := func(peer swarm.Address) func(bps.Event) bool {
			return func(e bps.Event) bool { return e.Kind == bps.EventJoin && e.Peer.Equal(peer) }
		}
		atRoot := broker.rec.count(from(joiner.Overlay())) - 1  // the Subscribe's own
		requests := relay.rec.count(from(joiner.Overlay())) - 1 // the attach
		if requests < 2 {
			t.Fatalf("%d requests for a second parent in 2 s, want several", requests)
		}
		if atRoot > requests {
			t.Fatalf("%d requests for a second parent made %d Joins at the root, want one each", requests, atRoot)
		}
		if ps := sub.Parents(); len(ps) != 1 {
			t.Fatalf("parents %v, want the relay alone", ps)
		}
	})
}
