// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"slices"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"golang.org/x/time/rate"
)

// registry holds this node's place in every cohort it takes part in
// (place.go). Its mutex guards the places and the per-peer counts; each
// broker half's own mutex guards it (membership, roster, cursors, timers),
// so fan-outs of different cohorts run in parallel. Lock order: registry,
// then cohort, then — at a relay binding its subscription or vouching for
// a claim — that subscription's mu. Critical sections are map updates and
// non-blocking queue sends, never I/O.
type registry struct {
	s         *Service
	mu        sync.Mutex
	places    map[string]*place         // by the spec's canonical key
	brokered  int                       // places with a broker half, bounded by MaxCohorts
	peers     map[string]map[string]int // peer overlay -> cohort key -> streams
	ended     *endedSpecs               // cohorts ended by END_OF_STREAM, remembered for late Joins
	feeds     *heldFeeds                // the service feeds of cohorts forgotten, by spec key
	referring map[string]bool           // (peer, cohort) asking where else to attach (refer), one at a time
	closed    bool
}

// heldFeed is a forgotten cohort's service feed: a cohort made again for
// the same spec takes it back, so that an old roster or end of stream
// replayed to it is stale, not a roll-back.
type heldFeed struct {
	svc    ServiceFeed
	latest []byte
	from   string // the peer that carried latest (cohort.svcFrom)
}

func newRegistry(s *Service) *registry {
	return &registry{
		s:      s,
		places: make(map[string]*place),
		peers:  make(map[string]map[string]int),
		ended:  newEndedSpecs(s.opts.EndedCohorts, s.opts.EndedTTL),
		feeds:  newHeldFeeds(s.opts.EndedCohorts),
	}
}

// attach creates or attaches the cohort for sp and adds a member for the
// stream, speaking cd, in the given role, enforcing every bound; a stream
// is a claimed publisher only once it claims after the Ack (upgrade). A
// cohort that ended is not attached: attach returns its END_OF_STREAM frame
// instead, which the Join is told. replay is what the joiner asked to be
// sent again of the deliveries fanned out lately (replay.go).
func (r *registry) attach(peer swarm.Address, stream p2p.Stream, cd codec, sp *Spec, addr []byte, ro role, replay time.Duration) (_ *member, _ pb.Status, ended []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, pb.Status_FULL, nil
	}
	pl := r.places[sp.key]
	var c *cohort
	if pl != nil {
		c = pl.broker
	}
	if c != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.svc.Ended() {
			return nil, pb.Status_OK, c.latest // ended, not yet forgotten
		}
	} else if eos := r.ended.get(sp.key); eos != nil {
		return nil, pb.Status_OK, eos
	}
	limit, ok := r.capacityLocked(pl, c)
	if !ok {
		return nil, pb.Status_FULL, nil
	}
	if pc := r.peers[peer.ByteString()]; pc[sp.key] == 0 && len(pc) >= r.s.opts.MaxCohortsPerPeer {
		return nil, pb.Status_FULL, nil
	}
	if addr == nil && c != nil && c.plainStreams(peer) >= maxPlainStreams {
		return nil, pb.Status_FULL, nil
	}
	m := r.newMember(peer, stream, cd, sp, addr, ro)
	extra, ok := r.admitLocked(c, m, limit)
	if !ok {
		return nil, pb.Status_FULL, nil
	}
	if c == nil {
		c = r.newCohortLocked(sp, pl.feeder())
		defer c.mu.Unlock()
	}
	r.seatLocked(c, m, extra)
	r.replayLocked(c, m, replay) // after the first delivery, before anything live
	return m, pb.Status_OK, nil
}

// mayRefer reports whether peer may ask where else to attach in sp's
// cohort (a refer-Join, SWIP-61 self-healing): only a child of this node
// there, and one such question at a time, so that nobody else can make the
// node probe its subtree or fill its probe table. It takes the one slot;
// referred frees it.
func (r *registry) mayRefer(peer swarm.Address, sp *Spec) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := peer.ByteString() + sp.key
	if r.peers[peer.ByteString()][sp.key] == 0 || r.referring[k] {
		return false
	}
	if r.referring == nil {
		r.referring = make(map[string]bool)
	}
	r.referring[k] = true
	return true
}

// referred frees the refer slot mayRefer took.
func (r *registry) referred(peer swarm.Address, sp *Spec) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.referring, peer.ByteString()+sp.key)
}

