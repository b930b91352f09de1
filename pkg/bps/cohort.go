// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Reasons a broker ends a member stream from outside its handler.
var (
	errReclaimed     = errors.New("cohort reclaimed for inactivity")
	errQueueFull     = errors.New("outbound queue full")
	errClaimTimeout  = errors.New("extra admin seat did not claim within the claim deadline")
	errServiceClosed = errors.New("service closed")
	errWriteTimeout  = errors.New("write timed out")
)

// role is what a stream is in its cohort.
type role int

const (
	roleSubscriber role = iota // in the fan-out set; may send one Claim
	rolePublisher              // claimed: sends Messages, receives nothing
)

// registry holds the broker's cohorts. One mutex guards the registry and
// everything in every cohort (membership, cursor, timers): the critical
// sections are map updates and non-blocking queue sends, never I/O.
type registry struct {
	s       *Service
	mu      sync.Mutex
	cohorts map[string]*cohort
	peers   map[string]map[string]int // peer overlay -> cohort key -> streams
	closed  bool
}

// cohort is one live cohort at this broker.
type cohort struct {
	spec       *Spec
	cursor     uint64 // lowest index accepted next
	subs       map[*member]struct{}
	pubs       map[*member]struct{}
	extra      *member // the extra admin seat, nil while free
	lastAccept time.Time
	created    time.Time
	accepted   uint64
	timer      *time.Timer // inactivity
	dead       bool
	counters   counters
}

// member is one stream attached to a cohort at this broker.
type member struct {
	c      *cohort
	peer   swarm.Address
	stream p2p.Stream
	addr   []byte // declared address, nil for a plain subscriber
	role   role
	queue  chan []byte   // encoded frames for the writer; nil for a publisher-at-join
	quit   chan struct{} // closed by kill
	once   sync.Once
	reason error // why kill was called; read after quit is closed

	claimTimer *time.Timer // the extra seat's deadline
	invalid    int         // invalid publications so far (reader goroutine only)
}

// kill ends the member's stream from outside its handler: the reset unblocks
// its reader and writer, and the handler returns reason.
func (m *member) kill(reason error) {
	m.once.Do(func() {
		m.reason = reason
		close(m.quit)
		_ = m.stream.Reset()
	})
}

// killed returns the reason the member was killed, or nil.
func (m *member) killed() error {
	select {
	case <-m.quit:
		return m.reason
	default:
		return nil
	}
}

func newRegistry(s *Service) *registry {
	return &registry{
		s:       s,
		cohorts: make(map[string]*cohort),
		peers:   make(map[string]map[string]int),
	}
}

// attach creates or attaches the cohort for sp and adds a member for the
// stream in the given role, enforcing every bound. claimIndex is the index of
// a verified claim in the Join (publisher role only).
func (r *registry) attach(peer swarm.Address, stream p2p.Stream, sp *Spec, addr []byte, ro role, claimIndex uint64) (*member, pb.Status) {
	o := &r.s.opts
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, pb.Status_FULL
	}
	c := r.cohorts[sp.key]
	if c == nil && len(r.cohorts) >= o.MaxCohorts {
		return nil, pb.Status_FULL
	}
	pc := r.peers[peer.ByteString()]
	if _, in := pc[sp.key]; !in && len(pc) >= o.MaxCohortsPerPeer {
		return nil, pb.Status_FULL
	}

	m := &member{peer: peer, stream: stream, addr: addr, role: ro, quit: make(chan struct{})}
	extra := false
	if c != nil {
		switch ro {
		case rolePublisher:
			if len(c.pubs) >= o.MaxPublisherStreams {
				return nil, pb.Status_FULL
			}
		case roleSubscriber:
			if c.fanout() >= o.MaxStreamsPerCohort {
				if addr == nil || !sp.mayPublish(addr) || len(c.pubs) > 0 || c.extra != nil {
					return nil, pb.Status_FULL
				}
				extra = true
			}
		}
	}

	if c == nil {
		now := time.Now()
		c = &cohort{
			spec:       sp,
			subs:       make(map[*member]struct{}),
			pubs:       make(map[*member]struct{}),
			created:    now,
			lastAccept: now,
		}
		r.cohorts[sp.key] = c
		r.armInactivity(c, o.Inactivity)
		r.s.metrics.Cohorts.Inc()
	}
	m.c = c
	if pc == nil {
		pc = make(map[string]int)
		r.peers[peer.ByteString()] = pc
	}
	pc[sp.key]++

	switch ro {
	case rolePublisher:
		c.pubs[m] = struct{}{}
		c.cursor = max(c.cursor, claimIndex)
		r.s.metrics.Publishers.Inc()
	case roleSubscriber:
		m.queue = make(chan []byte, o.QueueLen)
		c.subs[m] = struct{}{}
		r.s.metrics.Subscribers.Inc()
		if extra {
			c.extra = m
			m.claimTimer = time.AfterFunc(o.ClaimDeadline, func() { r.claimDeadline(m) })
		}
	}
	return m, pb.Status_OK
}

// fanout is the number of subscriber streams counted against the bound: the
// extra admin seat is over it.
func (c *cohort) fanout() int {
	n := len(c.subs)
	if c.extra != nil {
		n--
	}
	return n
}

