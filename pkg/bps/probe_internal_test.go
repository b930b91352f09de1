// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"testing"

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
