// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"iter"
	"math"
	"slices"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// belowShallowest is one below the shallowest of the depths parents
// stated; a parent stating the largest depth leaves the node there rather
// than wrapping to 0 (so does none at all).
func belowShallowest(stated iter.Seq[uint32]) uint32 {
	shallowest := uint32(math.MaxUint32)
	for d := range stated {
		shallowest = min(shallowest, d)
	}
	if shallowest == math.MaxUint32 {
		return shallowest
	}
	return shallowest + 1
}

// belowDeepest is one below the deepest of the depths parents stated: a
// node's rank, larger than what each parent stated to it — and so, by
// induction, every descendant of a child ranks above what the node stated
// to that child (Subscription.mayAttachUnder keeps a node from attaching
// under one of them). A parent stating the largest depth leaves the node
// there rather than wrapping to 0 (so does none at all).
func belowDeepest(stated iter.Seq[uint32]) uint32 {
	deepest, any := uint32(0), false
	for d := range stated {
		deepest, any = max(deepest, d), true
	}
	if !any || deepest >= math.MaxUint32-1 {
		return math.MaxUint32
	}
	return deepest + 1
}

// peersOf lists the peers of a set of streams, each once, sorted.
func peersOf[S comparable](streams map[S]struct{}, peer func(S) swarm.Address) []swarm.Address {
	out := make([]swarm.Address, 0, len(streams))
	for st := range streams {
		out = append(out, peer(st))
	}
	slices.SortFunc(out, func(a, b swarm.Address) int { return a.Compare(b) })
	return slices.CompactFunc(out, swarm.Address.Equal)
}

// Position is this node's place in one cohort's tree.
type Position struct {
	Spec     *Spec
	Depth    uint32          // 0 at the root (a broker); one below its parents otherwise
	Parents  []swarm.Address // the nodes this one receives the cohort from, each once
	Children []swarm.Address // the nodes this one fans the cohort out to, each once
	Streams  int             // child streams (a node may hold several: one per identity)
	// Lag is, per parent in Parents' order, how many deliveries it missed
	// that its sister gave, in the current lag epoch (SWIP-61 withholding).
	Lag []int
	// Probes counts the probes this node answered for the cohort,
	// Reparents the moves it made on a parent's Reparent, Withheld the
	// parents it dropped for lagging.
	Probes, Reparents, Withheld uint64
}

// Tree describes this node's place in every cohort it takes part in: the
// cohorts it brokers (the root: children, no parent), then the cohorts it
// follows (parents, and its children where it relays), each ordered by
// canonical spec. A node that brokers a cohort and also follows it at
// another broker has a position for each: they are not joined.
func (s *Service) Tree() []Position {
	roots, follows, relays := s.reg.positions()
	// The subscription a node relays through says how its parents lag and
	// what it probed and moved.
	for i := range follows {
		if sub := relays[i]; sub != nil {
			sub.describe(&follows[i])
		}
	}
	return append(roots, follows...)
}

// CohortPeers returns the overlays of the peers whose streams are attached
// to the cohort of sp at this broker — its children — each once, sorted;
// nil if this node brokers no such cohort. The node's topic list names them
// (bee-js reads a topic's connections as its peers).
func (s *Service) CohortPeers(sp *Spec) []swarm.Address {
	c := s.reg.live(sp)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.childPeers()
}
