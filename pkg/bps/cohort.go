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
	errSuperseded    = errors.New("a newer stream claimed for the same address")
	errReplaced      = errors.New("a newer pending stream joined for the same address")
	errUnnamed       = errors.New("a roster no longer names the pending stream's address")
	errChallenges    = errors.New("too many frames under another challenge")
)

// role is what a stream is in its cohort.
type role int

const (
	roleSpectator role = iota // receives every delivery (silent: none), may send nothing until a roster names it
	rolePending               // explicit authorship, a legitimate publisher's address: outside the bound until its first valid frame
	rolePublisher             // claimed, or declared under ALL or implicit authorship
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
	seq      uint64               // attaches so far: each member's seq
	fanout   int                  // members counted against MaxStreamsPerCohort (extra seats excluded)
	claimed  map[string]int       // claimed publisher streams per address (explicit authorship)
	nclaim   int                  // sum of claimed
	extras   map[string]*member   // pending streams past the bound, one per address
	cursors  map[string]uint64    // FEED_TOPIC, explicit: lowest index accepted next, per publisher feed
	seen     *Window              // dedup bindings: recent chunk identifiers
	owners   *lru[*rate.Limiter]  // anyone authors: a token bucket per owner (rate.go); nil otherwise

	svc    ServiceFeed // the admin's service feed: roster, next index, end
	latest []byte      // the latest ROSTER frame, encoded: every new stream's first delivery
	eos    []byte      // the EOS frame, encoded, once the admin ended the cohort
	// svcFrom is the peer whose stream carried the latest service SOC: a
	// forgotten cohort's feed is remembered on its account (heldFeeds).
	svcFrom string

	lastAccept time.Time
	created    time.Time
	accepted   uint64
	timer      *time.Timer // inactivity
	dead       bool
	counters   counters

	issued     map[string]rootLease  // the root's: challenges it leased in its tree (lease.go)
	probes     map[uint64]*probeWait // open probes by nonce
	doneProbes []uint64              // recently closed probe nonces
	pool       probePool             // candidates probes found and no joiner took yet (probe.go)
	gone       chan struct{}         // closed when the last child left, if a graceful leave waits for it
	recent     growRing[recentFrame] // the last deliveries fanned out, for a child's replay (replay.go)
	beat       rootBeat              // the root's heartbeat (heartbeat.go)
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
	publish(pub publication, b *pb.Broadcast, from *member) verdict
	// limit is how many counted children the node takes; extraSeats
	// whether a legitimate publisher may still take an extra seat past it
	// (SWIP-74's, the root's only).
	limit(o *Options) int
	extraSeats() bool
	// depth is this node's depth in the cohort; ackDepth the depth it
	// states in the Ack to child stream m.
	depth() uint32
	ackDepth(m *member) uint32
	// lease answers a child's Lease (lease.go): the root draws the
	// challenge, a relay asks its parents.
	lease(from *member, l *pb.Lease)
	// route and release pass a child's Route and Release on: the root
	// checks and records, a relay records and passes them up.
	route(from *member, r *pb.Route)
	release(from *member, challenges [][]byte)
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
func (r rootRole) publish(pub publication, b *pb.Broadcast, from *member) verdict {
	c := r.c
	s := c.r.s
	if pub.kind == pb.Kind_AUTH {
		c.activity() // AUTH: activity, nothing else (Rev 8)
		s.trace(Event{Kind: EventActivity, Cohort: c.spec.String(), Peer: from.peer})
		return accepted
	}
	if !c.r.accept(c, from.peer, pub, encodeFrame(b)) {
		return retransmit // a duplicate, or another publisher stream got there first
	}
	s.metrics.Accepted.Inc()
	s.trace(Event{Kind: EventAccept, Cohort: c.spec.String(), Peer: from.peer, Index: pub.index, Service: pub.service != nil})
	if pub.service.Ends() {
		c.r.end(c)
	}
	return accepted
}

// activity counts an AUTH as activity for the inactivity deadline.
func (c *cohort) activity() {
	c.mu.Lock()
	c.lastAccept = time.Now()
	c.mu.Unlock()
}

func (r rootRole) limit(o *Options) int  { return o.MaxStreamsPerCohort }
func (rootRole) extraSeats() bool        { return true }
func (rootRole) depth() uint32           { return 0 }
func (rootRole) ackDepth(*member) uint32 { return 0 }
func (rootRole) holdsJoins() bool        { return true }
func (r rootRole) position(children []swarm.Address, streams int) (Position, bool) {
	return Position{Spec: r.c.spec, Parents: []swarm.Address{}, Children: children, Streams: streams}, true
}

// forgotten keeps the root's service feed, so that a cohort made again
// for the same spec takes it back (registry.feeds).
func (r rootRole) forgotten() {
	c := r.c
	c.beat.stop()
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
	declared  []byte // Join.addr (20 bytes; the zero address for a stream that never publishes); never written after attach
	challenge []byte // issued in the Ack (a root's lease at a relay); never written after attach
	listen    bool   // Join.listen, or the zero address: the stream never publishes
	// guarded by the cohort's mu; the member's reader reads addr unlocked
	// once isPub is set, after which neither changes
	addr      []byte // declared or claimed address, nil for a plain subscriber
	role      role
	seq       uint64 // order of attach in the cohort: the oldest of an address's streams is reset first
	counted   bool   // counts against the fan-out bound
	silent    bool   // closed cohort: receives nothing but a roster naming it until it claims
	revokedAt uint64 // service index + 1 of the roster that revoked addr, 0 if none
	svcAt     uint64 // the cohort's service cursor when the stream attached
	isPub     atomic.Bool
	acked     atomic.Bool // the Ack stated a depth to it (Subscription.mayAttachUnder)
	lz        *lazyOut    // lazy push, if the stream negotiated it (lazy.go)
	leases    leaseTable  // challenges leased for publisher streams below this child, and their addresses (lease.go); under c.mu

	claimTimer *time.Timer // the deadline of an extra seat or a silent stream
	// reader goroutine only
	invalid int           // invalid publications so far
	rate    *rate.Limiter // anyone authors: what this publisher stream publishes itself (rate.go)
	failed  int           // relayed publications that failed this second
	failAt  time.Time     // the second failed counts in
	owed    int           // probes that closed before it answered: late answers it may send; under c.mu
	foreign int           // frames under another challenge so far
	authed  []byte        // the AUTH chunk this stream's claim or last heartbeat validated: a repeat is taken unchecked
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

// accept admits a validated publication under the lock — the per-publisher
// cursor or the dedup window arbitrates concurrent publisher streams here; a
// ROSTER moves the roster cursor and the roster, an EOS ends the cohort —
// and queues frame on every member meant to receive it (fanOut). A full
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
	case pub.feed:
		o := string(pub.owner)
		n, known := c.cursors[o]
		if pub.index < n {
			return false
		}
		if !known && !c.spec.Explicit() && len(c.cursors) >= maxAllCursors {
			for k := range c.cursors { // an arbitrary one: its cursor restarts (rev 14)
				delete(c.cursors, k)
				break
			}
		}
		c.cursors[o] = pub.index + 1
	case c.seen != nil:
		if !c.seen.Add(pub.dedup) {
			return false
		}
	}
	r.deliverLocked(c, pub, frame, svc)
	return true
}

