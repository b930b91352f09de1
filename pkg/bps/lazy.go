// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bps/internal/delay"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/encoding/protowire"
)

// A lazy second parent (issue 17, our addition to SWIP-61; docs/protocol.md
// "A lazy second parent"): dual parenting's masking without two frames per
// delivery, the eager/lazy push of Plumtree. Of a subscription's two
// parents one is eager — it sends every delivery whole, as before — and
// the other lazy: it sends, for each content delivery it takes, an
// Announce naming the frame's key (FrameKey: sha256 of address and data,
// what the child dedups by), and the frame itself only when asked. The
// child asks when an announcement's frame has not come from the eager
// parent within a wait that follows the eager parent's measured lateness
// (at least LazyWait, at most maxLazyWait), at once when the eager parent
// passed it over or no parent is eager, and sets the lazy parent eager
// (SetPush) the moment its eager parent is lost: the frames the dead
// parent did not send come within one round trip. Service SOCs travel
// whole on every stream.
//
// It is negotiated per stream: a Join states the mode it asks the stream
// to start in (push), and an enveloped parent that speaks it answers the
// same mode in its Ack. A node that does not speak it sets neither, and
// its streams carry every frame whole, as before.
//
// Hostile peers are bounded and judged on evidence. A parent keeps the
// frames of a lazy stream's last lazyRing announcements and serves each
// once; a child that asks for an announcement never made, for one twice,
// or more often than announcements were made, provably violates (reset,
// blocklisted, counted wrong_stream): a child asking for everything costs
// its parent one eager stream, no more. A lazy parent whose announcement,
// asked, is not served within lazyServeWait misses it, as a parent that
// withholds misses a delivery its sister gave (judge.go), and MaxLag misses
// in an epoch drop it; its announcements wait in a bounded set
// (maxLazyPending), the oldest forgotten first.

// Frame kinds of lazy push, in the envelope (codec.go).
const (
	kindAnnounce frameKind = 6 // pb.Frame.announce
	kindAsk      frameKind = 7 // pb.Frame.ask
	kindSetPush  frameKind = 8 // pb.Frame.set_push
)

const (
	// lazyRing is how many of a lazy stream's latest announcements its
	// parent can serve, holding their frames (shared with every stream
	// they were queued to).
	lazyRing = 128
	// maxAskSeqs bounds the announcements one Ask names.
	maxAskSeqs = 64
	// maxLazyPending bounds the announcements a subscription waits on (or
	// has asked for) at once; past it the oldest is forgotten.
	maxLazyPending = 2 * lazyRing
	// lazyServeWait is how long, at least, an asked announcement may wait
	// for its frame before the parent that made it is blamed for a miss;
	// the wait follows how long that parent took to serve (serveWait), up
	// to maxServeWait.
	lazyServeWait = 2 * time.Second
	maxServeWait  = 30 * time.Second
	// lazySwapAfter: when this many deliveries in a row came first from
	// the lazy parent, asked, the eager parent is late — the two swap.
	lazySwapAfter = 4
)

// lazyOut is lazy push at a parent, for one child stream that negotiated
// it; under the cohort's mu.
type lazyOut struct {
	lazy bool   // announce content deliveries instead of sending them
	next uint64 // the number of the next announcement
	asks uint64 // announcements asked for, in all
	// ring holds announcement q's frame at q % lazyRing (its next is
	// next % lazyRing): a stream that announced a few holds a few.
	ring growRing[lazySlot]
}

type lazySlot struct {
	frame    []byte // the delivery announced, whole; nil once served
	asked    bool
	promised bool // served unasked when the stream was set eager (serveFrom)
}

// announcement is the Announce frame of one delivery, built once per
// fan-out, for its first lazy stream.
type announcement struct{ b []byte }

func (a *announcement) of(frame []byte) []byte {
	if a.b == nil {
		k := frameKeyOf(frame)
		a.b = encodeFrame(&pb.Announce{Key: k[:]})
	}
	return a.b
}

// frameKeyOf is the FrameKey of an encoded bare Broadcast frame
// (encodeFrame of a pb.Broadcast: a length prefix, then the message).
func frameKeyOf(frame []byte) [32]byte {
	_, n := protowire.ConsumeVarint(frame)
	b := new(pb.Broadcast)
	_ = decodeFrame(frame[max(n, 0):], b) // the node encoded it
	return FrameKey(b)
}

