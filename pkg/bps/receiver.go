// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Delivery is a message received on a subscription, verified end to end.
type Delivery struct {
	Kind      pb.Kind       // DATA, ROSTER or EOS
	Index     uint64        // its index on its kind's feed (implicit FEED_TOPIC: the feed index)
	Challenge []byte        // the challenge of the stream it was published on (unset under implicit authorship)
	Address   swarm.Address // the SOC address: keccak256(id ‖ owner)
	Owner     []byte        // the SOC owner (the signer)
	Data      []byte        // the chunk as on the wire: id ‖ signature ‖ span ‖ payload
	// Service is set for a ROSTER or EOS of the admin's; the subscription
	// has already applied it.
	Service *ServiceMsg
	// Gap reports service updates missed before this one: a liveness fault
	// (withholding), never a silent skip.
	Gap bool
	// Recovered marks a feed update retrieved from storage after a gap
	// (SWIP-65), verified as a live delivery is.
	Recovered bool
}

// ID is the SOC's id.
func (d Delivery) ID() []byte { return d.Data[:idSize] }

// Broadcast is the frame the delivery came in.
func (d Delivery) Broadcast() *pb.Broadcast {
	return &pb.Broadcast{Soc: d.Data, Kind: d.Kind, Challenge: d.Challenge, Index: d.Index}
}

// Signature is the SOC signature of the update.
func (d Delivery) Signature() []byte { return d.Data[idSize : idSize+swarm.SocSignatureSize] }

// Span is the wrapped chunk's span (8 bytes, little-endian).
func (d Delivery) Span() []byte {
	return d.Data[idSize+swarm.SocSignatureSize : socHeaderSize]
}

// Payload is the wrapped chunk's payload.
func (d Delivery) Payload() []byte { return d.Data[socHeaderSize:] }

// ErrEndOfStream ends a subscription whose admin published END_OF_STREAM.
var ErrEndOfStream = errors.New("bps: the admin ended the cohort")

// receiver verifies what parents deliver and hands it to its owner: a
// subscription's every delivery, from each of its parents, each once; a
// publisher's deliveries from other publishers (SWIP-60: publishers
// receive). Its verification state — the dedup window, the service feed
// and roster — is shared by every parent stream it reads.
type receiver struct {
	s        *Service
	spec     *Spec
	c        chan Delivery
	keep     bool          // deliver on c; false: verify and discard
	closing  chan struct{} // closed when the owner ends: a blocked delivery gives up
	received atomic.Uint64
	dropped  atomic.Uint64
	faults   atomic.Uint64

	// dmu serialises taking a delivery — dedup, relaying, handing it on —
	// across parent streams, so that each is seen once and in the order
	// taken. It comes before the owner's locks: what runs under it may
	// take them, and the owner never takes it holding one (unlock).
	dmu  sync.Mutex
	seen *Window // dedup bindings; under dmu
	// onTake, if set, is told every valid delivery and its FrameKey,
	// under dmu: a subscription's took, which fans it out to its children
	// if it relays and tells its observers (the judge, lazy push). dup
	// reports one already taken from another parent.
	onTake func(from *clientStream, pub publication, b *pb.Broadcast, key [32]byte, dup bool)
	// onRepeat, if set, is told of a priced delivery a parent stream gave
	// twice (charge): the judge's miss. Not under dmu.
	onRepeat func(from *clientStream)
	// onBeat, a subscription's, judges the root's HEARTBEAT a parent
	// sent (heartbeat.go); nil: dropped as an unknown kind.
	onBeat func(cs *clientStream, b *pb.Broadcast) error
	// onGaps, if set, is told the gaps a reorder flush passed over: the
	// judge's gaps (escape.go).
	onGaps func(gaps []gapRef)

	// order, on a subscription under FEED_TOPIC with explicit
	// authorship, delivers each publisher's updates in index order across
	// parents; under dmu.
	order *reorder
	// holdFlush, if set, is asked under dmu, once the reorder wait has
	// passed, how much longer what is held may wait: a subscription with
	// lazy push holds it while a frame that may fill the gap is announced
	// and asked for (lazy.go).
	holdFlush func() time.Duration
	cClosed   bool    // c is closed; under dmu
	taken     *Window // a subscription's: frames taken (FrameKey), so that a second copy is dropped unverified; under dmu

	mu     sync.Mutex  // guards svc and latest
	svc    ServiceFeed // the service feed as this node knows it
	latest []byte      // the latest ROSTER taken, encoded: a relay's first delivery to a child
}