// maxPlainStreams bounds the streams one peer holds in one cohort at a
// node that declare no address — the streams a probe asks and a tree grows
// through: a node subscribes once per cohort and parent, a reconnect's
// overlap aside. Streams that declare an address (a publisher each, as
// many as a bridge node has local publishers) are bounded by the
// cohort's own bounds.
const maxPlainStreams = 2

// plainStreams counts peer's streams in c that declare no address; the
// caller holds c.mu.
func (c *cohort) plainStreams(peer swarm.Address) int {
	n := 0
	for m := range c.children {
		if m.declared == nil && m.peer.Equal(peer) {
			n++
		}
	}
	return n
}

// capacityLocked is how many children this node takes in the cohort: its
// role's limit where it has children already (parentRole); else, where it
// follows the cohort, a relay's RelayCapacity (SWIP-61) — a node that
// follows the cohort is never a second root — and the root's
// MaxStreamsPerCohort where it does not. It is not ok where the node
// follows but does not relay, or would broker one cohort more than it may.
// The caller holds r.mu (and c.mu, if c is not nil).
func (r *registry) capacityLocked(pl *place, c *cohort) (limit int, ok bool) {
	o := &r.s.opts
	switch {
	case c != nil:
		return c.role.limit(o), true
	case pl.follows():
		return o.RelayCapacity, pl.relay != nil && o.RelayCapacity > 0 && r.brokered < o.MaxCohorts
	}
	return o.MaxStreamsPerCohort, r.brokered < o.MaxCohorts
}

// newMember is the member for a stream joining in role ro; a stream that
// declares an address is issued its challenge. A stream of a closed cohort
// is silent until it claims.
func (r *registry) newMember(peer swarm.Address, stream p2p.Stream, cd codec, sp *Spec, addr []byte, ro role) *member {
	m := &member{peerStream: newPeerStream(stream, peer, cd, &r.s.opts), declared: addr, addr: addr, role: ro, counted: true,
		silent: sp.Closed}
	m.heldWriter(r.s.goOwned) // serve writes the Ack before any queued frame
	if addr != nil {
		m.challenge = newChallenge()
	}
	if ro == rolePublisher {
		m.isPub.Store(true)
	}
	return m
}

// admitLocked checks m against c's fan-out limit, past which the root
// (its role's extraSeats) admits a stream declaring a legitimate publisher's address to a
// provisional seat — one per address at a time, within the publisher-stream
// bound — that its claim after the Ack must take within the claim
// deadline (SWIP-74's extra seat for an absent publisher; with the claim no
// longer inside the Join, also a returning one's way in). It reports
// whether m takes such a seat, and false where c is full. The caller holds
// c.mu.
func (r *registry) admitLocked(c *cohort, m *member, limit int) (extra, ok bool) {
	if c == nil {
		return false, true
	}
	m.svcAt = c.svc.Next()
	if c.fanout >= limit {
		a := string(m.addr)
		if !c.role.extraSeats() || !c.spec.Explicit() || m.addr == nil || !c.isPublisherLocked(m.addr) || c.extras[a] != nil ||
			c.nclaim+len(c.extras) >= r.s.opts.MaxPublisherStreams {
			return false, false
		}
		return true, true
	}
	return false, true
}

// newCohortLocked makes the broker half of sp at this node — the root's,
// or a relay's fed by up — and returns it locked; the caller holds r.mu and
// unlocks c.mu. Its role is chosen here, once.
func (r *registry) newCohortLocked(sp *Spec, up *Subscription) *cohort {
	now := time.Now()
	c := &cohort{
		r:          r,
		spec:       sp,
		children:   make(map[*member]struct{}),
		claimed:    make(map[string]int),
		extras:     make(map[string]*member),
		cursors:    make(map[string]uint64),
		created:    now,
		lastAccept: now,
	}
	if !sp.Explicit() {
		c.owners = newLRU[*rate.Limiter](maxRatedOwners)
	}
	c.mu.Lock()
	if !(sp.Binding == pb.TopicBinding_FEED_TOPIC && sp.Explicit()) {
		c.seen = NewWindow(r.s.opts.DedupWindow)
	}
	r.placeLocked(sp).broker = c
	r.brokered++
	if up != nil {
		c.role = newRelay(c, up)
	} else {
		c.role = rootRole{c: c}
		if h := r.feeds.take(sp.key); h.svc.Seen() {
			c.svc, c.latest, c.svcFrom = h.svc, h.latest, h.from
		}
		r.armInactivity(c, r.s.opts.Inactivity)
	}
	r.s.metrics.Cohorts.Inc()
	return c
}