// out is what the fan-out queues to this stream for a content delivery f:
// f itself while eager, else its announcement, the frame kept to be
// served. The caller holds the cohort's mu.
func (lz *lazyOut) out(f outFrame, ann *announcement) outFrame {
	if !lz.lazy {
		return f
	}
	lz.ring.put(lazySlot{frame: f.b}, lazyRing, nil)
	lz.next++
	return outFrame{b: ann.of(f.b), kind: kindAnnounce}
}

// negotiatePush answers a Join's push on the stream of m: the Join's mode
// if this node speaks lazy push and the stream the envelope, else unset.
func (s *Service) negotiatePush(m *member, join *pb.Join) pb.PushMode {
	mode := join.GetPush()
	if s.opts.NoLazyPush || m.codec != codecEnvelope || (mode != pb.PushMode_EAGER && mode != pb.PushMode_LAZY) {
		return pb.PushMode_PUSH_MODE_UNSPECIFIED
	}
	m.c.mu.Lock()
	m.lz = &lazyOut{lazy: mode == pb.PushMode_LAZY}
	m.c.mu.Unlock()
	return mode
}

// lazyUp handles a frame of lazy push that the child of m sent up; false:
// f is none.
func (c *cohort) lazyUp(f *pb.Frame, m *member) (bool, error) {
	switch k := f.Kind.(type) {
	case *pb.Frame_Ask:
		return true, c.ask(m, k.Ask)
	case *pb.Frame_SetPush:
		return true, c.setPush(m, k.SetPush)
	}
	return false, nil
}

// ask serves the announcements a child asked for, each once; what fell out
// of the ring is not served (a late ask, not a violation). An ask for an
// announcement never made, asked before, or past the number made is a
// violation.
func (c *cohort) ask(m *member, a *pb.Ask) error {
	s := c.r.s
	c.mu.Lock()
	defer c.mu.Unlock()
	lz := m.lz
	if lz == nil {
		s.count(c, CounterWrongStream)
		return violationf("an ask on a stream without lazy push")
	}
	if len(a.Seqs) == 0 || len(a.Seqs) > maxAskSeqs {
		s.count(c, CounterWrongStream)
		return violationf("an ask for %d announcements", len(a.Seqs))
	}
	for _, q := range a.Seqs {
		if q >= lz.next {
			s.count(c, CounterWrongStream)
			return violationf("an ask for announcement %d, %d made", q, lz.next)
		}
		if lz.asks++; lz.asks > lz.next {
			s.count(c, CounterWrongStream)
			return violationf("%d asks for %d announcements", lz.asks, lz.next)
		}
		if lz.next-q > lazyRing {
			s.metrics.LazyGone.Inc()
			continue
		}
		sl := &lz.ring.s[q%lazyRing]
		if sl.asked {
			s.count(c, CounterWrongStream)
			return violationf("a second ask for announcement %d", q)
		}
		if sl.promised {
			// served unasked at a SetPush the ask crossed: not again
			*sl = lazySlot{asked: true}
			continue
		}
		frame := sl.frame
		*sl = lazySlot{asked: true}
		if c.dead {
			continue
		}
		if !s.offerOrReset(c, m, outFrame{b: frame, kind: kindBroadcast}) {
			return nil
		}
		s.metrics.LazyServed.Inc()
	}
	return nil
}

// setPush switches the stream of m between eager and lazy. Set eager, it
// first serves, in order, what it announced numbered sp.From on and was
// not asked for: the announcements the child had not read when it set the
// stream eager, and will not ask for. They go before any later delivery,
// so that the child, whose eager parent was lost, gets them one round trip
// after the loss and in their order; asked for one at a time, they came a
// second round trip later, behind the deliveries sent whole after them,
// and on a loaded host later than the reorder wait (lost).
func (c *cohort) setPush(m *member, sp *pb.SetPush) error {
	s := c.r.s
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.lz == nil || (sp.Mode != pb.PushMode_EAGER && sp.Mode != pb.PushMode_LAZY) {
		s.count(c, CounterWrongStream)
		return violationf("set push %s on a stream that negotiated %v", sp.Mode, m.lz != nil)
	}
	lz := m.lz
	if sp.Mode == pb.PushMode_EAGER && sp.From > lz.next {
		s.count(c, CounterWrongStream)
		return violationf("set push eager from announcement %d, %d made", sp.From, lz.next)
	}
	if sp.Mode == pb.PushMode_EAGER && lz.lazy && len(lz.ring.s) > 0 {
		c.serveFrom(m, max(sp.From, lz.next-min(lz.next, lazyRing)))
	}
	lz.lazy = sp.Mode == pb.PushMode_LAZY
	return nil
}

