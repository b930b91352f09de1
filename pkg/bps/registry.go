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
// stream, speaking cd, for the Join's declared address, enforcing every
// bound; its role follows from the address (joinRole). A cohort that ended
// is not attached: attach returns its EOS frame instead, which the Join is
// told. replay is what the joiner asked to be sent again of the deliveries
// fanned out lately (replay.go).
func (r *registry) attach(peer swarm.Address, stream p2p.Stream, cd codec, sp *Spec, join *pb.Join, challenge []byte, replay time.Duration) (_ *member, _ pb.Status, ended []byte) {
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
			return nil, pb.Status_OK, c.eos // ended, not yet forgotten
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
	if c != nil && c.peerStreams(peer) >= maxPeerStreams {
		return nil, pb.Status_FULL, nil
	}
	m := r.newMember(peer, stream, cd, sp, join, challenge, c)
	outside, ok := r.admitLocked(c, m, limit)
	if !ok {
		return nil, pb.Status_FULL, nil
	}
	if c == nil {
		c = r.newCohortLocked(sp, pl.feeder())
		defer c.mu.Unlock()
	}
	r.seatLocked(c, m, outside)
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

// maxPeerStreams bounds the streams one peer connection holds in one
// cohort at this node, counting every stream whatever it declares —
// pending, spectator, silent, publisher (SWIP-74 Rev 8; it recommends 2,
// docs/protocol.md "Bounds" says why 4): a node's shared spectator stream
// and the publishing identities it bridges, a reconnect's overlap aside.
const maxPeerStreams = 4

// peerStreams counts peer's streams in c; the caller holds c.mu.
func (c *cohort) peerStreams(peer swarm.Address) int {
	n := 0
	for m := range c.children {
		if m.peer.Equal(peer) {
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

// newMember is the member for a stream joining with join, issued
// challenge; its role follows from its declared address (joinRole),
// judged against c's roster (nil: a cohort not made yet, whose roster is
// the admin alone — or the one a forgotten cohort's feed kept).
func (r *registry) newMember(peer swarm.Address, stream p2p.Stream, cd codec, sp *Spec, join *pb.Join, challenge []byte, c *cohort) *member {
	listen := join.Listen || bytes.Equal(join.Addr, zeroAddress)
	m := &member{peerStream: newPeerStream(stream, peer, cd, &r.s.opts), declared: join.Addr, challenge: challenge, listen: listen, counted: true}
	m.role = joinRole(sp, join.Addr, listen, func(a []byte) bool {
		if c != nil {
			return c.isPublisherLocked(a)
		}
		h := r.feeds.peek(sp.key)
		return h.MayPublish(sp, a)
	})
	m.silent = m.role == roleSpectator && sp.Closed
	m.heldWriter(r.s.goOwned) // serve writes the Ack before any queued frame
	if m.role == rolePublisher {
		m.addr = join.Addr
		m.isPub.Store(true)
	}
	return m
}

// zeroAddress is the address a stream declares that will never publish: no
// key signs for it (docs/protocol.md, "Streams and their roles").
var zeroAddress = make([]byte, AddressSize)

// joinRole is the role a stream declaring addr takes at its Join (SWIP-74
// Rev 8, SWIP-60 rev 14): under ALL and implicit authorship a publisher
// stream at once; under explicit authorship pending if addr may publish
// now (the admin, or named by the roster in force), else a spectator
// (silent in a closed cohort). A stream that never publishes is a
// spectator everywhere.
func joinRole(sp *Spec, addr []byte, listen bool, mayPublish func([]byte) bool) role {
	switch {
	case listen:
		return roleSpectator
	case !sp.Explicit():
		return rolePublisher
	case mayPublish(addr):
		return rolePending
	}
	return roleSpectator
}

// admitLocked checks m against c's fan-out limit: a pending stream stands
// outside it — one per address at a time, within the publisher-stream
// bound — and so does the admin's stream under ALL, so that a full chat
// cannot keep the admin from ending it. A pending stream of an address
// that has one already replaces it, and the older is reset without
// penalty: Rev 8 admits the admin "as a pending stream whether or not its
// old one is still held", and the pending seat is "not a slot anyone can
// squat" — a stranger declaring the admin's address, or the admin's own
// stream the transport has not reaped, must not keep the admin out for a
// claim deadline. It reports whether m stands outside the bound, and false
// where c is full. The caller holds c.mu.
func (r *registry) admitLocked(c *cohort, m *member, limit int) (outside, ok bool) {
	if m.role == rolePending {
		if c == nil {
			return true, true
		}
		if old := c.extras[string(m.declared)]; old != nil {
			old.stopClaimTimer()
			old.kill(errReplaced) // seatLocked puts m in its place
			return true, true
		}
		if c.nclaim+len(c.extras) >= r.s.opts.MaxPublisherStreams {
			return false, false
		}
		return true, true
	}
	if c == nil {
		return false, true
	}
	m.svcAt = c.svc.Next()
	if c.fanout >= limit {
		admin := c.spec.Publishers == pb.PublisherRegime_ALL && bytes.Equal(m.declared, c.spec.Admin)
		return admin, admin
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

// seatLocked adds m to c, outside the fan-out bound or counted against it,
// arms the claim deadline of a pending or silent stream, and queues its
// first delivery. The caller holds r.mu and c.mu.
func (r *registry) seatLocked(c *cohort, m *member, outside bool) {
	m.c = c
	c.seq++
	m.seq = c.seq
	pk := m.peer.ByteString()
	pc := r.peers[pk]
	if pc == nil {
		pc = make(map[string]int)
		r.peers[pk] = pc
	}
	pc[c.spec.key]++

	c.children[m] = struct{}{}
	r.gauge(m, 1)
	switch {
	case m.role == rolePending:
		m.counted = false
		c.extras[string(m.declared)] = m
	case outside:
		m.counted = false
	default:
		c.fanout++
	}
	if m.role == rolePending || m.silent {
		m.claimTimer = time.AfterFunc(r.s.opts.ClaimDeadline, func() { r.claimDeadline(m) })
	}
	r.firstDelivery(m)
}

// firstDelivery queues the latest roster on a new stream (rev 14: a
// stream's first delivery, before any other): on any stream but the
// admin's own, and on a pending or silent one only if it names its
// address — its cue to claim. The caller holds c.mu.
func (r *registry) firstDelivery(m *member) {
	c := m.c
	if c.latest == nil || bytes.Equal(m.declared, c.spec.Admin) {
		return
	}
	if (m.role == rolePending || m.silent) && !c.isPublisherLocked(m.declared) {
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

// claim upgrades m to a publisher stream on its first valid frame (Rev
// 8): a pending stream leaves its place outside the bound, a spectator
// (or silent stream) the roster names leaves the fan-out count. At most
// MaxPeerPublisherStreams streams per address are claimed: past it the
// oldest of the address's streams is reset, without penalty (rev 14). It
// reports false where the cohort ended or the address may no longer
// publish.
func (r *registry) claim(m *member) bool {
	c := m.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.svc.Ended() || !c.isPublisherLocked(m.declared) {
		return false
	}
	if m.role == rolePublisher {
		return true
	}
	addr := m.declared
	if c.claimed[string(addr)] >= maxClaimedPerAddress {
		var oldest *member
		for o := range c.children {
			if o.role == rolePublisher && bytes.Equal(o.addr, addr) && (oldest == nil || o.seq < oldest.seq) {
				oldest = o
			}
		}
		if oldest != nil {
			oldest.kill(errSuperseded)
		}
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
	m.addr = bytes.Clone(addr)
	m.role = rolePublisher
	m.isPub.Store(true) // after addr: the reader reads addr once it sees this
	wasSilent := m.silent
	m.silent = false
	r.gauge(m, 1)
	c.claimed[string(addr)]++
	c.nclaim++
	if wasSilent {
		r.firstDelivery(m)
	}
	return true
}

// maxClaimedPerAddress is how many claimed publisher streams one address
// holds in a cohort (SWIP-60 rev 14 RECOMMENDED): a reconnecting publisher
// never waits for its old stream, whose seat the newer claim takes.
const maxClaimedPerAddress = 2

// detach removes a member whose handler is returning. A cohort left with no
// stream is reclaimed at once (SWIP-74 allows it): its state is forgotten.
func (r *registry) detach(m *member) (leases [][]byte) {
	c := m.c
	r.mu.Lock()
	defer r.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.children[m]; ok {
		leases = c.leasesGone(m)
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
	if c.extras[string(m.declared)] == m {
		delete(c.extras, string(m.declared))
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
	return leases
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
	unclaimed := m.role == rolePending || m.silent || (m.c.spec.Closed && m.revokedAt != 0)
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
	r.ended.put(c.spec.key, c.svcFrom, string(c.spec.Admin), c.eos)
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