func (rc *receiver) init(s *Service, sp *Spec, keep bool, closing chan struct{}) {
	rc.s, rc.spec, rc.keep, rc.closing, rc.c = s, sp, keep, closing, make(chan Delivery, s.opts.QueueLen)
	if !(sp.Binding == pb.TopicBinding_FEED_TOPIC && sp.Explicit()) {
		rc.seen = NewWindow(s.opts.DedupWindow)
	}
}

// authority of a subscription: the admin and the roster it has received.
func (rc *receiver) isPublisher(owner []byte) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.svc.MayPublish(rc.spec, owner)
}

func (rc *receiver) feedCursor(owner []byte) uint64 {
	return rc.s.cursors.get(rc.spec.feedKey(owner))
}

// passedOver reports whether index of owner is one a reorder flush passed
// over and still remembers: below the cursor, and still taken when it comes
// late (reorder.go). Called by check, before take takes dmu.
func (rc *receiver) passedOver(owner []byte, index uint64) bool {
	if rc.order == nil {
		return false
	}
	rc.dmu.Lock()
	defer rc.dmu.Unlock()
	return rc.order.passedOver(string(owner), index)
}

// gapOpen reports whether a reorder flush passed over g and it is still
// missing: no late copy filled it (the judge's escape, escape.go).
func (rc *receiver) gapOpen(g gapRef) bool {
	rc.dmu.Lock()
	defer rc.dmu.Unlock()
	return !rc.cClosed && rc.order.passedOver(g.owner, g.index)
}

func (rc *receiver) serviceNext() uint64 {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.svc.Next()
}

// Roster is the publisher set the subscription holds (admin excluded).
func (rc *receiver) Roster() [][]byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.svc.Roster()
}

// LivenessFaults counts gaps seen in the service feed.
func (rc *receiver) LivenessFaults() uint64 { return rc.faults.Load() }

// C delivers verified feed updates in the order the broker sent them; it is
// closed when the subscription ends.
func (rc *receiver) C() <-chan Delivery { return rc.c }

// Received and Dropped count deliveries accepted and dropped (stale, or
// failing verification) by this subscription.
func (rc *receiver) Received() uint64 { return rc.received.Load() }

// Dropped counts deliveries this subscription dropped.
func (rc *receiver) Dropped() uint64 { return rc.dropped.Load() }

// feedKey names the subscriber cursor of a publisher feed: (topic, owner).
func (sp *Spec) feedKey(owner []byte) string { return string(sp.Topic) + string(owner) }

// readOne reads one frame a parent sent down cs: a delivery is re-verified
// and taken (take); a probe, a reparent, an answer to a Lease goes to
// control, which a subscription sets (a publisher stream ignores them).
func (rc *receiver) readOne(cs *clientStream, fr *frameReader, control func(cs *clientStream, f *pb.Frame) error) error {
	b, err := fr.readRaw()
	if err != nil {
		return err
	}
	f, err := cs.codec.decodeDown(b)
	if err != nil {
		return err
	}
	bc := f.GetBroadcast()
	if bc == nil {
		if control == nil {
			return nil
		}
		return control(cs, f)
	}
	return rc.take(cs, bc)
}