// serveFrom serves the announcements of m's stream numbered from on that
// were not asked for, each once, as asks are; under c.mu.
func (c *cohort) serveFrom(m *member, from uint64) {
	s := c.r.s
	lz := m.lz
	for q := from; q < lz.next; q++ {
		sl := &lz.ring.s[q%lazyRing]
		if sl.asked || sl.promised {
			continue
		}
		frame := sl.frame
		*sl = lazySlot{promised: true} // served once: an ask for it later is answered with nothing
		if c.dead || frame == nil {
			continue
		}
		if !s.offerOrReset(c, m, outFrame{b: frame, kind: kindBroadcast}) {
			return
		}
		s.metrics.LazyServed.Inc()
	}
}

// The child's half.

// lazyParent is lazy push on one parent stream of a subscription.
type lazyParent struct {
	lazy atomic.Bool // the mode this node asked for: announcements, not frames
	// Under the subscription's lazy push pmu, which orders the reader's
	// count of announcements with a change of mode: an announcement
	// numbered from on, read while the stream is set eager, is one the
	// parent serves unasked (SetPush.from).
	seq      uint64 // announcements read
	from     uint64 // set eager last: how many had been read then
	settling bool   // set eager, and announcements it made before it knew may still come: not to be set lazy yet
	// served: how long after an ask its frame came, as TCP estimates a
	// round trip; blamed: when it last missed an ask. Under the
	// receiver's dmu.
	served lateness
	blamed time.Time
}

// serveWait is how long an ask of lp may wait for its frame before lp is
// blamed: its served round trip's mean plus four deviations, at least
// lazyServeWait, at most maxServeWait. A parent that is slow — its host
// loaded, its link long — is given the time it takes; one that never
// serves is given lazyServeWait. Under dmu.
func (lp *lazyParent) serveWait() time.Duration {
	return min(max(lp.served.srtt+4*lp.served.rttvar, lazyServeWait), maxServeWait)
}

// read numbers an announcement read from the stream, and reports whether
// the parent serves it unasked: the stream was set eager when it was in
// flight. Under pmu.
func (lp *lazyParent) read() (seq uint64, promised bool) {
	seq = lp.seq
	lp.seq++
	return seq, !lp.lazy.Load() && seq >= lp.from
}

// lazyIn is lazy push at a subscription: its announcements waiting for
// their frames, and its asks waiting to be served, under the receiver's
// dmu; and which of its parents is eager, under pmu. It is told of the
// subscription's parents and deliveries as the judge is (observer), and
// tells the judge what a lazy parent announced and what it did not serve.
type lazyIn struct {
	rc *receiver // the subscription's: dmu, taken, the reorder
	j  *judge
	// pmu orders a change of the parents' modes with a change of the
	// parents: parents is the subscription's, as it is told them.
	pmu     sync.Mutex
	parents []*parent
	// takeover: no parent is eager (the eager one was lost, or is
	// leaving: takeoverBut) and one that speaks lazy push is to be set
	// eager by fire, which sees the announcements waiting (takeOver);
	// under pmu.
	takeover    bool
	takeoverBut *parent

	entries map[[32]byte]*lazyEntry
	order   []*lazyEntry  // oldest first
	timer   *time.Timer   // runs fire; made stopped at Subscribe
	armed   time.Time     // when the timer fires, zero if it is not armed (a kick aside)
	streak  int           // deliveries in a row the eager parent was late with (lazySwapAfter)
	late    lateness      // how much later than the announcements the eager frames come
	stopped bool          // the subscription finished
	kicked  atomic.Bool   // a kick is pending
	wait    time.Duration // Options.LazyWait
	// the reorder's wait this node holds updates past (hold), and
	// until when at most
	holdTimer *time.Timer
	holdUntil time.Time
}

// lateness estimates how late the eager parent's frames are behind the
// lazy parent's announcements, as TCP estimates a round trip (RFC 6298):
// a smoothed mean and mean deviation of the samples. The wait before an
// ask is the mean plus four deviations, at least LazyWait and at most
// maxLazyWait: an eager parent that is regularly a little late (a busy
// host, a longer path) is not asked past, and one that stops is asked
// past within half a second.
type lateness struct {
	srtt, rttvar time.Duration
	n            int
}

