// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Publishing from depth on SWIP-74 Rev 8 (docs/protocol.md, "Publishing
// from depth without the Claim frame"): the root issues the challenge of
// every publisher stream in its tree. A relay that admits a Join that may
// publish does not draw the challenge itself: it asks rootward with a
// Lease; each relay on the way remembers which child stream asked; the root
// draws the challenge and holds it as a lease — the challenge, the address
// it names, the root child stream it came up — and answers Leased back down
// the same path. The relay tells its other parents with a Route, so that a
// publication can go up both. Every node records, per child stream, the
// challenges leased below it and their addresses (leaseTable): a relayed
// publication is judged as sent by that address under that challenge —
// the owner forced, the id salted — and one under a challenge the stream
// holds no lease for is dropped before any signature is checked. The root
// honours only leases it drew and still holds: a challenge a relay
// invented, or copied from an earlier session, moves no cursor.

// leaseTable maps a leased challenge to the address it was leased for,
// per child stream; bounded by maxLeasesPerChild.
type leaseTable map[string][]byte

// rootLease is a lease the root drew: the address it names and the root
// child stream its Lease came up, whose end (or Release) alone ends it — a
// child that routed it (Route) holds a record of it, not the lease.
type rootLease struct {
	addr []byte
	via  *member
}

// Bounds of the lease tables.
const (
	maxLeasesPerChild = 4096  // leases recorded per child stream, at every node
	maxLeasesPerTree  = 16384 // leases a root holds in one cohort
	maxLeasesAsked    = 64    // Leases a relay has asked rootward and not yet been answered, per cohort
)

var (
	errNoLease     = errors.New("bps: no lease: the root refused or did not answer")
	errLeaseParent = errors.New("bps: no parent that speaks the multihop envelope to lease a challenge through")
)

