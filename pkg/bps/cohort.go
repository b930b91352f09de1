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
	members    map[*member]struct{} // every attached stream
	fanout     int                  // members counted against MaxStreamsPerCohort (extra seat excluded)
	claimed    int                  // claimed publisher streams (explicit authorship)
	extra      *member              // the extra admin seat, nil while free
	cursor     uint64               // FEED_TOPIC, explicit: lowest index accepted next
	seen       *window              // dedup bindings: recent chunk identifiers
	lastAccept time.Time
	created    time.Time
	accepted   uint64
	timer      *time.Timer // inactivity
	dead       bool
	counters   counters
}

// member is one stream attached to a cohort at this broker. Every member
// receives the cohort's deliveries except those bound to its own identity:
// a publisher never gets its own messages back (SWIP-74, SWIP-60). Under
// SWIP-74 every publisher stream is the admin's, so publisher streams
// receive nothing there.
type member struct {
	c       *cohort
	peer    swarm.Address
	stream  p2p.Stream
	addr    []byte // declared (or claimed) address, nil for a plain subscriber
	role    role
	counted bool          // counts against the fan-out bound
	queue   chan []byte   // encoded frames for the writer
	quit    chan struct{} // closed by kill
	once    sync.Once
	reason  error // why kill was called; read after quit is closed

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
// a verified claim in the Join (a claimed publisher only).
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

	claimed := ro == rolePublisher && sp.explicit()
	m := &member{peer: peer, stream: stream, addr: addr, role: ro, counted: !claimed,
		quit: make(chan struct{}), queue: make(chan []byte, o.QueueLen)}
	extra := false
	if c != nil {
		switch {
		case claimed:
			if c.claimed >= o.MaxPublisherStreams {
				return nil, pb.Status_FULL
			}
		case c.fanout >= o.MaxStreamsPerCohort:
			// One extra seat for a Join declaring the admin while no
			// publisher stream exists.
			if !sp.explicit() || addr == nil || !sp.mayPublish(addr) || c.claimed > 0 || c.extra != nil {
				return nil, pb.Status_FULL
			}
			extra = true
		}
	}

	if c == nil {
		now := time.Now()
		c = &cohort{spec: sp, members: make(map[*member]struct{}), created: now, lastAccept: now}
		if sp.Binding != pb.TopicBinding_FEED_TOPIC {
			c.seen = newWindow(o.DedupWindow)
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

	c.members[m] = struct{}{}
	r.gauge(m, 1)
	switch {
	case claimed:
		c.claimed++
		c.cursor = max(c.cursor, claimIndex)
	case extra:
		m.counted = false
		c.extra = m
		m.claimTimer = time.AfterFunc(o.ClaimDeadline, func() { r.claimDeadline(m) })
	default:
		c.fanout++
	}
	return m, pb.Status_OK
}

// gauge moves the stream gauges for m by d.
func (r *registry) gauge(m *member, d float64) {
	if m.role == rolePublisher {
		r.s.metrics.Publishers.Add(d)
	} else {
		r.s.metrics.Subscribers.Add(d)
	}
}

// upgrade turns a subscriber member into a claimed publisher stream after a
// verified claim: it leaves the fan-out count and moves the cursor forward.
// It reports false if the cohort is gone or holds its maximum of publisher
// streams.
func (r *registry) upgrade(m *member, index uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := m.c
	if c.dead || m.role != roleSubscriber || c.claimed >= r.s.opts.MaxPublisherStreams {
		return false
	}
	r.gauge(m, -1)
	if m.counted {
		c.fanout--
		m.counted = false
	}
	if c.extra == m {
		c.extra = nil
		m.claimTimer.Stop()
	}
	m.role = rolePublisher
	r.gauge(m, 1)
	c.claimed++
	c.cursor = max(c.cursor, index)
	return true
}

// detach removes a member whose handler is returning. A cohort left with no
// stream is reclaimed at once (SWIP-74 allows it): its cursor is forgotten.
func (r *registry) detach(m *member) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := m.c
	if _, ok := c.members[m]; ok {
		delete(c.members, m)
		r.gauge(m, -1)
		switch {
		case m.counted:
			c.fanout--
		case m.role == rolePublisher && c.spec.explicit():
			c.claimed--
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
	if !c.dead && len(c.members) == 0 {
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
	for m := range c.members {
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

// accept admits a validated publication under the lock — the cursor or the
// dedup window arbitrates concurrent publisher streams here — and queues frame
// on every member not bound to the publication's owner. A full queue resets
// that stream; nobody blocks.
func (r *registry) accept(c *cohort, pub publication, frame []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.dead {
		return false
	}
	if c.seen != nil {
		if !c.seen.add(pub.dedup) {
			return false
		}
	} else {
		if pub.index < c.cursor {
			return false
		}
		c.cursor = pub.index + 1
	}
	c.accepted++
	c.lastAccept = time.Now()
	delivered := 0
	for m := range c.members {
		if m.role == rolePublisher && pub.owner != nil && bytes.Equal(m.addr, pub.owner) {
			continue
		}
		select {
		case m.queue <- frame:
			delivered++
		default:
			r.s.count(c, CounterQueueReset)
			r.s.trace(Event{Kind: EventQueueReset, Cohort: c.spec.String(), Peer: m.peer})
			m.kill(errQueueFull)
		}
	}
	r.s.metrics.Delivered.Add(float64(delivered))
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
		pubs := 0
		for m := range c.members {
			if m.role == rolePublisher {
				pubs++
			}
		}
		out = append(out, CohortInfo{
			Spec:        c.spec,
			Subscribers: len(c.members) - pubs,
			Publishers:  pubs,
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