// maxLazyWait bounds the wait before an ask, however late the eager
// parent has been: half the reorder wait (reorder.go), so that an update
// asked for at the last moment still arrives, one round trip later, while
// the ones after it are held for it.
const maxLazyWait = reorderWait / 2

func (l *lateness) sample(d time.Duration) {
	d = max(d, 0)
	if l.n++; l.n == 1 {
		l.srtt, l.rttvar = d, d/2
		return
	}
	dev := l.srtt - d
	if dev < 0 {
		dev = -dev
	}
	l.rttvar += (dev - l.rttvar) / 4
	l.srtt += (d - l.srtt) / 8
}

// wait is how long an announcement waits for its eager frame.
func (l *lateness) wait(floor time.Duration) time.Duration {
	return min(max(l.srtt+4*l.rttvar, floor), max(maxLazyWait, floor))
}

type lazyEntry struct {
	at    time.Time // when the announcement came
	key   [32]byte
	p     *parent // the parent that announced it first
	also  *parent // another that announced it too
	seq   uint64  // its number on p's stream
	due   time.Time
	asked bool
	askAt time.Time // when it was asked for (zero: promised)
	// promised: p serves it unasked, for it was in flight when p was set
	// eager (SetPush.from)
	promised bool
	done     bool
}

// init sets lazy push up for the subscription whose receiver is rc and
// whose parents j judges.
func (lz *lazyIn) init(rc *receiver, j *judge) {
	lz.rc, lz.j = rc, j
	if !rc.s.opts.NoLazyPush {
		rc.holdFlush = lz.hold
	}
	lz.wait = rc.s.opts.LazyWait
	lz.entries = make(map[[32]byte]*lazyEntry)
	lz.timer = time.AfterFunc(time.Hour, lz.fire)
	lz.timer.Stop()
}

// added is told, under the subscription's mu, that p became a parent: one
// parent sends every delivery whole.
func (lz *lazyIn) added(p *parent) {
	lz.pmu.Lock()
	defer lz.pmu.Unlock()
	lz.parents = append(lz.parents, p)
	lz.ensureEagerLocked(nil)
}

// lost is told, under the subscription's mu, that p is a parent no more:
// unless the subscription is over, a lazy parent takes over at once.
func (lz *lazyIn) lost(p *parent, over bool) {
	lz.pmu.Lock()
	defer lz.pmu.Unlock()
	lz.parents = slices.DeleteFunc(lz.parents, func(q *parent) bool { return q == p })
	if !over {
		lz.ensureEagerLocked(nil)
	}
}

// leaving is told that parent p sent a Reparent: it takes nothing more, so
// another parent is made eager if none but p is.
func (lz *lazyIn) leaving(p *parent) {
	lz.pmu.Lock()
	defer lz.pmu.Unlock()
	lz.ensureEagerLocked(p)
}

// stop ends the subscription's lazy push; under dmu.
func (lz *lazyIn) stop() {
	lz.stopped = true
	lz.timer.Stop()
	clear(lz.entries)
	lz.order = nil
}

// pushFor is the mode a new parent stream is asked to start in: lazy if
// an eager parent feeds this node already, eager if none does.
func (lz *lazyIn) pushFor() pb.PushMode {
	if lz.rc.s.opts.NoLazyPush {
		return pb.PushMode_PUSH_MODE_UNSPECIFIED
	}
	lz.pmu.Lock()
	defer lz.pmu.Unlock()
	if lz.hasEagerLocked(nil) || lz.takeover {
		return pb.PushMode_LAZY // a lazy parent is being set eager (takeOver)
	}
	return pb.PushMode_EAGER
}

// lazyOf is the lazy push of a parent stream that answered ack to join,
// nil if the two did not negotiate it.
func lazyOf(join *pb.Join, ack *pb.Ack, cd codec) *lazyParent {
	if join.GetPush() == pb.PushMode_PUSH_MODE_UNSPECIFIED || cd != codecEnvelope {
		return nil
	}
	switch ack.GetPush() {
	case pb.PushMode_EAGER:
		return &lazyParent{}
	case pb.PushMode_LAZY:
		lp := &lazyParent{}
		lp.lazy.Store(true)
		return lp
	}
	return nil
}

// eager reports whether p sends every delivery whole.
func (p *parent) eager() bool { return p.lz == nil || !p.lz.lazy.Load() }