// challengeFor is the challenge a Join admitted here is issued: drawn here
// at the root, for a stream that will never publish, and where this node
// has no subscription to lease through; leased from the root (asked up a
// parent, waiting at most HandshakeTimeout) at a relay for any other.
func (s *Service) challengeFor(ctx context.Context, peer swarm.Address, sp *Spec, join *pb.Join) ([]byte, error) {
	if join.Listen || bytes.Equal(join.Addr, zeroAddress) || sp.Implicit() {
		return newChallenge(), nil
	}
	sub := s.reg.feederOf(sp)
	if sub == nil {
		return newChallenge(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.HandshakeTimeout)
	defer cancel()
	return sub.askLease(ctx, join.Addr, nil)
}

// feederOf is the subscription a cohort of sp would be relayed from at this
// node, nil where the node is (or would be) its root.
func (r *registry) feederOf(sp *Spec) *Subscription {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.places[sp.key]; p != nil {
		if p.broker != nil {
			if rl, ok := p.broker.role.(*relay); ok {
				return rl.sub
			}
			return nil
		}
		return p.feeder()
	}
	return nil
}

// releaseLease gives back a challenge leased for a Join that was not
// admitted after all.
func (s *Service) releaseLease(sp *Spec, challenge []byte) {
	s.releaseLeases(sp, [][]byte{challenge})
}

// releaseLeases gives back the leases of a child stream that ended, at a
// relay (at the root detach forgot them).
func (s *Service) releaseLeases(sp *Spec, chs [][]byte) {
	if sub := s.reg.feederOf(sp); sub != nil {
		sub.releaseLeases(chs)
	}
}

// askedLease is a Lease this node sent up a parent, waiting for its
// Leased: the child stream it passes the answer to (nil: a Join at this
// node), the child's nonce, and the address.
type askedLease struct {
	child *member
	nonce uint64
	addr  []byte
	done  chan []byte // a Join's, buffered: the challenge, nil if refused
}

// askLease asks the root for a challenge leased for addr, up the first
// parent that speaks the envelope, and waits for the answer (a Join at this
// node, child nil) — or, passing a child's Lease on (child set), returns at
// once and passes the answer down when it comes (leased).
func (sub *Subscription) askLease(ctx context.Context, addr []byte, child *childLease) ([]byte, error) {
	sub.mu.Lock()
	var up *parent
	for _, p := range sub.parents {
		if p.cs.codec == codecEnvelope {
			up = p
			break
		}
	}
	if up == nil || len(sub.asked) >= maxLeasesAsked || sub.closing || sub.fatal != nil {
		sub.mu.Unlock()
		if up == nil {
			return nil, errLeaseParent
		}
		return nil, errNoLease
	}
	sub.nonce++
	nonce := sub.nonce
	a := &askedLease{addr: bytes.Clone(addr)}
	if child != nil {
		a.child, a.nonce = child.m, child.nonce
	} else {
		a.done = make(chan []byte, 1)
	}
	if sub.asked == nil {
		sub.asked = make(map[uint64]*askedLease)
	}
	sub.asked[nonce] = a
	sub.mu.Unlock()
	if !up.cs.push(sub.s, outFrame{b: encodeFrame(&pb.Lease{Nonce: nonce, Addr: a.addr}), kind: kindLease}) {
		sub.forgetAsked(nonce)
		return nil, errNoLease
	}
	if child != nil {
		return nil, nil
	}
	select {
	case ch := <-a.done:
		if ch == nil {
			return nil, errNoLease
		}
		return ch, nil
	case <-ctx.Done():
		sub.forgetAsked(nonce)
		return nil, fmt.Errorf("%w: %w", errNoLease, ctx.Err())
	case <-sub.quit:
		sub.forgetAsked(nonce)
		return nil, ErrClosed
	}
}

// childLease is a child's Lease this relay passes rootward.
type childLease struct {
	m     *member
	nonce uint64
}

func (sub *Subscription) forgetAsked(nonce uint64) {
	sub.mu.Lock()
	delete(sub.asked, nonce)
	sub.mu.Unlock()
}

// leased takes the root's answer to a Lease this node asked, from parent
// p: the challenge is recorded — against the child stream that asked, at
// an intermediate relay — routed up this node's other parents, kept for
// parents to come, and passed on. An answer to no Lease asked is dropped.
func (sub *Subscription) leased(p *parent, l *pb.Leased) error {
	sub.mu.Lock()
	a := sub.asked[l.Nonce]
	delete(sub.asked, l.Nonce)
	var ch []byte
	if a != nil && len(l.Challenge) == challengeSize {
		ch = bytes.Clone(l.Challenge)
		sub.carryLocked(ch, a.addr)
	}
	others := slices.DeleteFunc(slices.Clone(sub.parents), func(o *parent) bool { return o == p || o.cs.codec != codecEnvelope })
	sub.mu.Unlock()
	if a == nil {
		return nil
	}
	if ch != nil {
		route := outFrame{b: encodeFrame(&pb.Route{Challenge: ch, Addr: a.addr}), kind: kindRoute}
		for _, o := range others {
			o.cs.push(sub.s, route)
		}
	}
	if a.done != nil {
		a.done <- ch
		return nil
	}
	c := a.child.c
	c.mu.Lock()
	if ch != nil && !c.dead {
		if a.child.leases == nil {
			a.child.leases = make(leaseTable)
		}
		a.child.leases.put(ch, a.addr)
	}
	c.mu.Unlock()
	a.child.offer(outFrame{b: encodeFrame(&pb.Leased{Nonce: a.nonce, Challenge: ch}), kind: kindLeased})
	return nil
}

// carryLocked keeps a lease this node carries rootward, for the parents it
// attaches to later (routeTo); bounded, the oldest forgotten. The caller
// holds sub.mu.
func (sub *Subscription) carryLocked(ch, addr []byte) {
	if sub.carried == nil {
		sub.carried = make(leaseTable)
	}
	sub.carried.put(ch, addr)
}

// routeTo sends a new parent a Route for every lease this node carries,
// before anything else goes up it; the caller holds sub.mu.
func (sub *Subscription) routeTo(p *parent) {
	if p.cs.codec != codecEnvelope {
		return
	}
	for ch, addr := range sub.carried {
		p.cs.push(sub.s, outFrame{b: encodeFrame(&pb.Route{Challenge: []byte(ch), Addr: addr}), kind: kindRoute})
	}
}

// releaseLeases forgets leases this node carried and tells its parents.
func (sub *Subscription) releaseLeases(chs [][]byte) {
	sub.mu.Lock()
	var gone [][]byte
	for _, ch := range chs {
		if _, ok := sub.carried[string(ch)]; ok {
			delete(sub.carried, string(ch))
			gone = append(gone, ch)
		}
	}
	parents := slices.Clone(sub.parents)
	sub.mu.Unlock()
	for len(gone) > 0 {
		n := min(len(gone), maxReleaseBatch)
		f := outFrame{b: encodeFrame(&pb.Release{Challenges: gone[:n]}), kind: kindRelease}
		for _, p := range parents {
			if p.cs.codec == codecEnvelope {
				p.cs.push(sub.s, f)
			}
		}
		gone = gone[n:]
	}
}

// maxReleaseBatch is the most challenges one Release carries.
const maxReleaseBatch = 64

// put records ch as leased for addr; past maxLeasesPerChild an arbitrary
// lease is forgotten (the stream below keeps publishing only if its relay
// routes it again).
func (t leaseTable) put(ch, addr []byte) {
	if _, ok := t[string(ch)]; !ok && len(t) >= maxLeasesPerChild {
		for k := range t {
			delete(t, k)
			break
		}
	}
	t[string(ch)] = bytes.Clone(addr)
}

// leasedBelow is the address challenge was leased for below child stream
// from, nil if none. The root honours only a lease it still holds: a
// record a Route left on from outlives the lease (its Release or its
// stream's end at the child it came up) and counts for nothing then.
func (c *cohort) leasedBelow(from *member, challenge []byte) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	addr := from.leases[string(challenge)]
	if _, root := c.role.(rootRole); root && addr != nil {
		if l, ok := c.issued[string(challenge)]; !ok || !bytes.Equal(l.addr, addr) {
			return nil
		}
	}
	return addr
}