// maxAllCursors bounds the per-publisher cursors of a cohort where anyone
// authors (ALL) or no admin names the publishers (implicit FEED_TOPIC):
// past it one is forgotten, and its publisher's cursor restarts, which the
// text allows; a subscriber's own cursor still judges its updates.
const maxAllCursors = 1024

// serviceLocked takes a ROSTER or EOS at c: a ROSTER past the roster
// cursor moves it, becomes every new stream's first delivery and is
// applied; an EOS ends the cohort. It returns the service index + 1 the
// frames carry (0 for an EOS, which every stream receives), and false for a
// stale one. The caller holds c.mu.
func (r *registry) serviceLocked(c *cohort, pub publication, frame []byte) (uint64, bool) {
	if c.svc.Apply(pub.service) == Stale {
		return 0, false
	}
	if pub.service.Ends() {
		c.eos = frame
		return 0, true
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

// fanOut queues frame on every member meant to receive it: a stream of the
// fan-out set (a spectator, a publisher stream) that is not bound to the
// publication's owner, and — for a roster — a pending or silent stream
// whose address it names (its cue to claim). After an EOS every stream
// closes, those that do not receive it included. A full queue resets that
// stream, and nobody blocks. The caller holds c.mu.
func (r *registry) fanOut(c *cohort, pub publication, frame []byte, svc uint64) {
	delivered := 0
	var ann announcement // lazy push: built for the first lazy stream (lazy.go)
	end := c.svc.Ended()
	for m := range c.children {
		f := outFrame{b: frame, svc: svc, end: end}
		if !m.receives(pub, svc) {
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

// receives reports whether m is sent a publication carrying service index
// + 1 svc (0: content or the end). The caller holds c.mu.
func (m *member) receives(pub publication, svc uint64) bool {
	c := m.c
	switch {
	case pub.service.Ends():
		// Every stream of the fan-out set, but the admin's own publisher
		// streams: an EOS is bound to the admin's address (its owner
		// sends it; Publisher.read delivers it to itself on the close).
		return m.role != rolePending && !m.silent && !(m.role == rolePublisher && bytes.Equal(m.addr, pub.owner))
	case m.role == rolePending || m.silent:
		// Nothing but a roster that names its address.
		return svc != 0 && c.isPublisherLocked(m.declared)
	case m.role == rolePublisher && bytes.Equal(m.addr, pub.owner):
		return false // a publisher never gets its own back; nor the admin its rosters
	case svc != 0 && bytes.Equal(m.declared, c.spec.Admin):
		return false
	}
	return !m.outOfClosed(svc)
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
// node. A Broadcast goes to publication; a Lease, Route or Release from a
// multihop child to the role (lease.go); it runs on from's reader goroutine
// and returns a *violation to end from's stream; any other frame kind has
// no business travelling up.
func (c *cohort) ingest(f *pb.Frame, from *member) error {
	s := c.r.s
	switch k := f.Kind.(type) {
	case *pb.Frame_Broadcast:
		return c.publication(k.Broadcast, from)
	case *pb.Frame_Candidates:
		return c.candidates(from, k.Candidates)
	case *pb.Frame_Lease:
		return c.takeLease(from, k.Lease)
	case *pb.Frame_Route:
		return c.takeRoute(from, k.Route)
	case *pb.Frame_Release:
		return c.takeRelease(from, k.Release)
	default:
		s.count(c, CounterWrongStream)
		return violationf("a %T frame travelled up", f.Kind)
	}
}

// maxForeign is how many frames under another challenge than its own a
// stream may send before it is reset, without penalty (Rev 8: "MAY
// reset"): they cost no signature, and a conforming publisher sends at
// most what it had queued for its previous stream.
const maxForeign = 64

// publication is ingest's path for a Broadcast (docs/protocol.md,
// "Validation at the broker"): sent on a publisher stream by its own
// address; on a pending stream (or a spectator the roster names), whose
// first valid frame is its claim; or carried up a child's stream under a
// challenge leased for a publisher below it (lease.go). It is validated
// against the authority of the node's role and handed to the role
// (publish: the root accepts and fans it out, a relay forwards it up);
// what fails is counted (refused).
func (c *cohort) publication(b *pb.Broadcast, from *member) error {
	snd, relayed, err := c.senderOf(b, from)
	if snd == nil {
		return err
	}
	if !snd.pending && !relayed && b.Kind == pb.Kind_AUTH && bytes.Equal(b.Soc, from.authed) {
		c.role.publish(publication{kind: pb.Kind_AUTH}, b, from) // a heartbeat: byte for byte the AUTH validated before
		return nil
	}
	pub, v := check(c.spec, b, snd, c.role.authority())
	if snd.pending && (v == accepted || v == retransmit || v == invalidRoster) {
		// The first valid frame is the claim (Rev 8): it upgrades the
		// stream; there is no reply. A ROSTER valid at the admin's
		// address whose payload is not a Roster claims too (rev 14),
		// then is dropped and counted.
		if !c.r.claim(from) {
			return errClaimRefused
		}
		c.r.s.trace(Event{Kind: EventClaim, Cohort: c.spec.String(), Peer: from.peer, Index: pub.index})
	}
	if v == accepted && pub.kind == pb.Kind_AUTH && !relayed {
		from.authed = bytes.Clone(b.Soc)
	}
	if v == accepted && c.rateCut(pub, from, relayed) {
		c.r.s.count(c, CounterRateLimited)
		return nil
	}
	if v == accepted {
		v = c.role.publish(pub, b, from)
	}
	switch v {
	case accepted:
		return nil
	case retransmit:
		c.r.s.count(c, CounterRetransmit)
		return nil
	}
	return c.refused(v, from, relayed)
}

// errClaimRefused ends a pending stream whose valid claim the cohort could
// not take: it ended meanwhile, or the roster dropped the address.
var errClaimRefused = errors.New("claim not taken: the cohort ended or the address may no longer publish")

// senderOf is who a Broadcast on from is judged as sent by: the stream's
// own address and challenge (a publisher stream; a pending stream, or a
// spectator the roster names, claiming), or — a multihop child's stream
// carrying a publication up — the address the challenge was leased for
// below it (relayed). A stream that may send nothing gets a violation; a
// revoked publisher within its grace and a relayed frame under no lease
// of that stream are dropped and counted.
func (c *cohort) senderOf(b *pb.Broadcast, from *member) (_ *sender, relayed bool, _ error) {
	s := c.r.s
	if from.isPub.Load() {
		if revoked, told := c.r.revoked(from); revoked {
			if told {
				s.count(c, CounterWrongStream)
				return nil, false, violationf("a frame after the grace of the roster revoking %x", from.addr)
			}
			s.count(c, CounterRevoked)
			return nil, false, nil
		}
		return &sender{addr: from.addr, challenge: from.challenge, admin: bytes.Equal(from.addr, c.spec.Admin)}, false, nil
	}
	if from.codec == codecEnvelope && !bytes.Equal(b.Challenge, from.challenge) {
		if addr := c.leasedBelow(from, b.Challenge); addr != nil {
			if !from.mayCheckRelayed(time.Now()) {
				s.metrics.Unchecked.Inc()
				return nil, false, nil
			}
			return &sender{addr: addr, challenge: b.Challenge, admin: bytes.Equal(addr, c.spec.Admin)}, true, nil
		}
	}
	if c.mayClaim(from) {
		if !bytes.Equal(b.Challenge, from.challenge) {
			s.count(c, CounterWrongChallenge)
			if from.foreign++; from.foreign > maxForeign {
				return nil, false, errChallenges
			}
			return nil, false, nil
		}
		return &sender{addr: from.declared, challenge: from.challenge, admin: bytes.Equal(from.declared, c.spec.Admin), pending: true}, false, nil
	}
	if from.codec == codecEnvelope && len(b.Challenge) == challengeSize {
		// A child relaying under a challenge it holds no lease for here:
		// dropped before any signature, counted against the stream.
		s.count(c, CounterWrongChallenge)
		if from.foreign++; from.foreign > maxForeign {
			return nil, false, errChallenges
		}
		return nil, false, nil
	}
	s.count(c, CounterWrongStream)
	return nil, false, violationf("a frame from a stream that may send none")
}

// mayClaim reports whether from, not a publisher stream, may claim with
// its next valid frame: a pending stream, or a spectator or silent stream
// whose declared address the roster in force names (explicit authorship).
func (c *cohort) mayClaim(from *member) bool {
	if from.listen || !c.spec.Explicit() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return from.role == rolePending || c.isPublisherLocked(from.declared)
}

// refused counts a publication that failed verdict v. A relayed one is
// dropped, never held against the child, but spends its check budget
// (relay.go); a frame that breaks the protocol (an invalid chunk, a kind
// the stream may not send) is a violation; a stream that keeps sending
// what is dropped is one too.
func (c *cohort) refused(v verdict, from *member, relayed bool) error {
	s := c.r.s
	s.count(c, v.counter())
	if relayed {
		from.failed++
		return nil
	}
	if v.violates() {
		return violationf("%s", v.counter())
	}
	if v == unknownKind {
		// What a later SWIP's kind looks like here: dropped and counted,
		// "not a violation" (Rev 8), so never held against the stream,
		// however many come; it costs no signature check.
		return nil
	}
	if v == wrongChallenge {
		if from.foreign++; from.foreign > maxForeign {
			return errChallenges
		}
		return nil
	}
	if from.invalid++; from.invalid >= s.opts.MaxInvalidFrames {
		return violationf("%d invalid publications", from.invalid)
	}
	return nil
}

// applyService acts on a roster c.svc took: the streams of addresses it
// drops are revoked (tolerated until told and the grace passed), pending
// streams of addresses it drops are reset without penalty, cursors of
// addresses it drops are forgotten. The caller holds c.mu.
func (r *registry) applyService(c *cohort, svc *ServiceMsg, told uint64) {
	if !c.spec.Explicit() {
		return // under ALL a roster decides nothing
	}
	for m := range c.children {
		switch {
		case m.role == rolePending && !c.isPublisherLocked(m.declared):
			m.kill(errUnnamed)
		case m.role == rolePublisher && !c.isPublisherLocked(m.addr) && m.revokedAt == 0:
			m.revokedAt = told
			if c.spec.Closed {
				// Told, then silent: it must be named again or leave.
				m.stopClaimTimer()
				m.claimTimer = time.AfterFunc(r.s.opts.ClaimDeadline+r.s.opts.RevocationGrace, func() { r.claimDeadline(m) })
			}
		case m.role == rolePublisher && c.isPublisherLocked(m.addr):
			m.revokedAt = 0
			m.stopClaimTimer()
		}
	}
	for o := range c.cursors {
		if !c.isPublisherLocked([]byte(o)) {
			delete(c.cursors, o)
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

// revoked reports whether m's address was revoked, and whether its grace
// is over: the roster revoking it has been written to m's stream and
// RevocationGrace has passed since (after which a frame is a violation,
// before it is tolerated).
func (r *registry) revoked(m *member) (revoked, over bool) {
	m.c.mu.Lock()
	at := m.revokedAt
	m.c.mu.Unlock()
	if at == 0 || m.told.Load() < at {
		return at > 0, false
	}
	return true, time.Since(time.Unix(0, m.toldAt.Load())) >= r.s.opts.RevocationGrace
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