// hasEagerLocked reports whether a parent other than but sends every
// delivery whole; the caller holds lz.pmu.
func (lz *lazyIn) hasEagerLocked(but *parent) bool {
	for _, p := range lz.parents {
		if p != but && p.eager() {
			return true
		}
	}
	return false
}

// setModeLocked asks p to feed this node lazily or eagerly from now on;
// the caller holds lz.pmu. Set eager, p serves unasked what it announced
// and this node had not read (SetPush.from); until the first delivery it
// sends after that has come (settled), p is not set lazy again, for an
// announcement read then would not tell whether it was served.
func (lz *lazyIn) setModeLocked(p *parent, lazy bool) {
	lz.setModeFromLocked(p, lazy, math.MaxUint64)
}

// setModeFromLocked is setModeLocked, and set eager, p serves unasked what
// it announced numbered from below on too, if that is less than what this
// node read; it reports whether the mode changed.
func (lz *lazyIn) setModeFromLocked(p *parent, lazy bool, below uint64) bool {
	if p.lz == nil {
		return false
	}
	if p.lz.lazy.Load() == lazy || (lazy && p.lz.settling) {
		return false
	}
	sp := &pb.SetPush{Mode: pb.PushMode_LAZY}
	if !lazy {
		from := min(p.lz.seq, below)
		sp = &pb.SetPush{Mode: pb.PushMode_EAGER, From: from}
		p.lz.from, p.lz.settling = from, true
	}
	p.lz.lazy.Store(lazy)
	p.cs.push(lz.rc.s, outFrame{b: encodeFrame(sp), kind: kindSetPush})
	if !lazy {
		lz.rc.s.metrics.LazyPromoted.Inc()
		lz.rc.s.trace(Event{Kind: EventPromote, Cohort: lz.rc.spec.String(), Peer: p.cs.peer})
	}
	return true
}

// ensureEagerLocked has the first parent that speaks lazy push set eager
// when no parent other than but is: the eager parent was lost, or is
// leaving. fire does it at once (takeOver), where the announcements this
// node waits for are known: the parent serves, in order, from the oldest
// of them on. The caller holds lz.pmu.
func (lz *lazyIn) ensureEagerLocked(but *parent) {
	if lz.hasEagerLocked(but) {
		return
	}
	for _, p := range lz.parents {
		if p != but && p.lz != nil {
			lz.takeover, lz.takeoverBut = true, but
			lz.kick()
			return
		}
	}
}

// takeOver sets eager the parent ensureEagerLocked chose, if no parent is
// eager yet (fire's, under dmu). The SetPush names, as the first
// announcement the parent serves unasked, the oldest one this node still
// waits for and has not asked for — not the count it read: those it read
// and waits for would otherwise be asked for behind the SetPush, and the
// parent would serve the announcements after them first, whole, at the
// SetPush, and them on the ask: an update behind a later one of its feed,
// which a session feed (no reorder: judged by its owner's cursor) drops
// as stale, at this node and every node below that takes it from here
// (the soak's one update lost at ten nodes). Those it waits for are then
// promised, served unasked, in order.
func (lz *lazyIn) takeOver() {
	lz.pmu.Lock()
	defer lz.pmu.Unlock()
	if !lz.takeover {
		return
	}
	but := lz.takeoverBut
	lz.takeover, lz.takeoverBut = false, nil
	if lz.hasEagerLocked(but) {
		return
	}
	for _, p := range lz.parents {
		if p == but || p.lz == nil {
			continue
		}
		read := p.lz.seq
		waiting, asked, ok := lz.promoteLocked(p)
		if ok {
			lz.rc.s.logger.Info("bps: lazy parent takes over", "cohort", lz.rc.spec.String(), "parent", p.cs.peer,
				"from", p.lz.from, "read", read, "waiting", waiting, "asked", asked)
		}
		return
	}
}

// promoteLocked sets p, a lazy parent, eager from the oldest announcement
// of p this node waits for and has not asked for (or the next it reads, if
// none): what p announced from there on and this node did not ask for, p
// serves unasked, in order, before anything after (setPush). Those
// announcements are promised here. It reports how many were, how many of
// p's are asked for and not yet served, and whether p was set eager.
// Under dmu and pmu.
func (lz *lazyIn) promoteLocked(p *parent) (waiting, asked int, ok bool) {
	below := uint64(math.MaxUint64)
	for _, e := range lz.order {
		if e.p == p && !e.done && !e.asked {
			below = min(below, e.seq)
		}
	}
	if !lz.setModeFromLocked(p, false, below) {
		return 0, 0, false
	}
	now := time.Now()
	for _, e := range lz.order {
		switch {
		case e.p != p || e.done:
		case !e.asked && e.seq >= p.lz.from:
			e.asked, e.promised, e.due = true, true, now.Add(p.lz.serveWait())
			lz.arm(e.due)
			waiting++
		case e.asked:
			asked++
		}
	}
	return waiting, asked, true
}