// take re-verifies one delivery (SWIP-74 Rev 8, "Receivers"): the id
// derived from the frame's kind, challenge and index and the spec — the
// frame's challenge compared with nothing — the owner recovered and
// admitted (the admin and the roster it holds under explicit authorship;
// ROSTER and EOS the admin's), and the cursors: under a per-publisher
// cursor an index at or past this node's for that publisher, else a chunk
// not seen within the dedup window — so that a delivery both parents give
// is taken once. A kind it does not know (AUTH included: a parent never
// delivers one) is dropped. A ROSTER updates the roster; a gap in the
// rosters is reported; an EOS ends the subscription after it is delivered.
// A delivery that does not validate ends the parent stream (a parent
// checks what it forwards).
func (rc *receiver) take(cs *clientStream, b *pb.Broadcast) error {
	m := cs.meter.Load()
	if m == nil && !rc.keep && rc.onTake == nil && b.Kind == pb.Kind_DATA {
		// Nobody takes it: no signature check, and no move of the node's
		// feed cursors, which a subscription on this node may need. A
		// priced stream checks it still: a child pays only for what is
		// valid. On a multihop stream it is counted for the receipts
		// (receipt.go) all the same: the parent waits for them.
		if cs.codec == codecEnvelope {
			_, err := cs.rout.took(cs, FrameKey(b))
			return err
		}
		return nil
	}
	if b.Kind == pb.Kind_HEARTBEAT && rc.onBeat != nil {
		return rc.onBeat(cs, b) // the root's, never a delivery (heartbeat.go)
	}
	if b.Kind == pb.Kind_AUTH || b.Kind > pb.Kind_EOS {
		rc.drop(cs, CounterUnknownKind, b.Index)
		return nil
	}
	key, seen, err := rc.takenBefore(cs, m, b)
	if seen || err != nil {
		return err
	}
	pub, v := check(rc.spec, b, nil, rc)
	if v.violates() {
		rc.drop(cs, v.counter(), pub.index)
		return violationf("parent sent an invalid chunk (%s)", v.counter())
	}
	if v == invalidRoster {
		rc.drop(cs, v.counter(), pub.index)
		return nil
	}
	if err := rc.charge(cs, m, key); err != nil {
		return err
	}
	d := Delivery{Kind: b.Kind, Index: pub.index, Challenge: b.Challenge, Address: swarm.NewAddress(pub.address), Owner: pub.owner, Data: b.Soc, Service: pub.service}
	rc.dmu.Lock()
	defer rc.dmu.Unlock()
	if rc.cClosed {
		// The owner has ended: nothing is taken now. Taking moves the
		// node's cursor of the update's feed, which every stream of this
		// node shares — a delivery handed to nobody would make the node's
		// other streams drop their copy as a retransmit.
		return ErrClosed
	}
	if v == accepted {
		v, d.Gap = rc.admitLocked(pub, b, key)
	}
	if rc.onTake != nil && (v == accepted || v == retransmit) {
		rc.onTake(cs, pub, b, key, v == retransmit)
	}
	if v != accepted {
		rc.drop(cs, v.counter(), pub.index)
		return nil
	}
	if d.Gap {
		rc.faults.Add(1)
	}
	if rc.order != nil && pub.feed {
		return rc.inOrder(cs, d)
	}
	return rc.deliver(cs.peer, d)
}

// takenBefore reports whether b is a frame taken already, byte for byte
// — the second parent's copy — a retransmit known before any signature
// check: the observers hear of it, the parent on a priced stream is charged
// as charge says, and it is dropped. key is the frame's FrameKey.
func (rc *receiver) takenBefore(cs *clientStream, m *meter, b *pb.Broadcast) (key [32]byte, seen bool, err error) {
	key = FrameKey(b)
	if rc.taken == nil {
		return key, false, nil
	}
	rc.dmu.Lock()
	if !rc.taken.Contains(key) {
		rc.dmu.Unlock()
		return key, false, nil
	}
	rc.onTake(cs, publication{kind: b.Kind, index: b.Index}, b, key, true)
	rc.dmu.Unlock()
	if err := rc.charge(cs, m, key); err != nil {
		return key, true, err
	}
	rc.drop(cs, CounterRetransmit, 0)
	return key, true, nil
}

// drop counts a delivery from cs that is not taken, with why.
func (rc *receiver) drop(cs *clientStream, why Counter, index uint64) {
	rc.dropped.Add(1)
	rc.s.metrics.ClientDropped.Inc()
	rc.s.trace(Event{Kind: EventClientDrop, Cohort: rc.spec.String(), Peer: cs.peer, Counter: why, Index: index})
}

// inOrder delivers a feed update in index order across parents: two
// parents at different depths interleave, and an update ahead of the next
// expected one waits for the ones before it; the indexes passed over are
// told to onGaps. The caller holds dmu.
func (rc *receiver) inOrder(cs *clientStream, d Delivery) error {
	for _, d := range rc.order.push(d, rc.flushHeld) {
		if err := rc.deliver(cs.peer, d); err != nil {
			return err
		}
	}
	if g := rc.order.takePassed(); len(g) > 0 && rc.onGaps != nil {
		rc.onGaps(g)
	}
	return nil
}

// charge charges, on a priced stream m, a valid delivery the parent on cs
// gave (ledger.go, meter.took): once per stream. A copy the same stream
// gave before is none of the eager/lazy overlap — a second parent's copy
// is on another stream — and counts against the parent as a miss (onRepeat).
func (rc *receiver) charge(cs *clientStream, m *meter, key [32]byte) error {
	var (
		fresh bool
		err   error
	)
	if cs.codec == codecEnvelope {
		fresh, err = cs.rout.took(cs, key) // charged by the receipts (receipt.go)
	} else {
		fresh, err = m.took(key)
	}
	if !fresh && rc.onRepeat != nil {
		rc.onRepeat(cs)
	}
	return err
}

