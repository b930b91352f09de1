// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// parentRole is what this node is as a parent in one cohort: the cohort's
// root (rootRole: it brokers the cohort) or a relay fed by one of its
// subscriptions (relay, relay.go). A cohort holds one, chosen when it is
// made, and never asks which: it judges a child's publications by the
// role's authority and hands what passes to it, admits children up to its
// limit and states its depth — as go-libp2p-pubsub's core hands every
// message to its router.
type parentRole interface {
	// authority is who may publish, and from which index, as this node
	// judges it.
	authority() authority
	// publish takes a publication from child stream from that passed the
	// checks against authority: the root accepts it (cursor or window,
	// fan-out), a relay forwards it up its parents once. It reports
	// accepted, or retransmit for one taken before.
	publish(pub publication, msg *pb.Message, from *member) verdict
	// limit is how many counted children the node takes; extraSeats
	// whether a legitimate publisher may still take an extra seat past it
	// (SWIP-74's, the root's only).
	limit(o *Options) int
	extraSeats() bool
	// depth is this node's depth in the cohort; ackDepth the depth it
	// states in the Ack to child stream m.
	depth() uint32
	ackDepth(m *member) uint32
	// vouch is told, under c.mu, a claim verified here or forwarded by a
	// child, for an address that may publish: the root moves the
	// publisher's cursor, a relay forwards the claim rootward (attest.go).
	vouch(claim *pb.Claim)
	// holdsJoins reports whether a Join's probe may hold it while a crowd
	// attaches (probe.go): the root's; a relay answers at once.
	holdsJoins() bool
	// position is the cohort's place at this node as a position of its
	// own (Tree): the root's; false at a relay, whose children are listed
	// under the node's follow of the cohort.
	position(children []swarm.Address, streams int) (Position, bool)
	// forgotten is told, under r.mu and c.mu, that the registry forgets
	// the cohort.
	forgotten()
}

var (
	_ parentRole = rootRole{}
	_ parentRole = (*relay)(nil)
)

// rootRole is the cohort's root at this node: it brokers the cohort, keeps
// the per-publisher cursors and the dedup window, and fans out what it
// accepts.
type rootRole struct{ c *cohort }

func (r rootRole) authority() authority { return cohortAuthority{c: r.c} }

// publish accepts pub at the root (registry.accept) and, for a service
// SOC that ends the stream, ends the cohort.
func (r rootRole) publish(pub publication, msg *pb.Message, from *member) verdict {
	c := r.c
	s := c.r.s
	if !c.r.accept(c, pub, encodeFrame(&pb.Message{Address: msg.Address, Data: msg.Data})) {
		return retransmit // a duplicate, or another publisher stream got there first
	}
	s.metrics.Accepted.Inc()
	s.trace(Event{Kind: EventAccept, Cohort: c.spec.String(), Peer: from.peer, Index: pub.index, Service: pub.service != nil})
	if pub.service != nil && pub.service.Kind == pb.ServiceKind_END_OF_STREAM {
		c.r.end(c)
	}
	return accepted
}

func (r rootRole) limit(o *Options) int  { return o.MaxStreamsPerCohort }
func (rootRole) extraSeats() bool        { return true }
func (rootRole) depth() uint32           { return 0 }
func (rootRole) ackDepth(*member) uint32 { return 0 }
func (rootRole) holdsJoins() bool        { return true }
func (r rootRole) vouch(claim *pb.Claim) { r.c.moveCursor(claim.Addr, claim.Index) }
func (r rootRole) position(children []swarm.Address, streams int) (Position, bool) {
	return Position{Spec: r.c.spec, Parents: []swarm.Address{}, Children: children, Streams: streams}, true
}

// forgotten keeps the root's service feed, so that a cohort made again
// for the same spec takes it back (registry.feeds).
func (r rootRole) forgotten() {
	c := r.c
	if !c.dead && c.svc.Seen() && !c.svc.Ended() {
		c.r.feeds.put(c.spec.key, heldFeed{svc: c.svc.clone(), latest: c.latest})
	}
}

// cohortAuthority is the root's authority view of a cohort: its roster,
// its per-publisher feed cursors and its service cursor, each read under
// c.mu.
type cohortAuthority struct{ c *cohort }

func (a cohortAuthority) isPublisher(owner []byte) bool {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.c.isPublisherLocked(owner)
}

func (a cohortAuthority) feedCursor(owner []byte) uint64 {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.c.cursors[string(owner)]
}

func (a cohortAuthority) serviceNext() uint64 {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.c.svc.Next()
}