// kick runs fire at once, to ask for what a parent set eager
// announced; any goroutine, any lock.
func (lz *lazyIn) kick() {
	if lz.kicked.CompareAndSwap(false, true) {
		lz.timer.Reset(delay.Positive(0))
	}
}

// announced takes an announcement from parent p: nothing to do if the
// frame was taken already (p is credited with it), else it waits for the
// frame, LazyWait if an eager parent should bring it, not at all if none
// will.
func (lz *lazyIn) announced(p *parent, a *pb.Announce) error {
	if p.lz == nil {
		return fmt.Errorf("%w: an announcement on a stream without lazy push", errMalformed)
	}
	if len(a.Key) != len(lazyEntry{}.key) {
		return fmt.Errorf("%w: an announcement of %d bytes", errMalformed, len(a.Key))
	}
	key := [32]byte(a.Key)
	lz.rc.dmu.Lock()
	defer lz.rc.dmu.Unlock()
	lz.pmu.Lock()
	seq, promised := p.lz.read()
	lz.pmu.Unlock()
	if lz.stopped || lz.rc.cClosed {
		return nil
	}
	if lz.rc.taken.Contains(key) {
		lz.j.copied(p.cs, key)
		if !p.eager() {
			lz.late.sample(0) // the eager frame came first
			lz.streak = 0
		}
		return nil
	}
	if e := lz.entries[key]; e != nil {
		switch {
		case promised && !e.asked:
			// p serves it unasked: wait for p, not for whom it waited on
			if e.p != p {
				e.also = e.p
			}
			e.p, e.seq, e.asked, e.promised, e.due = p, seq, true, true, time.Now().Add(p.lz.serveWait())
			lz.arm(e.due)
		case e.p != p:
			e.also = p
		}
		return nil
	}
	lz.pmu.Lock()
	now := !lz.hasEagerLocked(nil) || p.eager()
	lz.pmu.Unlock()
	lz.makeRoom()
	at := time.Now()
	wait := lz.late.wait(lz.wait)
	e := &lazyEntry{at: at, key: key, p: p, seq: seq, due: at.Add(wait)}
	if promised {
		// p was set eager while this was in flight: it serves it unasked
		e.asked, e.promised, e.due, now = true, true, at.Add(p.lz.serveWait()), false
	}
	lz.entries[key] = e
	lz.order = append(lz.order, e)
	lz.rc.s.trace(Event{Kind: EventAnnounced, Cohort: lz.rc.spec.String(), Peer: p.cs.peer, Index: seq})
	if now {
		lz.kick()
	} else {
		lz.arm(e.due)
	}
	return nil
}

// arm makes fire run by due; under dmu.
func (lz *lazyIn) arm(due time.Time) {
	if !lz.kicked.Load() && (lz.armed.IsZero() || due.Before(lz.armed)) {
		lz.armed = due
		lz.timer.Reset(delay.Positive(time.Until(due)))
	}
}

// ask sends each parent an Ask for the announcements numbered in asks, at
// most maxAskSeqs a frame.
func (lz *lazyIn) ask(asks map[*parent][]uint64) {
	s := lz.rc.s
	for p, seqs := range asks {
		for len(seqs) > 0 {
			n := min(len(seqs), maxAskSeqs)
			if p.cs.push(s, outFrame{b: encodeFrame(&pb.Ask{Seqs: seqs[:n]}), kind: kindAsk}) {
				s.metrics.LazyAsked.Add(float64(n))
				s.trace(Event{Kind: EventAsk, Cohort: lz.rc.spec.String(), Peer: p.cs.peer, Index: uint64(n)})
			}
			seqs = seqs[n:]
		}
	}
}

// maxLazyHold bounds how much longer than the reorder wait the updates
// held wait for a frame announced (hold).
const maxLazyHold = 4 * time.Second

