// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// A relay (SWIP-61) is a node that follows a cohort through parents and
// has children in it: a Subscription (the client half: parents,
// verification) and a cohort of the registry whose up is that subscription
// (the broker half: children, bounds, fan-out). Accepting the first child
// is what makes a subscriber a relay; the cohort is forgotten when its last
// child leaves, and the subscription stays.
//
// Down, every delivery the subscription takes — verified end to end,
// deduplicated across its parents — is fanned out to the children exactly
// as a broker fans out what it accepts. Up, a publication a child sends is
// checked statelessly (signature, binding, authorship against the roster
// this node holds) and forwarded up every parent; the root alone dedups
// (SWIP-61 item 11).

// addRelay registers sub as the subscription this node relays cohort
// sub.spec for; the first registered wins.
func (r *registry) addRelay(sub *Subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if p := r.placeLocked(sub.spec); p.relay == nil {
		p.relay = sub
	}
}

// dropRelay forgets sub as a relay; its children lose a parent (they
// repair through their other one).
func (r *registry) dropRelay(sub *Subscription) {
	r.mu.Lock()
	var c *cohort
	if p := r.places[sub.spec.key]; p != nil {
		c = p.broker
		if p.relay == sub {
			p.relay = nil
			r.tidyLocked(p)
		}
	}
	r.mu.Unlock()
	if c == nil || c.up != sub {
		return
	}
	c.mu.Lock()
	children := make([]*member, 0, len(c.children))
	for m := range c.children {
		children = append(children, m)
	}
	c.mu.Unlock()
	for _, m := range children {
		m.kill(errRelayGone)
	}
}

// relayDeliver fans a delivery the relay's subscription took out to the
// relay's children: a service SOC moves the relay's service cursor, roster
// and latest SOC first, as at the broker.
func (r *registry) relayDeliver(c *cohort, pub publication, msg *pb.Message) {
	frame := encodeFrame(&pb.Message{Address: msg.Address, Data: msg.Data})
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.svc.Ended() {
		return
	}
	var svc uint64
	if pub.service != nil {
		var ok bool
		if svc, ok = r.serviceLocked(c, pub, frame); !ok {
			return
		}
	}
	r.deliverLocked(c, pub, frame, svc)
}

// relayAuthority is a relay's view of who may publish: the roster it holds
// (explicit authorship). It holds no cursors: a relay never dedups
// (SWIP-61 item 11), so every index passes here and the root judges.
type relayAuthority struct{ c *cohort }

func (a relayAuthority) isPublisher(owner []byte) bool {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.c.isPublisherLocked(owner)
}

func (relayAuthority) feedCursor([]byte) uint64 { return 0 }
func (relayAuthority) serviceNext() uint64      { return 0 }

// reparentAll sends every child of the relay cohort c that speaks the
// envelope a Reparent toward to — one of this node's own parents (SWIP-61,
// graceful leave), with its underlays if this node learned them — and waits, at most wait, for them to leave; the
// children that do not are left to the caller's close.
func (r *registry) reparentAll(c *cohort, to swarm.Address, underlays [][]byte, wait time.Duration) {
	rp := &pb.Reparent{To: to.Bytes(), Underlays: underlays[:min(len(underlays), maxUnderlays)]}
	frame := encodeFrame(rp)
	c.mu.Lock()
	if c.dead || c.svc.Ended() {
		c.mu.Unlock()
		return
	}
	if c.gone == nil {
		c.gone = make(chan struct{})
	}
	gone := c.gone
	sent := 0
	for m := range c.children {
		if m.codec == codecEnvelope && m.offer(outFrame{b: frame, kind: kindReparent}) {
			sent++
		}
	}
	c.mu.Unlock()
	if sent == 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-gone:
	case <-t.C:
	case <-r.s.ctx.Done():
	}
}

// setRelay points the subscription at its relay cohort.
func (sub *Subscription) setRelay(c *cohort) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.relay = c
}

// clearRelay forgets the relay cohort c once it is forgotten.
func (sub *Subscription) clearRelay(c *cohort) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.relay == c {
		sub.relay = nil
	}
}

// serviceFeed is the latest service SOC the subscription took, encoded
// (nil if none), and a copy of its service feed.
func (rc *receiver) serviceFeed() ([]byte, ServiceFeed) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.latest, rc.svc.clone()
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

// nodeDepth is this node's depth in c's cohort: 0 at the root, the relay
// subscription's depth at a relay.
func (c *cohort) nodeDepth() uint32 {
	if c.up != nil {
		return c.up.depth()
	}
	return 0
}

// relayOf is the subscription this node follows the cohort of key through,
// the one it relays for; nil if none.
func (r *registry) relayOf(key string) *Subscription {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.places[key]; p != nil {
		return p.relay
	}
	return nil
}

// describe fills in what the subscription knows of its place: its parents'
// lag, its probe, reparent and withholding counts.
func (sub *Subscription) describe(p *Position) {
	sub.mu.Lock()
	lag := make(map[string]int, len(sub.parents))
	for _, q := range sub.parents {
		lag[q.cs.peer.ByteString()] = q.missed
	}
	sub.mu.Unlock()
	p.Lag = make([]int, len(p.Parents))
	for i, a := range p.Parents {
		p.Lag[i] = lag[a.ByteString()]
	}
	p.Probes, p.Reparents, p.Withheld = sub.probes.Load(), sub.reparents.Load(), sub.withheld.Load()
}
