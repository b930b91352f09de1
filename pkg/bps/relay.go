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
// verification) and a cohort of the registry whose role is a relay fed by
// that subscription (the broker half: children, bounds, fan-out).
// Accepting the first child is what makes a subscriber a relay; the cohort
// is forgotten when its last child leaves, and the subscription stays.
//
// Down, every delivery the subscription takes — verified end to end,
// deduplicated across its parents — is fanned out to the children exactly
// as a broker fans out what it accepts (deliver). Up, a publication a
// child sends is checked statelessly (signature, binding, authorship
// against the roster this node holds) and forwarded up every parent, each
// frame once within a window so that no loop carries it up for ever
// (publish); the root alone judges it by the cohort's cursors and dedup
// window (SWIP-61 item 11). Publishers below are known by the challenges
// the root leased for them (lease.go).

var _ parentRole = (*relay)(nil)

// relay is this node's position in a cohort it relays: the cohort of its
// children and the subscription that feeds it. It is made with the cohort
// (newRelay) and is the one relation between the two: the cohort's role,
// and the subscription's relay until the cohort is forgotten.
type relay struct {
	c    *cohort
	sub  *Subscription
	sent *Window // frames forwarded rootward (FrameKey), each once; under c.mu
}

// newRelay makes c, a cohort being made under r.mu and c.mu, the relay
// fed by sub: it takes the subscription's view of the cohort — the latest
// service SOC (every child's first delivery) and the service feed. The
// subscription points at the cohort first, so that a service SOC it takes
// meanwhile is either seen here or fanned out to this cohort.
func newRelay(c *cohort, sub *Subscription) *relay {
	rl := &relay{c: c, sub: sub, sent: NewWindow(c.r.s.opts.DedupWindow)}
	sub.swapRelay(nil, c)
	c.latest, c.svc = sub.serviceFeed()
	return rl
}

// authority is a relay's view of who may publish: the roster it holds.
func (rl *relay) authority() authority { return relayAuthority{c: rl.c} }

// publish forwards a publication that passed the checks up every parent
// that speaks the envelope, once within the window; a frame forwarded
// before is a retransmit. An AUTH goes up too: it is activity at the root.
func (rl *relay) publish(pub publication, b *pb.Broadcast, from *member) verdict {
	c := rl.c
	s := c.r.s
	k := FrameKey(b)
	c.mu.Lock()
	fresh := rl.sent.Add(k)
	c.mu.Unlock()
	if !fresh {
		return retransmit
	}
	if rl.sub.sendUp(outFrame{b: encodeFrame(b), kind: kindBroadcast}) > 0 {
		s.metrics.Forwarded.Inc()
		s.trace(Event{Kind: EventForward, Cohort: c.spec.String(), Peer: from.peer, Index: pub.index})
	}
	return accepted
}

func (rl *relay) limit(o *Options) int      { return o.RelayCapacity }
func (*relay) extraSeats() bool             { return false }
func (rl *relay) depth() uint32             { return rl.sub.depth() }
func (rl *relay) ackDepth(m *member) uint32 { return rl.sub.ackDepth(m) }
func (*relay) holdsJoins() bool             { return false }
func (*relay) position([]swarm.Address, int) (Position, bool) {
	return Position{}, false
}

// forgotten unbinds the subscription from the cohort.
func (rl *relay) forgotten() { rl.sub.swapRelay(rl.c, nil) }

// deliver fans a delivery the relay's subscription took at now out to
// the relay's children: a ROSTER moves the relay's roster cursor,
// roster and latest frame first, as at the root; any other is kept for a
// replay (replay.go) under the same lock as a child's attach, so that a
// child is either replayed it or sent it, never both.
func (rl *relay) deliver(pub publication, b *pb.Broadcast, now time.Time) {
	c := rl.c
	frame := encodeFrame(b)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.svc.Ended() {
		return
	}
	var svc uint64
	if pub.service != nil {
		var ok bool
		if svc, ok = c.r.serviceLocked(c, pub, frame); !ok {
			return
		}
	} else {
		rl.sub.mu.Lock() // c.mu comes first
		rl.sub.rememberLocked(b, now)
		rl.sub.mu.Unlock()
	}
	c.r.deliverLocked(c, pub, frame, svc)
}

// acked reports whether a child stream has been told this node's depth
// (Subscription.mayAttachUnder).
func (rl *relay) acked() bool {
	c := rl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for m := range c.children {
		if m.acked.Load() {
			return true
		}
	}
	return false
}

// hasChild reports whether peer holds a stream to this node as its child.
func (rl *relay) hasChild(peer swarm.Address) bool {
	c := rl.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for m := range c.children {
		if m.peer.Equal(peer) {
			return true
		}
	}
	return false
}

// reparentAll sends every child that speaks the envelope a Reparent
// toward to — one of this node's own parents (SWIP-61, graceful leave),
// with its underlays if this node learned them — and waits, at most wait,
// for them to leave; the children that do not are left to the caller's
// close.
func (rl *relay) reparentAll(to swarm.Address, underlays [][]byte, wait time.Duration) {
	c := rl.c
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
	case <-c.r.s.ctx.Done():
	}
}

// dropChildren resets every child stream: the relay's subscription ended
// (they repair through their other parent).
func (rl *relay) dropChildren() {
	c := rl.c
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

// relayAuthority is a relay's view of who may publish: the roster it holds
// (explicit authorship). It holds no cursors: a relay never judges an
// index (SWIP-61 item 11), so every index passes here and the root judges.
type relayAuthority struct{ c *cohort }

func (a relayAuthority) isPublisher(owner []byte) bool {
	a.c.mu.Lock()
	defer a.c.mu.Unlock()
	return a.c.isPublisherLocked(owner)
}

func (relayAuthority) feedCursor([]byte) uint64 { return 0 }
func (relayAuthority) serviceNext() uint64      { return 0 }

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
	if c == nil {
		return
	}
	if rl, ok := c.role.(*relay); ok && rl.sub == sub {
		rl.dropChildren()
	}
}

// maxRelayedFailures bounds the relayed publications that fail here one
// child stream may make this node check in a second; past it the stream's
// relayed publications are dropped unchecked until the second ends. A
// relay that forwards valid frames never reaches it.
const maxRelayedFailures = 32

// mayCheckRelayed reports whether a publication m relays is checked now;
// m's reader goroutine only.
func (m *member) mayCheckRelayed(now time.Time) bool {
	if now.Sub(m.failAt) >= time.Second {
		m.failAt, m.failed = now, 0
	}
	return m.failed < maxRelayedFailures
}