// hold is how much longer the updates the reorder holds may wait, its
// wait over, for the gap before them: as long as a frame that may fill it
// was announced and has not come, and neither its wait nor its ask has
// expired — at most maxLazyHold longer. Without it, the update a parent
// skipped, announced by the other and asked for when a later one came,
// came one round trip after that one, which on a loaded host was later
// than the reorder wait: passed over, lost at a node that kept a parent.
// Under dmu.
func (lz *lazyIn) hold() time.Duration {
	if lz.rc.order.timer != lz.holdTimer {
		lz.holdTimer, lz.holdUntil = lz.rc.order.timer, time.Now().Add(maxLazyHold)
	}
	var until time.Time
	for _, e := range lz.order {
		if !e.done && e.due.After(until) {
			until = e.due
		}
	}
	if until.After(lz.holdUntil) {
		until = lz.holdUntil
	}
	return time.Until(until)
}

// makeRoom keeps the announcements waiting below maxLazyPending: the
// finished are dropped first, then the oldest; under dmu.
func (lz *lazyIn) makeRoom() {
	if len(lz.entries) < maxLazyPending {
		return
	}
	lz.compact()
	for len(lz.order) > 0 && len(lz.entries) >= maxLazyPending {
		delete(lz.entries, lz.order[0].key)
		lz.order[0] = nil
		lz.order = lz.order[1:]
	}
}

// compact drops finished entries from the order; under dmu.
func (lz *lazyIn) compact() {
	kept := lz.order[:0]
	for _, e := range lz.order {
		if !e.done {
			kept = append(kept, e)
		}
	}
	clear(lz.order[len(kept):])
	lz.order = kept
}

// took is told, under dmu, every delivery taken or dropped as a copy:
// the parents that announced it are credited with it (judge.go), an ask it
// answers is served, how late the eager frame came is sampled, and when
// the eager parent was late lazySwapAfter times in a row — its frame came
// more than LazyWait after the announcement, or the lazy parent, asked,
// served first — the lazy parent becomes the eager one.
func (lz *lazyIn) took(from *clientStream, pub publication, b *pb.Broadcast, key [32]byte, dup bool) {
	if lz.rc.s.opts.NoLazyPush {
		return
	}
	if !dup && lz.rc.order != nil && pub.feed && pub.service == nil && lz.rc.order.ahead(pub.owner, pub.index) {
		// An update past the next expected: the ones before it will be
		// held for, and whatever is announced and not yet come may be
		// one of them.
		lz.askAllNow()
	}
	e := lz.entries[key]
	if pub.service == nil {
		lz.settle(from, e)
	}
	if e == nil {
		return
	}
	if !dup {
		lz.j.copied(e.p.cs, key)
		if e.also != nil {
			lz.j.copied(e.also.cs, key)
		}
	}
	late := false
	switch {
	case !e.asked:
		if from != e.p.cs {
			d := time.Since(e.at)
			lz.late.sample(d)
			late = d > lz.wait
			lz.passedOver(e)
		}
	case from == e.p.cs:
		late = !dup && !e.promised
		if !e.askAt.IsZero() {
			e.p.lz.served.sample(time.Since(e.askAt))
		}
	default:
		return // asked: p must still serve it
	}
	if !late {
		lz.streak = 0
	} else if lz.streak++; lz.streak >= lazySwapAfter {
		lz.streak = 0
		lz.swapTo(e.p)
	}
	e.done = true
	delete(lz.entries, key)
}

// settle is told, under dmu, every content frame a parent stream from
// gave, and e, the announcement waiting for it if any: once a parent set
// eager gives one it sent after it knew — not one it served for an ask
// made before — every announcement it made before has been read, and it
// may be set lazy again (setModeLocked).
func (lz *lazyIn) settle(from *clientStream, e *lazyEntry) {
	var p *parent
	lz.pmu.Lock()
	defer lz.pmu.Unlock()
	for _, q := range lz.parents {
		if q.cs == from {
			p = q
		}
	}
	if p == nil || p.lz == nil {
		return
	}
	if p.lz.settling && (e == nil || e.p != p || e.promised || e.seq >= p.lz.from) {
		p.lz.settling = false
	}
}

// passedOver asks at once for what the lazy parent of e announced before
// e and the node still lacks: the eager parent, whose stream is ordered,
// delivered e and not those — skipped, or far behind. Under dmu.
func (lz *lazyIn) passedOver(e *lazyEntry) {
	kick := false
	for _, o := range lz.order {
		if o == e {
			break
		}
		if !o.done && !o.asked && o.p == e.p && o.seq < e.seq {
			o.due, kick = time.Time{}, true
		}
	}
	if kick {
		lz.kick()
	}
}

