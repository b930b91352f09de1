// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"iter"
	"math"
	"slices"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// links is a node's place in one cohort's multicast tree (SWIP-61): the
// streams it receives the cohort from and publishes up (its parents), the
// streams it fans the cohort out to (its children), and so its depth. Its
// owner's lock guards it: a cohort's mutex for the cohorts this node
// brokers, the tree's for the cohorts it follows.
//
// Today a broker is the root of each cohort it brokers — its members are
// its children, it has no parent — and a node that subscribes or publishes
// has the broker it joined as its one parent per stream.
type links struct {
	parents  map[*clientStream]struct{}
	children map[*member]struct{}
}

func newLinks() links {
	return links{parents: make(map[*clientStream]struct{}), children: make(map[*member]struct{})}
}

// depth is the node's depth in the cohort: 0 at the root, which has no
// parent; one below its shallowest parent's stated depth otherwise (the
// depth each parent's Ack stated, SWIP-61 and DESIGN §1.5; a SWIP-74 or
// SWIP-60 broker states none, which reads as 0). It is stated for pricing
// and inspection only: no routing decision trusts it. A parent that states
// the largest depth leaves the node there rather than wrapping to 0.
func (l *links) depth() uint32 {
	if len(l.parents) == 0 {
		return 0
	}
	return belowShallowest(func(yield func(uint32) bool) {
		for cs := range l.parents {
			if !yield(cs.stated) {
				return
			}
		}
	})
}

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

// childPeers lists the overlays of the peers whose streams are children
// here, each once, sorted.
func (l *links) childPeers() []swarm.Address {
	return peersOf(l.children, func(m *member) swarm.Address { return m.peer })
}

// parentPeers lists the overlays of the parents, each once, sorted.
func (l *links) parentPeers() []swarm.Address {
	return peersOf(l.parents, func(cs *clientStream) swarm.Address { return cs.peer })
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

// position describes l for spec.
func (l *links) position(sp *Spec) Position {
	return Position{Spec: sp, Depth: l.depth(), Parents: l.parentPeers(), Children: l.childPeers(), Streams: len(l.children)}
}

// tree holds the links of the cohorts this node follows through streams it
// opened to parents (subscriptions, publisher streams), by cohort; the
// Service closes every such stream through it on shutdown. The cohorts this
// node brokers keep their links themselves (registry).
type tree struct {
	mu      sync.Mutex
	follows map[string]*followed // by the spec's canonical key
}

// followed is one cohort this node follows.
type followed struct {
	spec *Spec
	links
}

func newTree() *tree { return &tree{follows: make(map[string]*followed)} }

// addParent records cs as a parent of this node in its cohort.
func (t *tree) addParent(cs *clientStream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.follows[cs.spec.key]
	if f == nil {
		f = &followed{spec: cs.spec, links: newLinks()}
		t.follows[cs.spec.key] = f
	}
	f.parents[cs] = struct{}{}
}

// removeParent forgets cs; a cohort left with no link is forgotten.
func (t *tree) removeParent(cs *clientStream) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.follows[cs.spec.key]
	if f == nil {
		return
	}
	delete(f.parents, cs)
	if len(f.parents) == 0 && len(f.children) == 0 {
		delete(t.follows, cs.spec.key)
	}
}

// has reports whether this node follows the cohort of key.
func (t *tree) has(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.follows[key] != nil
}

// closeAll resets every stream to a parent.
func (t *tree) closeAll() {
	t.mu.Lock()
	var all []*clientStream
	for _, f := range t.follows {
		for cs := range f.parents {
			all = append(all, cs)
		}
	}
	t.mu.Unlock()
	for _, cs := range all {
		cs.abort()
	}
}

// positions describes every cohort this node follows.
func (t *tree) positions() []Position {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Position, 0, len(t.follows))
	for _, f := range t.follows {
		out = append(out, f.position(f.spec))
	}
	return out
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
// canonical spec. A node that brokers a
// cohort and also follows it at another broker has a position for each:
// they are not joined.
func (s *Service) Tree() []Position {
	roots := make([]Position, 0)
	relays := make(map[string]Position)
	s.reg.each(func(c *cohort) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.up != nil {
			relays[c.spec.key] = c.position(c.spec)
			return
		}
		roots = append(roots, c.position(c.spec))
	})
	follows := s.tree.positions()
	// A relay's children join its position as a follower (SWIP-61), and
	// the subscription says how its parents lag and what it probed and
	// moved.
	for i, p := range follows {
		if r, ok := relays[p.Spec.key]; ok {
			follows[i].Children, follows[i].Streams = r.Children, r.Streams
		}
		if sub := s.reg.relayOf(p.Spec.key); sub != nil {
			sub.describe(&follows[i])
		}
	}
	byCanonical := func(a, b Position) int { return bytes.Compare(a.Spec.canonical, b.Spec.canonical) }
	slices.SortFunc(roots, byCanonical)
	slices.SortFunc(follows, byCanonical)
	return append(roots, follows...)
}

// CohortPeers returns the overlays of the peers whose streams are attached
// to the cohort of sp at this broker — its children — each once, sorted;
// nil if this node brokers no such cohort. The node's topic list names them
// (bee-js reads a topic's connections as its peers).
func (s *Service) CohortPeers(sp *Spec) []swarm.Address {
	r := s.reg
	r.mu.Lock()
	c := r.cohorts[sp.key]
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.childPeers()
}