// takeLease handles a child's Lease: only a multihop child may ask, for a
// 20-byte address; the role answers (the root draws, a relay asks up).
func (c *cohort) takeLease(from *member, l *pb.Lease) error {
	if from.codec != codecEnvelope || len(l.Addr) != AddressSize {
		c.r.s.count(c, CounterWrongStream)
		return violationf("a malformed lease request")
	}
	c.role.lease(from, l)
	return nil
}

// takeRoute handles a child's Route.
func (c *cohort) takeRoute(from *member, rt *pb.Route) error {
	if len(rt.Challenge) != challengeSize || len(rt.Addr) != AddressSize {
		c.r.s.count(c, CounterWrongStream)
		return violationf("a malformed route")
	}
	c.role.route(from, rt)
	return nil
}

// takeRelease handles a child's Release.
func (c *cohort) takeRelease(from *member, rl *pb.Release) error {
	if len(rl.Challenges) > maxReleaseBatch {
		c.r.s.count(c, CounterWrongStream)
		return violationf("a release of %d challenges", len(rl.Challenges))
	}
	c.role.release(from, rl.Challenges)
	return nil
}

// lease draws a challenge for a child's Lease at the root and holds it:
// within the bounds, recorded against the child stream it came up;
// refused (Leased without a challenge) past them.
func (r rootRole) lease(from *member, l *pb.Lease) {
	c := r.c
	var ch []byte
	c.mu.Lock()
	if !c.dead && len(c.issued) < maxLeasesPerTree && len(from.leases) < maxLeasesPerChild {
		ch = newChallenge()
		if c.issued == nil {
			c.issued = make(map[string]rootLease)
		}
		c.issued[string(ch)] = rootLease{addr: bytes.Clone(l.Addr), via: from}
		if from.leases == nil {
			from.leases = make(leaseTable)
		}
		from.leases.put(ch, l.Addr)
	}
	c.mu.Unlock()
	from.offer(outFrame{b: encodeFrame(&pb.Leased{Nonce: l.Nonce, Challenge: ch}), kind: kindLeased})
}