// admitLocked takes a delivery that passed the checks once, whichever
// parent gave it — by its frame, a service SOC by the service cursor, else
// by the dedup window, the reorder or the node's feed cursor — and reports
// retransmit for one taken before, and whether a service SOC follows a gap.
// Under dmu.
func (rc *receiver) admitLocked(pub publication, b *pb.Broadcast, key [32]byte) (v verdict, gap bool) {
	if rc.taken != nil && !rc.taken.Add(key) {
		return retransmit, false // the other parent's copy was taken meanwhile
	}
	switch {
	case pub.service != nil:
		switch rc.applyService(pub.service, b) {
		case Stale:
			return retransmit, false // taken already, from another parent
		case Gap:
			return accepted, true
		}
	case rc.order != nil && pub.feed:
		if !rc.order.admit(pub.owner, pub.index) {
			return retransmit, false
		}
	case pub.feed:
		// A session-feed update (explicit authorship, ALL, whatever the
		// binding) is judged by its owner's cursor, never by the window:
		// it carries no window key.
		if !rc.s.cursors.advance(rc.spec.feedKey(pub.owner), pub.index) {
			return retransmit, false
		}
	case rc.seen != nil:
		if !rc.seen.Add(pub.dedup) {
			return retransmit, false
		}
	}
	return accepted, false
}

// deliver hands one taken delivery on, under dmu.
func (rc *receiver) deliver(from swarm.Address, d Delivery) error {
	s := rc.s
	if d.Service == nil && rc.order != nil {
		s.cursors.advance(rc.spec.feedKey(d.Owner), d.Index)
	}
	rc.received.Add(1)
	s.metrics.ClientReceived.Inc()
	s.trace(Event{Kind: EventDeliver, Cohort: rc.spec.String(), Peer: from, Index: d.Index, Service: d.Service != nil})
	if rc.keep {
		select {
		case rc.c <- d: // room on c: handed on even if the owner is ending, who drains c
		default:
			select {
			case rc.c <- d:
			case <-rc.closing:
				return ErrClosed
			}
		}
	}
	if d.Service.Ends() {
		return ErrEndOfStream
	}
	return nil
}

// flushHeld delivers, in index order, the updates held waiting for the
// ones before them, once the reorder wait passed: what did not come by
// then is a gap, which the application sees in the indexes.
func (rc *receiver) flushHeld() {
	rc.dmu.Lock()
	if rc.cClosed {
		rc.dmu.Unlock()
		return
	}
	if rc.holdFlush != nil && rc.order.timer != nil {
		if d := rc.holdFlush(); d > 0 {
			rc.order.timer.Reset(d)
			rc.dmu.Unlock()
			return
		}
	}
	for _, d := range rc.order.flush() {
		if rc.deliver(swarm.ZeroAddress, d) != nil {
			break
		}
	}
	g := rc.order.takePassed()
	rc.dmu.Unlock()
	if len(g) > 0 && rc.onGaps != nil {
		rc.onGaps(g)
	}
}

// end ends the receiver's deliveries once its owner finished and no
// reader is left: what the reorder held is delivered as it is — the
// consumer has the channel's room for it, no more — and C is closed; under
// dmu, also runs (the owner's state kept under dmu). A reorder flush may
// hold dmu meanwhile, and gives up on the closing channel.
func (rc *receiver) end(also func()) {
	rc.dmu.Lock()
	defer rc.dmu.Unlock()
	if rc.order != nil {
		for _, d := range rc.order.flush() {
			select {
			case rc.c <- d:
				rc.received.Add(1)
				rc.s.metrics.ClientReceived.Inc()
			default:
			}
		}
		rc.order.stop()
	}
	rc.cClosed = true
	also()
	close(rc.c)
}

// serviceFeed is the latest service SOC the receiver took, encoded (nil
// if none), and a copy of its service feed: a relay's first view of the
// cohort (newRelay).
func (rc *receiver) serviceFeed() ([]byte, ServiceFeed) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.latest, rc.svc.clone()
}

// applyService applies svc to the service feed the node holds; b, the
// frame that carried it, becomes the latest roster unless svc is stale.
func (rc *receiver) applyService(svc *ServiceMsg, b *pb.Broadcast) Freshness {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	fr := rc.svc.Apply(svc)
	if fr != Stale && b != nil && svc.Kind == pb.Kind_ROSTER {
		rc.latest = encodeFrame(b)
	}
	return fr
}