// seatLocked adds m to c in an extra seat or counted against the fan-out,
// and queues its first delivery. The caller holds r.mu and c.mu.
func (r *registry) seatLocked(c *cohort, m *member, extra bool) {
	m.c = c
	pk := m.peer.ByteString()
	pc := r.peers[pk]
	if pc == nil {
		pc = make(map[string]int)
		r.peers[pk] = pc
	}
	pc[c.spec.key]++

	c.children[m] = struct{}{}
	r.gauge(m, 1)
	if extra {
		m.counted = false
		c.extras[string(m.addr)] = m
	} else {
		c.fanout++
	}
	if extra || m.silent {
		m.claimTimer = time.AfterFunc(r.s.opts.ClaimDeadline, func() { r.claimDeadline(m) })
	}
	r.firstDelivery(m)
}

// firstDelivery queues the latest service SOC on a stream that is not the
// admin's and not silent; the caller holds c.mu.
func (r *registry) firstDelivery(m *member) {
	c := m.c
	if c.latest == nil || m.silent || bytes.Equal(m.addr, c.spec.Admin) {
		return
	}
	m.offer(outFrame{b: c.latest, svc: c.svc.Next()}) // a fresh queue has room
}

// gauge moves the stream gauges for m by d.
func (r *registry) gauge(m *member, d float64) {
	if m.role == rolePublisher {
		r.s.metrics.Publishers.Add(d)
	} else {
		r.s.metrics.Subscribers.Add(d)
	}
}

// upgrade outcomes.
type upgradeResult int

const (
	upgraded     upgradeResult = iota
	notPublisher               // a verified claim by an address not in the publisher set: held
	redundant                  // a claim on a stream already upgraded for that address
	upgradeFull                // publisher streams at their bound, or the cohort is gone
)

// upgrade turns a subscriber member into a claimed publisher stream after a
// verified claim. A claim by an address that is not (yet) a publisher
// leaves the stream as it is and is held: the roster that names the address
// upgrades the stream (SWIP-60: silent, or a spectator, "until the roster
// names it"). A claim for the address a stream was already upgraded for is
// redundant: a client cannot tell whether its earlier claim was taken before
// the stream's first delivery, so it may claim again. upgrade also reports
// how many service messages the cohort accepted since the stream attached,
// which bounds the claims a stream may send that are not taken.
func (r *registry) upgrade(m *member, claim *pb.Claim) (upgradeResult, uint64) {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	rosters := c.svc.Next() - m.svcAt
	switch {
	case c.dead || c.svc.Ended():
		return upgradeFull, rosters
	case m.role == rolePublisher && bytes.Equal(m.addr, claim.Addr):
		c.moveCursor(claim.Addr, claim.Index)
		return redundant, rosters
	case !c.isPublisherLocked(claim.Addr):
		m.held = claim
		return notPublisher, rosters
	}
	return r.upgradeLocked(m, claim, true), rosters
}

// upgradeLocked turns subscriber member m into a claimed publisher stream for
// the claim's address, which may publish: it leaves the fan-out count and
// moves the address's cursor forward. A stream that was silent gets its
// first delivery if deliver is set (the caller that is fanning out a roster
// delivers that instead). At a relay the claim, verified here, is forwarded
// rootward (its role's vouch). The caller holds c.mu.
func (r *registry) upgradeLocked(m *member, claim *pb.Claim, deliver bool) upgradeResult {
	c := m.c
	addr, index := claim.Addr, claim.Index
	if m.role != roleSubscriber || c.nclaim >= r.s.opts.MaxPublisherStreams {
		return upgradeFull
	}
	r.gauge(m, -1)
	if m.counted {
		c.fanout--
		m.counted = false
	}
	if c.extras[string(addr)] == m {
		delete(c.extras, string(addr))
	}
	m.stopClaimTimer()
	m.held = nil
	m.addr = bytes.Clone(addr)
	m.role = rolePublisher
	m.isPub.Store(true) // after addr: the reader reads addr once it sees this
	wasSilent := m.silent
	m.silent = false
	r.gauge(m, 1)
	c.claimed[string(addr)]++
	c.nclaim++
	c.moveCursor(addr, index)
	if wasSilent && deliver {
		r.firstDelivery(m)
	}
	c.role.vouch(forwarded(claim, m.challenge, r.s.overlay))
	return upgraded
}

