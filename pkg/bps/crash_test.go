// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"slices"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
)

// cycle returns the nodes on a cycle of the parent relation among the live
// nodes, nil if there is none: nodes on a cycle keep each other attached
// and, once no path from the broker is left, receive nothing and repair
// nothing.
func (mt *mtree) cycle(dead ...*tnode) []swarm.Address {
	mt.t.Helper()
	parents := make(map[string][]swarm.Address)
	for _, nd := range mt.nodes {
		if !slices.Contains(dead, nd) {
			parents[nd.Overlay().ByteString()] = mt.position(nd).Parents
		}
	}
	const (
		open = iota + 1
		closed
	)
	state := make(map[string]int)
	var path []swarm.Address
	var visit func(a swarm.Address) []swarm.Address
	visit = func(a swarm.Address) []swarm.Address {
		switch state[a.ByteString()] {
		case open:
			i := slices.IndexFunc(path, a.Equal)
			return append(slices.Clone(path[i:]), a)
		case closed:
			return nil
		}
		state[a.ByteString()] = open
		path = append(path, a)
		for _, p := range parents[a.ByteString()] {
			if c := visit(p); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[a.ByteString()] = closed
		return nil
	}
	for _, nd := range mt.nodes {
		if c := visit(nd.Overlay()); c != nil {
			return c
		}
	}
	return nil
}

// TestMultihopRelayFailuresKeepTheTreeAcyclic is SWIP-61 item 6 repeated:
// relays fail one after another in a tree of capacity 2 (the broker's
// too), each orphan repairing at its surviving parent. A repair must never
// attach a relay under its own descendant — a node reached through its
// other parent, whose path from the broker a repair has just shortened —
// or the two feed each other alone once the next failure cuts the last
// path in. After each failure, no cycle, and every live node receives
// every update.
func TestMultihopRelayFailuresKeepTheTreeAcyclic(t *testing.T) {
	t.Parallel()
	mt := newMTree(t, 10, 2, 2, func(a key) *bps.Spec { return feedSpec(t, "multihop-acyclic", a) })
	mt.subscribeAll()
	p := mt.adminPublisher()
	next := uint64(0)
	var dead []*tnode
	say := func() {
		t.Helper()
		mt.publishN(p, next, next+5)
		for i, sub := range mt.subs {
			if !slices.Contains(dead, mt.nodes[i]) {
				expectUpdates(t, sub, next, next+5)
			}
		}
		next += 5
	}
	say()
	for round := range 4 {
		// A relay below depth 1 with children, alive: its children have a
		// second parent each and repair at it.
		var relay *tnode
		for _, nd := range mt.nodes {
			if slices.Contains(dead, nd) {
				continue
			}
			if pos := mt.position(nd); pos.Depth > 1 && len(pos.Children) > 0 && len(pos.Parents) > 0 {
				relay = nd
				break
			}
		}
		if relay == nil {
			break
		}
		var kids []*tnode
		before := make(map[*tnode]int)
		for _, nd := range mt.nodes {
			if !slices.Contains(dead, nd) && slices.ContainsFunc(mt.position(nd).Parents, relay.Overlay().Equal) {
				kids = append(kids, nd)
				before[nd] = nd.rec.count(parentOK)
			}
		}
		dead = append(dead, relay)
		mt.net.Remove(relay.Node)
		say()
		// Let the orphans' repairs run their course: each attaches a new
		// parent, or finds none in the time it is given (a tree of
		// capacity 2 may have no room outside an orphan's own subtree).
		deadline := time.Now().Add(3 * time.Second)
		for _, k := range kids {
			k.rec.within(time.Until(deadline), before[k]+1, parentOK)
		}
		if c := mt.cycle(dead...); c != nil {
			t.Fatalf("round %d: the parents form a cycle: %v", round, c)
		}
		say()
	}
	if len(dead) < 2 {
		t.Fatalf("only %d relays failed: the tree is too shallow", len(dead))
	}
}

// within waits, at most d, until n events match; it reports whether they
// did.
func (r *recorder) within(d time.Duration, n int, match func(bps.Event) bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		r.mu.Lock()
		c := 0
		for _, e := range r.events {
			if match(e) {
				c++
			}
		}
		ch := r.notify
		r.mu.Unlock()
		if c >= n {
			return true
		}
		select {
		case <-ch:
		case <-t.C:
			return false
		}
	}
}
