// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// An overlay buys nothing in the choice of candidates: among candidates at
// one depth, the one with the smallest overlay (which a sybil mines, or
// names for a colluder) is taken no more often than the others, while a
// shallower candidate always wins over a deeper one, and one child's
// subtree gives at most one of the two. Failed before: the smallest
// overlay won every time.
func TestHostileCandidateOverlayBuysNothing(t *testing.T) {
	t.Parallel()
	ov := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	a, b, c, d := &member{}, &member{}, &member{}, &member{}
	all := []found{
		{from: a, c: &pb.Candidate{Overlay: ov(0x01), Depth: 2}}, // the smallest overlay, and a colluder's
		{from: a, c: &pb.Candidate{Overlay: ov(0x02), Depth: 2}},
		{from: b, c: &pb.Candidate{Overlay: ov(0x80), Depth: 2}},
		{from: c, c: &pb.Candidate{Overlay: ov(0x90), Depth: 2}},
		{from: d, c: &pb.Candidate{Overlay: ov(0x00), Depth: 3}}, // deeper: never
	}
	const trials = 600
	var smallest int
	for range trials {
		best := bestCandidates(all, swarm.ZeroAddress)
		if len(best) != 2 {
			t.Fatalf("%d candidates", len(best))
		}
		fromA := 0
		for _, cand := range best {
			switch cand.Overlay[0] {
			case 0x00:
				t.Fatal("a deeper candidate was taken over shallower ones")
			case 0x01:
				smallest++
				fromA++
			case 0x02:
				fromA++
			}
		}
		if fromA > 1 {
			t.Fatal("two candidates from one child's subtree")
		}
	}
	// Three subtrees at one depth, two taken: each subtree's candidate is
	// taken in 2/3 of the trials, the smallest overlay (one of two from its
	// subtree) in 1/3.
	if smallest > trials/2 {
		t.Fatalf("the smallest overlay was taken in %d of %d trials", smallest, trials)
	}
}

// A leaf that offered a slot keeps the rank its candidate stated while the
// offer is held: a deeper second parent taken meanwhile would make its Ack
// to the joiner deeper than the candidate, which the joiner refuses
// (errNotAsOffered; TestMultihopFlashCrowd saw it once in 43 runs). Failed
// before: a leaf took any parent whatever it had offered.
func TestOfferedRankIsKept(t *testing.T) {
	t.Parallel()
	self := swarm.NewAddress(bytes.Repeat([]byte{0x80}, 32))
	sub := &Subscription{rank: 2}
	sub.s = &Service{overlay: self}
	deeper := swarm.NewAddress(bytes.Repeat([]byte{0x10}, 32))
	if !sub.mayAttachUnder(2, deeper) {
		t.Fatal("a leaf that offered nothing refused a parent at its own depth")
	}
	now := time.Now()
	if !sub.offers.take(now, now.Add(time.Hour), swarm.NewAddress(bytes.Repeat([]byte{0x42}, 32)), 1, 0) {
		t.Fatal("no slot offered")
	}
	if sub.mayAttachUnder(2, swarm.NewAddress(bytes.Repeat([]byte{0x90}, 32))) {
		t.Fatal("while its offer is held a leaf took a parent that would move its rank below its candidate")
	}
	if !sub.mayAttachUnder(1, deeper) {
		t.Fatal("while its offer is held a leaf refused a parent above its rank")
	}
	sub.offers.held[0].until = now.Add(-time.Second)
	if !sub.mayAttachUnder(2, swarm.NewAddress(bytes.Repeat([]byte{0x90}, 32))) {
		t.Fatal("after its offer expired a leaf still kept its rank")
	}
}