// detach removes a member whose handler is returning. A cohort left with no
// stream is reclaimed at once (SWIP-74 allows it): its state is forgotten.
func (r *registry) detach(m *member) {
	c := m.c
	r.mu.Lock()
	defer r.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.children[m]; ok {
		delete(c.children, m)
		c.unprobe(m)
		r.gauge(m, -1)
		switch {
		case m.counted:
			c.fanout--
		case m.role == rolePublisher && c.spec.Explicit():
			if c.claimed[string(m.addr)]--; c.claimed[string(m.addr)] <= 0 {
				delete(c.claimed, string(m.addr))
			}
			c.nclaim--
		}
	}
	if c.extras[string(m.addr)] == m {
		delete(c.extras, string(m.addr))
	}
	m.stopClaimTimer()
	pk := m.peer.ByteString()
	if pc := r.peers[pk]; pc != nil {
		if pc[c.spec.key]--; pc[c.spec.key] <= 0 {
			delete(pc, c.spec.key)
		}
		if len(pc) == 0 {
			delete(r.peers, pk)
		}
	}
	if !c.dead && len(c.children) == 0 {
		r.forget(c)
	}
	if len(c.children) == 0 && c.gone != nil {
		close(c.gone)
		c.gone = nil
	}
}

// forget removes a cohort from the registry and tells its role (the root
// remembers its service feed, a relay unbinds its subscription); the
// caller holds r.mu and c.mu.
func (r *registry) forget(c *cohort) {
	c.role.forgotten()
	c.dead = true
	if c.timer != nil {
		c.timer.Stop()
	}
	if p := r.places[c.spec.key]; p != nil && p.broker == c {
		p.broker = nil
		r.brokered--
		r.s.metrics.Cohorts.Dec()
		r.tidyLocked(p)
	}
}

// reclaim forgets a cohort and resets every stream in it; the caller holds
// r.mu and c.mu. Members detach themselves as their handlers return.
func (r *registry) reclaim(c *cohort, reason error) {
	r.forget(c)
	for m := range c.children {
		m.kill(reason)
	}
}

// armInactivity schedules the inactivity check of c after d.
func (r *registry) armInactivity(c *cohort, d time.Duration) {
	c.timer = time.AfterFunc(d, func() {
		if !r.s.track() {
			return
		}
		defer r.s.done()
		r.mu.Lock()
		defer r.mu.Unlock()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.dead {
			return
		}
		if left := r.s.opts.Inactivity - time.Since(c.lastAccept); left > 0 {
			r.armInactivity(c, left)
			return
		}
		r.s.metrics.Reclaimed.Inc()
		r.s.trace(Event{Kind: EventReclaim, Cohort: c.spec.String()})
		r.s.logger.Debug("cohort reclaimed for inactivity", "cohort", c.spec.String())
		r.reclaim(c, errReclaimed)
	})
}

// claimDeadline disconnects an extra seat or a silent stream that has not
// claimed, and a publisher revoked in a closed cohort that no roster named
// again.
func (r *registry) claimDeadline(m *member) {
	if !r.s.track() {
		return
	}
	defer r.s.done()
	m.c.mu.Lock()
	unclaimed := m.role == roleSubscriber || (m.c.spec.Closed && m.revokedAt != 0)
	m.c.mu.Unlock()
	if unclaimed {
		r.s.count(m.c, CounterClaimTimeout)
		m.kill(errClaimTimeout)
	}
}

// end forgets a cohort that accepted END_OF_STREAM and remembers the end for
// the Joins that come later; its streams close themselves after the
// delivery (accept queued the end on each).
func (r *registry) end(c *cohort) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || !c.svc.Ended() {
		return
	}
	r.forget(c)
	r.ended.put(c.spec.key, c.svcFrom, string(c.spec.Admin), c.latest)
	r.s.metrics.Ended.Inc()
	r.s.trace(Event{Kind: EventEnd, Cohort: c.spec.String()})
	r.s.logger.Debug("cohort ended by its admin", "cohort", c.spec.String())
}

// closeAll reclaims every cohort; later Joins are refused.
func (r *registry) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, p := range r.places {
		if c := p.broker; c != nil {
			c.mu.Lock()
			r.reclaim(c, errServiceClosed)
			c.mu.Unlock()
		}
	}
}

// each calls f for every broker half, under the registry's lock.
func (r *registry) each(f func(*cohort)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.places {
		if p.broker != nil {
			f(p.broker)
		}
	}
}

// Cohorts lists the cohorts this node brokers, ordered by canonical spec.
func (s *Service) Cohorts() []CohortInfo {
	out := make([]CohortInfo, 0)
	s.reg.each(func(c *cohort) { out = append(out, c.info()) })
	slices.SortFunc(out, func(a, b CohortInfo) int { return bytes.Compare(a.Spec.canonical, b.Spec.canonical) })
	return out
}
