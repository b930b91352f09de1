// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"golang.org/x/time/rate"
)

// Reasons a broker ends a member stream from outside its handler.
var (
	errReclaimed     = errors.New("cohort reclaimed for inactivity")
	errQueueFull     = errors.New("outbound queue full")
	errClaimTimeout  = errors.New("stream did not claim within the claim deadline")
	errServiceClosed = errors.New("service closed")
	errWriteTimeout  = errors.New("write timed out")
	errEndGrace      = errors.New("peer kept its side open after the end of stream")
	errRelayGone     = errors.New("this relay's subscription ended")
)

// role is what a stream is in its cohort.
type role int

const (
	roleSubscriber role = iota // may send a Claim (explicit authorship)
	rolePublisher              // claimed, or declared under ALL or implicit authorship
)

// cohort is the broker half of this node's place in one live cohort: its
// children, the authority and cursors it judges publications by, and its
// fan-out. Every frame a stream sends up enters through ingest. Its role
// (parentRole, below) is the root's, where the node brokers the cohort, or a
// relay's, fed by a subscription (relay.go); the registry admits its
// streams.
type cohort struct {
	r    *registry
	spec *Spec
	role parentRole // set when made, never changed
	mu   sync.Mutex // guards the fields below but counters; after registry.mu

	children map[*member]struct{} // every attached stream
	fanout   int                  // members counted against MaxStreamsPerCohort (extra seats excluded)
	claimed  map[string]int       // claimed publisher streams per address (explicit authorship)
	nclaim   int                  // sum of claimed
	extras   map[string]*member   // extra seats, one per absent legitimate publisher
	cursors  map[string]uint64    // FEED_TOPIC, explicit: lowest index accepted next, per publisher feed
	seen     *Window              // dedup bindings: recent chunk identifiers
	owners   *lru[*rate.Limiter]  // anyone authors: a token bucket per owner (rate.go); nil otherwise

	svc    ServiceFeed // the admin's service feed: roster, next index, end
	latest []byte      // the latest service SOC, encoded: every new stream's first delivery
	// svcFrom is the peer whose stream carried the latest service SOC: a
	// forgotten cohort's feed is remembered on its account (heldFeeds).
	svcFrom string

	lastAccept time.Time
	created    time.Time
	accepted   uint64
	timer      *time.Timer // inactivity
	dead       bool
	counters   counters

	probes     map[uint64]*probeWait // open probes by nonce
	doneProbes []uint64              // recently closed probe nonces
	pool       probePool             // candidates probes found and no joiner took yet (probe.go)
	gone       chan struct{}         // closed when the last child left, if a graceful leave waits for it
	recent     growRing[recentFrame] // the last deliveries fanned out, for a child's replay (replay.go)
}

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