// askAllNow asks at once for every announcement still waiting; under dmu.
func (lz *lazyIn) askAllNow() {
	kick := false
	for _, o := range lz.order {
		if !o.done && !o.asked {
			o.due, kick = time.Time{}, true
		}
	}
	if kick {
		lz.kick()
	}
}

// ahead reports whether index is past the next update of owner's feed
// the reorder expects: the updates between are missing, and will be held
// for; under the receiver's dmu.
func (o *reorder) ahead(owner []byte, index uint64) bool {
	n, ok := o.next[string(owner)]
	return ok && index > n
}

// swapTo makes p, a lazy parent that keeps bringing what the eager one is
// late with, the eager parent, and the others lazy; under dmu. What p
// announced and this node still waits for without having asked, p serves
// with the SetPush, in order before what it sends whole after it.
func (lz *lazyIn) swapTo(p *parent) {
	lz.pmu.Lock()
	defer lz.pmu.Unlock()
	if p.lz == nil || p.eager() || !slices.ContainsFunc(lz.parents, func(q *parent) bool { return q.cs.peer.Equal(p.cs.peer) }) {
		return
	}
	for _, q := range lz.parents {
		if q != p && q.lz != nil && q.lz.settling {
			return // q's announcements from before it was set eager may still come
		}
	}
	if _, _, ok := lz.promoteLocked(p); !ok {
		return
	}
	for _, q := range lz.parents {
		if q != p {
			lz.setModeLocked(q, true)
		}
	}
}

// fire asks for the announcements whose frames are due — LazyWait passed,
// or their parent is now eager, or no parent is — and has the judge blame
// the parents whose asks were not served within lazyServeWait. It runs on
// a timer's goroutine: it reads the parents (pmu), then does its work
// under dmu (due), then tells the judge.
func (lz *lazyIn) fire() {
	s := lz.rc.s
	if !s.track() {
		return
	}
	defer s.done()
	blame := lz.due()
	for _, p := range blame {
		s.metrics.LazyUnserved.Inc()
		lz.j.unserved(p)
	}
}

// due is fire's work under dmu: it asks for what is due and
// returns the parents to blame.
func (lz *lazyIn) due() []*parent {
	lz.rc.dmu.Lock()
	defer lz.rc.dmu.Unlock()
	lz.kicked.Store(false)
	lz.armed = time.Time{}
	if lz.stopped || lz.rc.cClosed {
		return nil
	}
	lz.takeOver()
	lz.pmu.Lock()
	live := make(map[*parent]bool, len(lz.parents))
	for _, p := range lz.parents {
		live[p] = true
	}
	anyEager := lz.hasEagerLocked(nil)
	lz.pmu.Unlock()
	now := time.Now()
	var next time.Time
	asks := make(map[*parent][]uint64)
	var blame []*parent
	kept := lz.order[:0]
	for _, e := range lz.order {
		switch {
		case e.done:
			continue
		case !live[e.p]:
			// its stream ended: nothing to ask it, nothing to judge
			delete(lz.entries, e.key)
			continue
		case !e.asked && lz.rc.taken.Contains(e.key):
			delete(lz.entries, e.key)
			continue
		case !e.asked && (e.p.eager() || !anyEager || !e.due.After(now)):
			e.asked, e.askAt, e.due = true, now, now.Add(e.p.lz.serveWait())
			asks[e.p] = append(asks[e.p], e.seq)
		case e.asked && !e.due.After(now) && now.Sub(e.p.lz.blamed) < e.p.lz.serveWait():
			// One miss a parent per wait: an honest parent that is
			// slower than it was, with many asks out, is not blamed
			// for each; one that never serves misses one a wait.
			e.due = e.p.lz.blamed.Add(e.p.lz.serveWait())
		case e.asked && !e.due.After(now):
			e.p.lz.blamed = now
			blame = append(blame, e.p)
			delete(lz.entries, e.key)
			continue
		}
		if next.IsZero() || e.due.Before(next) {
			next = e.due
		}
		kept = append(kept, e)
	}
	clear(lz.order[len(kept):])
	lz.order = kept
	lz.ask(asks)
	if !next.IsZero() && !lz.kicked.Load() {
		lz.armed = next
		lz.timer.Reset(max(time.Until(next), time.Millisecond))
	}
	return blame
}