// route records, at the root, that publications under a lease the root
// holds may come up from too; a Route for a lease the root did not issue,
// or for another address, is dropped and counted.
func (r rootRole) route(from *member, rt *pb.Route) {
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.issued[string(rt.Challenge)]
	if !ok || !bytes.Equal(l.addr, rt.Addr) {
		c.counters[CounterWrongChallenge].Add(1)
		return
	}
	if from.leases == nil {
		from.leases = make(leaseTable)
	}
	from.leases.put(rt.Challenge, l.addr)
}

// release forgets leases at the root: from's records, and the leases
// themselves where from is the child they were drawn for.
func (r rootRole) release(from *member, chs [][]byte) {
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ch := range chs {
		if _, ok := from.leases[string(ch)]; ok {
			delete(from.leases, string(ch))
			if l, ok := c.issued[string(ch)]; ok && l.via == from {
				delete(c.issued, string(ch)) // the stream it was leased for ended
			}
		}
	}
}

// holdsLease is a child stream of c other than except that still records
// lease ch (a Route up another path), or is the stream it was leased for;
// nil if none. The caller holds c.mu.
func (c *cohort) holdsLease(ch string, except *member) *member {
	for o := range c.children {
		if o == except {
			continue
		}
		if _, ok := o.leases[ch]; ok {
			return o
		}
		if !o.listen && string(o.challenge) == ch {
			return o
		}
	}
	return nil
}

// lease passes a child's Lease rootward; the answer comes back through
// the subscription (leased).
func (rl *relay) lease(from *member, l *pb.Lease) {
	if _, err := rl.sub.askLease(rl.sub.ctx, l.Addr, &childLease{m: from, nonce: l.Nonce}); err != nil {
		from.offer(outFrame{b: encodeFrame(&pb.Leased{Nonce: l.Nonce}), kind: kindLeased})
	}
}

// route records a child's Route and passes it rootward.
func (rl *relay) route(from *member, rt *pb.Route) {
	c := rl.c
	c.mu.Lock()
	if from.leases == nil {
		from.leases = make(leaseTable)
	}
	from.leases.put(rt.Challenge, rt.Addr)
	c.mu.Unlock()
	rl.sub.mu.Lock()
	rl.sub.carryLocked(rt.Challenge, rt.Addr)
	rl.sub.mu.Unlock()
	rl.sub.sendUp(outFrame{b: encodeFrame(rt), kind: kindRoute})
}

// release forgets a child's leases and passes the release rootward.
func (rl *relay) release(from *member, chs [][]byte) {
	c := rl.c
	c.mu.Lock()
	var gone [][]byte
	for _, ch := range chs {
		if _, ok := from.leases[string(ch)]; ok {
			delete(from.leases, string(ch))
			if c.holdsLease(string(ch), from) == nil {
				gone = append(gone, ch)
			}
		}
	}
	c.mu.Unlock()
	rl.sub.releaseLeases(gone)
}

// leasesGone is told, under c.mu, that child m detached: the root forgets
// what was leased below it; a relay releases rootward its own stream's
// lease and those below it (after c.mu is let go: the returned list).
func (c *cohort) leasesGone(m *member) [][]byte {
	chs := slices.Collect(maps.Keys(m.leases))
	if _, ok := c.role.(rootRole); ok {
		// A path lost, not the stream ended (that is a Release): a lease
		// another child stream still routes lives on through it, so that a
		// publisher's second path carries it when the first one's relay
		// dies (SWIP-61 item 6).
		for _, ch := range chs {
			if l, ok := c.issued[ch]; ok && l.via == m {
				if o := c.holdsLease(ch, m); o != nil {
					l.via = o
					c.issued[ch] = l
				} else {
					delete(c.issued, ch)
				}
			}
		}
		return nil
	}
	// At a relay only the end of a stream leased here ends its lease: a
	// child that carried others' leases is a path lost, and the root keeps
	// them for the paths that remain.
	if !m.listen {
		return [][]byte{m.challenge}
	}
	return nil
}