// upgrade turns a subscriber member into a publisher stream after a verified
// claim: it leaves the fan-out set and moves the cursor forward. It reports
// false if the cohort already holds its maximum of publisher streams.
func (r *registry) upgrade(m *member, index uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := m.c
	if c.dead || m.role != roleSubscriber {
		return false
	}
	if len(c.pubs) >= r.s.opts.MaxPublisherStreams {
		return false
	}
	delete(c.subs, m)
	r.s.metrics.Subscribers.Dec()
	if c.extra == m {
		c.extra = nil
		m.claimTimer.Stop()
	}
	m.role = rolePublisher
	c.pubs[m] = struct{}{}
	r.s.metrics.Publishers.Inc()
	c.cursor = max(c.cursor, index)
	return true
}

// detach removes a member whose handler is returning. A cohort left with no
// stream is reclaimed at once (SWIP-74 allows it): its cursor is forgotten.
func (r *registry) detach(m *member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := m.c
	switch m.role {
	case roleSubscriber:
		if _, ok := c.subs[m]; ok {
			delete(c.subs, m)
			r.s.metrics.Subscribers.Dec()
		}
	case rolePublisher:
		if _, ok := c.pubs[m]; ok {
			delete(c.pubs, m)
			r.s.metrics.Publishers.Dec()
		}
	}
	if c.extra == m {
		c.extra = nil
	}
	if m.claimTimer != nil {
		m.claimTimer.Stop()
	}
	pk := m.peer.ByteString()
	if pc := r.peers[pk]; pc != nil {
		if pc[c.spec.key]--; pc[c.spec.key] <= 0 {
			delete(pc, c.spec.key)
		}
		if len(pc) == 0 {
			delete(r.peers, pk)
		}
	}
	if !c.dead && len(c.subs) == 0 && len(c.pubs) == 0 {
		r.forget(c)
	}
}

// forget removes a cohort from the registry; the caller holds r.mu.
func (r *registry) forget(c *cohort) {
	c.dead = true
	if c.timer != nil {
		c.timer.Stop()
	}
	if r.cohorts[c.spec.key] == c {
		delete(r.cohorts, c.spec.key)
		r.s.metrics.Cohorts.Dec()
	}
}

// reclaim forgets a cohort and resets every stream in it; the caller holds
// r.mu. Members detach themselves as their handlers return.
func (r *registry) reclaim(c *cohort, reason error) {
	r.forget(c)
	for m := range c.subs {
		m.kill(reason)
	}
	for m := range c.pubs {
		m.kill(reason)
	}
}

// armInactivity schedules the inactivity check of c after d.
func (r *registry) armInactivity(c *cohort, d time.Duration) {
	c.timer = time.AfterFunc(d, func() {
		if !r.s.track() {
			return
		}
		defer r.s.wg.Done()
		r.mu.Lock()
		defer r.mu.Unlock()
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

// claimDeadline disconnects the extra admin seat if it is still unclaimed.
func (r *registry) claimDeadline(m *member) {
	if !r.s.track() {
		return
	}
	defer r.s.wg.Done()
	r.mu.Lock()
	unclaimed := m.c.extra == m && m.role == roleSubscriber
	r.mu.Unlock()
	if unclaimed {
		r.s.count(m.c, CounterClaimTimeout)
		m.kill(errClaimTimeout)
	}
}

// accept re-checks the cursor under the lock (concurrent publisher streams
// are arbitrated here), moves it past n, and queues frame on every subscriber
// stream. A full queue resets that stream; nobody blocks.
func (r *registry) accept(m *member, n uint64, frame []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := m.c
	if c.dead || n < c.cursor {
		return false
	}
	c.cursor = n + 1
	c.accepted++
	c.lastAccept = time.Now()
	for sub := range c.subs {
		select {
		case sub.queue <- frame:
		default:
			r.s.count(c, CounterQueueReset)
			r.s.trace(Event{Kind: EventQueueReset, Cohort: c.spec.String(), Peer: sub.peer})
			sub.kill(errQueueFull)
		}
	}
	r.s.metrics.Delivered.Add(float64(len(c.subs)))
	return true
}

// cursorOf returns the cohort's cursor.
func (r *registry) cursorOf(c *cohort) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return c.cursor
}

// closeAll reclaims every cohort; later Joins are refused.
func (r *registry) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, c := range r.cohorts {
		r.reclaim(c, errServiceClosed)
	}
}

// count increments counter k of cohort c and its node-wide twin.
func (s *Service) count(c *cohort, k Counter) {
	c.counters[k].Add(1)
	s.metrics.byCounter(k).Inc()
	s.trace(Event{Kind: EventDrop, Cohort: c.spec.String(), Counter: k})
}

// CohortInfo describes a cohort brokered here.
type CohortInfo struct {
	Spec        *Spec
	Subscribers int
	Publishers  int
	Cursor      uint64
	Accepted    uint64
	Created     time.Time
	LastAccept  time.Time
	Counters    Counters
}

// Cohorts lists the cohorts this node brokers, ordered by canonical spec.
func (s *Service) Cohorts() []CohortInfo {
	r := s.reg
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]CohortInfo, 0, len(r.cohorts))
	for _, c := range r.cohorts {
		out = append(out, CohortInfo{
			Spec:        c.spec,
			Subscribers: len(c.subs),
			Publishers:  len(c.pubs),
			Cursor:      c.cursor,
			Accepted:    c.accepted,
			Created:     c.created,
			LastAccept:  c.lastAccept,
			Counters:    c.counters.snapshot(),
		})
	}
	slices.SortFunc(out, func(a, b CohortInfo) int { return bytes.Compare(a.Spec.canonical, b.Spec.canonical) })
	return out
}