var _ parentRole = rootRole{}

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
	if !c.r.accept(c, from.peer, pub, encodeFrame(&pb.Message{Address: msg.Address, Data: msg.Data})) {
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
		c.r.feeds.put(c.spec.key, string(c.spec.Admin), heldFeed{svc: c.svc.clone(), latest: c.latest, from: c.svcFrom})
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

// member is one stream attached to a cohort at this broker: a child of the
// node in that cohort. Every member receives the cohort's deliveries except
// those bound to its own identity: a publisher never gets its own messages
// back (SWIP-74, SWIP-60). Under SWIP-74 every publisher stream is the
// admin's, so publisher streams receive nothing there. A silent member
// (closed cohort, not yet claimed) receives nothing at all.
type member struct {
	peerStream
	c         *cohort
	declared  []byte // Join.addr, nil if none; never written after attach
	challenge []byte // issued in the Ack to a stream that declared an address; nil if none
	// guarded by the cohort's mu; the member's reader reads addr unlocked
	// once isPub is set, after which neither changes
	addr      []byte // declared or claimed address, nil for a plain subscriber
	role      role
	counted   bool      // counts against the fan-out bound
	silent    bool      // closed cohort: receives nothing until it claims
	revokedAt uint64    // service index + 1 of the roster that revoked addr, 0 if none
	held      *pb.Claim // a verified claim by an address not (yet) a publisher: taken when a roster names it
	svcAt     uint64    // the cohort's service cursor when the stream attached
	isPub     atomic.Bool
	acked     atomic.Bool // the Ack stated a depth to it (Subscription.mayAttachUnder)
	attests   bool        // Join and Ack both set attests; never written after attach
	lz        *lazyOut    // lazy push, if the stream negotiated it (lazy.go)

	claimTimer *time.Timer // the deadline of an extra seat or a silent stream
	// reader goroutine only
	invalid int           // invalid publications so far
	rate    *rate.Limiter // anyone authors: what this publisher stream publishes itself (rate.go)
	failed  int           // relayed publications that failed this second
	failAt  time.Time     // the second failed counts in
	owed    int           // probes that closed before it answered: late answers it may send; under c.mu
	pending int           // verified claims not taken: not (yet) rostered, or redundant
	carries [][]byte      // owners whose forwarded claims came up this stream (attest.go)
}

// ackDepth is the depth this node states in the Ack to m, its role's: 0 at
// the root, the relay subscription's rank at a relay.
func (c *cohort) ackDepth(m *member) uint32 { return c.role.ackDepth(m) }

// nodeDepth is this node's depth in c's cohort, its role's.
func (c *cohort) nodeDepth() uint32 { return c.role.depth() }

// isPublisherLocked reports whether owner may publish under explicit
// authorship: the admin, or named by the roster in force.
func (c *cohort) isPublisherLocked(owner []byte) bool {
	return c.svc.MayPublish(c.spec, owner)
}

// moveCursor moves a claimed publisher's feed cursor to at least index; the
// caller holds c.mu.
func (c *cohort) moveCursor(addr []byte, index uint64) {
	if c.spec.Binding == pb.TopicBinding_FEED_TOPIC {
		c.cursors[string(addr)] = max(c.cursors[string(addr)], index)
	}
}

// accept admits a validated publication under the lock — the per-feed cursor
// or the dedup window arbitrates concurrent publisher streams here; a service
// SOC moves the service cursor and the roster — and queues frame on every
// member that is neither silent nor bound to the publication's owner. A full
// queue resets that stream; nobody blocks.
func (r *registry) accept(c *cohort, from swarm.Address, pub publication, frame []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead || c.svc.Ended() {
		return false
	}
	var svc uint64
	switch {
	case pub.service != nil:
		var ok bool
		if svc, ok = r.serviceLocked(c, pub, frame); !ok {
			return false
		}
		c.svcFrom = from.ByteString()
	case c.seen != nil:
		if !c.seen.Add(pub.dedup) {
			return false
		}
	default:
		o := string(pub.owner)
		if pub.index < c.cursors[o] {
			return false
		}
		c.cursors[o] = pub.index + 1
	}
	r.deliverLocked(c, pub, frame, svc)
	return true
}

// serviceLocked takes a service SOC at c: past the service cursor, it moves
// the cursor, becomes every new stream's first delivery and is applied
// (roster, end of stream); it returns the service index + 1 its frames
// carry, and false for one at or below the cursor. The caller holds c.mu.
func (r *registry) serviceLocked(c *cohort, pub publication, frame []byte) (uint64, bool) {
	if c.svc.Apply(pub.service) == Stale {
		return 0, false
	}
	c.latest = frame
	r.applyService(c, pub.service, c.svc.Next())
	return c.svc.Next(), true
}

// deliverLocked counts a publication c took and fans it out; the caller
// holds c.mu.
func (r *registry) deliverLocked(c *cohort, pub publication, frame []byte, svc uint64) {
	c.accepted++
	c.lastAccept = time.Now()
	c.rememberLocked(frame, svc, c.lastAccept)
	r.fanOut(c, pub, frame, svc)
}

// fanOut queues frame on every member that is neither silent nor a
// publisher stream bound to the publication's owner; a full queue resets
// that stream, and nobody blocks. The caller holds c.mu.
func (r *registry) fanOut(c *cohort, pub publication, frame []byte, svc uint64) {
	delivered := 0
	var ann announcement // lazy push: built for the first lazy stream (lazy.go)
	for m := range c.children {
		// After END_OF_STREAM every stream closes, those that do not
		// receive it included.
		f := outFrame{b: frame, svc: svc, end: c.svc.Ended()}
		if m.silent || (m.role == rolePublisher && bytes.Equal(m.addr, pub.owner)) || m.outOfClosed(svc) {
			if !f.end {
				continue
			}
			f.b, f.svc = nil, 0
		}
		if m.lz != nil && f.b != nil && svc == 0 && !f.end {
			f = m.lz.out(f, &ann)
		}
		if r.s.offerOrReset(c, m, f) && f.b != nil && f.kind != kindAnnounce {
			delivered++
		}
	}
	r.s.metrics.Delivered.Add(float64(delivered))
}

// offerOrReset queues f on member m of c without blocking; a full queue
// resets m's stream (queue_reset) and reports false. A stream already
// reset stays among the children until its handler returns, and whatever
// finds it full meanwhile does not count it again. The caller holds c.mu.
func (s *Service) offerOrReset(c *cohort, m *member, f outFrame) bool {
	if m.offer(f) {
		return true
	}
	if m.kill(errQueueFull) {
		s.count(c, CounterQueueReset)
		s.trace(Event{Kind: EventQueueReset, Cohort: c.spec.String(), Peer: m.peer})
	}
	return false
}

// ingest is the one way a frame from a stream enters the cohort at this
// node. A claim upgrades the stream it came on; a forwarded claim lets a
// child's stream carry its owner's publications (attest.go); a publication
// goes to publication. It runs on from's reader goroutine and returns a
// *violation to end from's stream; any other frame kind has no business
// travelling up.
func (c *cohort) ingest(f *pb.Frame, from *member) error {
	s := c.r.s
	switch k := f.Kind.(type) {
	case *pb.Frame_Claim:
		if !c.spec.Explicit() {
			s.count(c, CounterWrongStream)
			return violationf("a claim where publishing takes none")
		}
		if k.Claim.Challenge != nil || k.Claim.Broker != nil {
			return c.attestation(k.Claim, from)
		}
		return s.takeClaim(from, k.Claim)
	case *pb.Frame_Message:
		return c.publication(k.Message, from)
	case *pb.Frame_Candidates:
		return c.candidates(from, k.Candidates)
	default:
		s.count(c, CounterWrongStream)
		return violationf("a %T frame travelled up", f.Kind)
	}
}

// publication is ingest's path for a publication: sent on a publisher
// stream, by its own address, or carried up a child's subscriber stream
// (relayedAuthor, relay.go). It is validated against the authority of the
// node's role and handed to the role (publish: the root accepts and fans
// it out, a relay forwards it up); what fails is counted (refused).
func (c *cohort) publication(msg *pb.Message, from *member) error {
	relayed := !from.isPub.Load()
	addr := from.addr // not written again once isPub is set
	if relayed {
		var ok bool
		var err error
		if addr, ok, err = c.relayedAuthor(msg, from); !ok {
			return err
		}
	}
	pub, v := check(c.spec, msg, addr, c.role.authority())
	if v == accepted && c.rateCut(pub, from, relayed) {
		c.r.s.count(c, CounterRateLimited)
		return nil
	}
	if v == accepted {
		v = c.role.publish(pub, msg, from)
	}
	switch v {
	case accepted:
		return nil
	case retransmit:
		c.r.s.count(c, CounterRetransmit)
		return nil
	}
	return c.refused(v, from, addr, relayed)
}

// refused counts a publication that failed verdict v. A relayed one is
// dropped, never held against the child, but spends its check budget
// (relay.go); a stream that keeps publishing what fails — or publishes
// after the roster revoking it was written to it — is a violation.
func (c *cohort) refused(v verdict, from *member, addr []byte, relayed bool) error {
	s := c.r.s
	s.count(c, v.counter())
	if relayed {
		from.failed++
		return nil
	}
	if v == wrongOwner {
		// A revoked publisher is tolerated until the roster revoking it
		// has been written to its stream; after that it is a violation.
		if revoked, told := c.r.revoked(from); told {
			return violationf("publication after the roster revoking %x", addr)
		} else if revoked {
			return nil
		}
	}
	if from.invalid++; from.invalid >= s.opts.MaxInvalidFrames {
		return violationf("%d invalid publications", from.invalid)
	}
	return nil
}

// applyService acts on a service message c.svc took: a ROSTER marks the
// streams of revoked publishers and takes the claims held for the
// addresses it names; END_OF_STREAM has ended the cohort (accept closes its
// streams, end forgets it). The caller holds c.mu.
func (r *registry) applyService(c *cohort, svc *pb.ServiceMessage, told uint64) {
	if svc.Kind == pb.ServiceKind_END_OF_STREAM || !c.spec.Explicit() {
		return // under ALL a roster decides nothing
	}
	for m := range c.children {
		if m.role == rolePublisher && !c.isPublisherLocked(m.addr) && m.revokedAt == 0 {
			m.revokedAt = told
			if c.spec.Closed {
				// Told, then silent: it must be named again or leave.
				m.stopClaimTimer()
				m.claimTimer = time.AfterFunc(r.s.opts.ClaimDeadline, func() { r.claimDeadline(m) })
			}
		} else if c.isPublisherLocked(m.addr) {
			m.revokedAt = 0
			if m.role == rolePublisher {
				m.stopClaimTimer()
			}
		}
	}
	for o := range c.cursors {
		if !c.isPublisherLocked([]byte(o)) {
			delete(c.cursors, o)
		}
	}
	// A claim that reached the broker before this roster is taken now,
	// whichever came first; the fan-out of this roster that follows is the
	// upgraded stream's first delivery.
	for m := range c.children {
		if h := m.held; h != nil && m.role == roleSubscriber && c.isPublisherLocked(h.Addr) {
			if r.upgradeLocked(m, h, false) == upgraded {
				r.s.trace(Event{Kind: EventClaim, Cohort: c.spec.String(), Peer: m.peer, Index: h.Index})
			}
		}
	}
}

// stopClaimTimer stops m's claim deadline, if armed; the caller holds
// c.mu.
func (m *member) stopClaimTimer() {
	if m.claimTimer != nil {
		m.claimTimer.Stop()
		m.claimTimer = nil
	}
}

// outOfClosed reports whether m is a publisher stream revoked in a closed
// cohort, for which a frame carrying service index + 1 svc (0: content) is
// no longer meant: it is told the roster revoking it, then nothing until a
// roster names it again. The caller holds c.mu.
func (m *member) outOfClosed(svc uint64) bool {
	return m.c.spec.Closed && m.revokedAt != 0 && svc != m.revokedAt
}

// revoked reports whether m's address was revoked, and whether the roster
// revoking it has been written to m's stream (after which a publication is a
// violation, before it is tolerated).
func (r *registry) revoked(m *member) (revoked, told bool) {
	m.c.mu.Lock()
	at := m.revokedAt
	m.c.mu.Unlock()
	return at > 0, at > 0 && m.told.Load() >= at
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
	Cursor      uint64            // FEED_TOPIC: the admin's feed cursor
	Cursors     map[string]uint64 // FEED_TOPIC: per publisher feed, keyed by hex address
	Roster      [][]byte          // the publishers the roster in force names (admin excluded)
	ServiceNext uint64            // lowest service index accepted next
	Ended       bool              // END_OF_STREAM accepted
	Accepted    uint64
	Created     time.Time
	LastAccept  time.Time
	Counters    Counters
}

// info describes c, under its lock.
func (c *cohort) info() CohortInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	pubs := 0
	for m := range c.children {
		if m.role == rolePublisher {
			pubs++
		}
	}
	info := CohortInfo{
		Spec:        c.spec,
		Subscribers: len(c.children) - pubs,
		Publishers:  pubs,
		Cursor:      c.cursors[string(c.spec.Admin)],
		Cursors:     make(map[string]uint64, len(c.cursors)),
		ServiceNext: c.svc.Next(),
		Ended:       c.svc.Ended(),
		Accepted:    c.accepted,
		Created:     c.created,
		LastAccept:  c.lastAccept,
		Counters:    c.counters.snapshot(),
	}
	for o, n := range c.cursors {
		info.Cursors[swarm.NewAddress([]byte(o)).String()] = n
	}
	if c.spec.Explicit() {
		info.Roster = c.svc.Roster()
	}
	return info
}
