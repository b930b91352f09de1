// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"slices"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// place is this node's one state in one cohort, keyed by canonical spec:
// the parent streams it follows the cohort through (subscriptions and
// publisher streams alike), the subscription it relays for, and its broker
// half — its children and what admits, judges and fans out to them — at
// the root (it brokers the cohort) or at a relay. The registry owns every
// place and its mutex guards the fields; a broker half's own mutex guards
// what is inside it (lock order: registry, then cohort).
type place struct {
	spec    *Spec
	parents map[*clientStream]struct{}
	relay   *Subscription // the subscription this node relays the cohort for, nil if none
	broker  *cohort       // children, admission, fan-out; nil while the node has no child
}

// placeLocked is the place of sp, made if there is none; the caller holds
// r.mu.
func (r *registry) placeLocked(sp *Spec) *place {
	p := r.places[sp.key]
	if p == nil {
		p = &place{spec: sp, parents: make(map[*clientStream]struct{})}
		r.places[sp.key] = p
	}
	return p
}

// tidyLocked forgets p once nothing is left of it; the caller holds r.mu.
func (r *registry) tidyLocked(p *place) {
	if len(p.parents) == 0 && p.relay == nil && p.broker == nil && r.places[p.spec.key] == p {
		delete(r.places, p.spec.key)
	}
}

// live is the cohort of sp at this node, root or relay, if it is live.
func (r *registry) live(sp *Spec) *cohort {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.places[sp.key]
	if p == nil || p.broker == nil || p.broker.dead {
		return nil
	}
	return p.broker
}

// follows reports whether this node follows the cohort of key through a
// parent; the caller holds r.mu.
func (p *place) follows() bool { return p != nil && len(p.parents) > 0 }

// feeder is the subscription a broker half made now would relay: the one
// this node relays the cohort for, where it follows the cohort; nil where
// the node would be its root. The caller holds r.mu.
func (p *place) feeder() *Subscription {
	if !p.follows() {
		return nil
	}
	return p.relay
}

// addParent records cs as a parent of this node in its cohort.
func (r *registry) addParent(cs *clientStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.placeLocked(cs.spec).parents[cs] = struct{}{}
}

// removeParent forgets cs.
func (r *registry) removeParent(cs *clientStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.places[cs.spec.key]; p != nil {
		delete(p.parents, cs)
		r.tidyLocked(p)
	}
}

// closeParents resets every stream to a parent.
func (r *registry) closeParents() {
	r.mu.Lock()
	var all []*clientStream
	for _, p := range r.places {
		for cs := range p.parents {
			all = append(all, cs)
		}
	}
	r.mu.Unlock()
	for _, cs := range all {
		cs.abort()
	}
}

// positions describes every place: the cohorts this node brokers (roots),
// then those it follows, each ordered by canonical spec, with the
// subscription each follow relays through (nil if none).
func (r *registry) positions() (roots, follows []Position, relays []*Subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.places))
	for k := range r.places {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return bytes.Compare(r.places[a].spec.canonical, r.places[b].spec.canonical)
	})
	roots = make([]Position, 0)
	for _, k := range keys {
		p := r.places[k]
		var children []swarm.Address
		streams := 0
		if c := p.broker; c != nil {
			c.mu.Lock()
			children, streams = c.childPeers(), len(c.children)
			c.mu.Unlock()
			if pos, own := c.role.position(children, streams); own {
				roots = append(roots, pos)
				children, streams = nil, 0
			}
		}
		if !p.follows() {
			continue
		}
		if children == nil {
			children = []swarm.Address{}
		}
		follows = append(follows, Position{Spec: p.spec, Depth: p.depth(), Parents: p.parentPeers(), Children: children, Streams: streams})
		relays = append(relays, p.relay)
	}
	return roots, follows, relays
}

// depth is the node's depth in the cohort: one below its shallowest
// parent's stated depth (the depth each parent's Ack stated, SWIP-61 and
// docs/protocol.md "Depth"; a SWIP-74 or SWIP-60 broker states none, which reads
// as 0).
// It is stated for pricing and inspection only: no routing decision trusts
// it.
func (p *place) depth() uint32 {
	return belowShallowest(func(yield func(uint32) bool) {
		for cs := range p.parents {
			if !yield(cs.stated) {
				return
			}
		}
	})
}

// parentPeers lists the overlays of the parents, each once, sorted.
func (p *place) parentPeers() []swarm.Address {
	return peersOf(p.parents, func(cs *clientStream) swarm.Address { return cs.peer })
}

// childPeers lists the overlays of the peers whose streams are children
// here, each once, sorted; the caller holds c.mu.
func (c *cohort) childPeers() []swarm.Address {
	return peersOf(c.children, func(m *member) swarm.Address { return m.peer })
}
