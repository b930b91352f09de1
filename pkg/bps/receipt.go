// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// Receipts (issue 24; docs/protocol.md, "Prices", receipts): on a multihop
// stream the child tells its parent, with pb.Receipt, how many deliveries
// it took — read new on the stream within its last deliveryWindow and not
// a violation — cumulative from the stream's start. On a priced stream
// both ends charge deliveries by the receipts and nothing else: the child
// as it sends one, the parent as it reads one, each what the receipt
// adds, so that a delivery the connection lost is charged by neither and
// the two ledgers count the same deliveries at any moment a receipt
// settles. The parent writes no delivery past its window of untold ones,
// which starts at unackedStart and grows with the receipts up to
// unackedMax (a slow start: a child that reads and never acknowledges gets
// unackedStart deliveries, then its stream ends after unackedWait and bee
// blocklists it for the service's BlocklistDuration: unackedStart
// deliveries per parent per period), and none that would take the child's
// debt in bee's accounting past its bound (Settlement.Debt) until the
// child has paid (debtWaits, then its stream ends unpaid). A receipt that
// does not advance, or acknowledges more than the parent wrote, is a
// violation.

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

const (
	kindReceipt frameKind = 13 // pb.Frame.receipt

	// receiptEvery is how many untold deliveries make a child send a
	// receipt at once.
	receiptEvery = 16
	// receiptDelay is how long after the first untold delivery a child
	// sends a receipt for fewer.
	receiptDelay = 100 * time.Millisecond
	// unackedMax is how many deliveries a parent writes to a child on a
	// priced multihop stream past the child's last receipt: four
	// receipts' worth, two writes' batches, a stream's queue
	// (DefaultQueueLen), so that an honest child's receipts, sent every
	// receiptEvery or receiptDelay, hold its parent's writer only when its
	// reader lags by that much — when its queue would fill anyway.
	unackedMax = 64
	// unackedStart and unackedGrow are the slow start of a stream's
	// window: a parent writes a child at most unackedStart deliveries past
	// its last receipt before the first, and unackedGrow more for each
	// delivery a receipt acknowledges, up to unackedMax (unackedWindow).
	// A child that never acknowledges — a squatter — gets unackedStart
	// deliveries on a stream, not the whole window; an honest child
	// acknowledges its first delivery at once and then at half its window
	// (receiptDue), so its window doubles with each receipt (1, 3, 7, 15,
	// 31, 63, 64) and its parent's writer waits on it only for a burst at
	// the stream's start (a join's replay): a round trip per doubling.
	unackedStart = 1
	unackedGrow  = 2
	// unackedWait is how long a parent's writer waits for a receipt that
	// lets it write, before it ends the stream (errUnacknowledged).
	unackedWait = 5 * time.Second
	// debtWaits is how many Settlement.Intervals (pseudosettle's period
	// at the default, 5 s) a parent's writer waits for a child past its
	// debt bound to pay, looking at the child's balance every debtPoll,
	// before it ends the stream unpaid.
	debtWaits = 5
	debtPoll  = 100 * time.Millisecond
)

var (
	errUnacknowledged = errors.New("bps: the child acknowledged no delivery for too long")
	errOverAcked      = errors.New("receipt acknowledges more deliveries than were written")
	errStaleReceipt   = errors.New("receipt does not advance")
)

// receiptOut is a child's count of what it took on a multihop stream to a
// parent, and the receipts it sends of it.
type receiptOut struct {
	mu    sync.Mutex
	win   *Window // the FrameKeys of the last deliveryWindow deliveries read
	taken uint64  // deliveries taken, cumulative
	told  uint64  // taken as of the last receipt
	timer *time.Timer
	ended bool
	last  chan error // told the outcome of the last receipt's write
}

// took counts, at a child, one delivery read from the parent on cs, whose
// FrameKey is key, and sends a receipt if Settlement.Receipt (default
// receiptEvery) are untold; fresh is false for a copy the stream gave
// within the window (not taken). A meter on cs charges what a receipt adds
// once it is written (putBatch): a receipt the connection lost is charged
// by neither end.
func (r *receiptOut) took(cs *clientStream, key [32]byte) (fresh bool, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.win == nil {
		r.win = NewWindow(deliveryWindow)
	}
	if !r.win.Add(key) {
		return false, nil
	}
	r.taken++
	if r.taken-r.told >= receiptDue(r.told, cs.s.opts.Settlement.receiptEvery()) && !r.ended {
		r.sendLocked(cs)
		return true, nil
	}
	if r.timer == nil && !r.ended {
		r.timer = time.AfterFunc(receiptDelay, func() { r.flush(cs) })
	}
	return true, nil
}

// flush sends a receipt for what is untold, on the timer's goroutine.
func (r *receiptOut) flush(cs *clientStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = nil
	if r.ended || r.taken == r.told {
		return
	}
	r.sendLocked(cs)
}

// sendLocked queues a receipt of r.taken, which the writer charges once
// it is written (putBatch); under r.mu. A receipt the stream's queue has
// no room for (a queue of Options.QueueLen frames, publications up and
// receipts alike) leaves what it would have told untold: the next receipt
// tells it, sent by the next delivery or, if none comes, by the timer
// armed here. Counted told and never queued, it was charged by neither
// end until a later receipt told it — at the parent (which charges what
// a receipt's cumulative count adds) but not at the child (which charges
// what each receipt adds to the last one queued): the two ledgers
// disagreed, or, with no later receipt, the parent waited for one that
// never came.
func (r *receiptOut) sendLocked(cs *clientStream) {
	r.stopTimerLocked()
	n := r.taken - r.told
	last := make(chan error, 1)
	if !cs.push(cs.s, outFrame{b: encodeFrame(&pb.Receipt{Taken: r.taken}), kind: kindReceipt, acks: uint32(min(n, math.MaxUint32)), done: last}) {
		if !r.ended {
			r.timer = time.AfterFunc(receiptDelay, func() { r.flush(cs) })
		}
		return
	}
	r.told, r.last = r.taken, last
}

// tell sends, on a multihop stream, a receipt of what is untold and waits
// (at most closeWait) until it is written: Settle's, so that a node's test
// or measurement can close a stream with every delivery acknowledged.
func (r *receiptOut) tell(cs *clientStream) {
	r.mu.Lock()
	if !r.ended && r.taken > r.told {
		r.sendLocked(cs)
	}
	done := r.last // the last receipt sent, written or not
	r.last = nil
	r.mu.Unlock()
	if done == nil {
		return
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-done:
	case <-cs.quit:
	case <-t.C:
	}
}

// lastSent hands over the channel told the outcome of the last receipt
// queued (nil if none, or if it was handed over already): a caller that
// must not close the stream before it is written waits on it.
func (r *receiptOut) lastSent() chan error {
	r.mu.Lock()
	defer r.mu.Unlock()
	done := r.last
	r.last = nil
	return done
}

// tellReceipts sends every multihop parent stream's untold receipt and
// waits until each is written (Settle).
func (s *Service) tellReceipts() {
	s.reg.mu.Lock()
	var all []*clientStream
	for _, p := range s.reg.places {
		for cs := range p.parents {
			if cs.codec == codecEnvelope {
				all = append(all, cs)
			}
		}
	}
	s.reg.mu.Unlock()
	for _, cs := range all {
		cs.rout.tell(cs)
	}
}

// unackedWindow is how many deliveries a parent writes past a child's
// last receipt when that receipt acknowledged acked: the slow start
// (unackedStart, unackedGrow), then unackedMax.
func unackedWindow(acked uint64) uint64 {
	if acked >= unackedMax {
		return unackedMax
	}
	return min(unackedMax, unackedStart+unackedGrow*acked)
}

// receiptDue is how many untold deliveries make a child that last told
// told send a receipt at once: every (Settlement.Receipt), or half its
// parent's window while the window is smaller (the slow start), so that
// the parent's writer never waits on a child that keeps up — the first
// delivery at once.
func receiptDue(told uint64, every int) uint64 {
	return max(1, min(uint64(every), unackedWindow(told)/2))
}

// receiptEvery is Receipt or its default.
func (st Settlement) receiptEvery() int {
	if st.Receipt > 0 {
		return st.Receipt
	}
	return receiptEvery
}

// stop ends the receipts: the stream has ended.
func (r *receiptOut) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	r.stopTimerLocked()
}

// stopTimerLocked stops the timer of an untold receipt, if one is armed;
// under r.mu.
func (r *receiptOut) stopTimerLocked() {
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
}

// final ends the receipts as this node ends the stream gracefully: the
// frame the writer writes last, a receipt of what is untold if any, with
// end set, so that the writer closes our side after it (stream.go,
// clientStream.closeOnce).
func (r *receiptOut) final() outFrame {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ended = true
	r.stopTimerLocked()
	f := outFrame{end: true}
	if n := r.taken - r.told; n > 0 {
		r.told = r.taken
		f.b, f.kind, f.acks = encodeFrame(&pb.Receipt{Taken: r.taken}), kindReceipt, uint32(min(n, math.MaxUint32))
	}
	return f
}

// receiptIn is a parent's count of the deliveries it wrote to a child on a
// multihop stream and the child acknowledged.
type receiptIn struct {
	sent  atomic.Uint64 // priced deliveries written (or being written)
	acked atomic.Uint64 // the child's last receipt; the reader's only
	wake  chan struct{} // a receipt came: a waiting writer looks again
}

// receipted reports whether the meter's stream charges deliveries by
// receipts: at a parent, a priced multihop stream.
func (ps *peerStream) receipted(m *meter) bool {
	return m != nil && m.l.parent && m.down > 0 && ps.codec == codecEnvelope
}

// receipt takes a child's receipt at its parent, on the stream's reader:
// it must advance and acknowledge no more than was written; what it adds
// is charged.
func (ps *peerStream) receipt(r *pb.Receipt) error {
	prev := ps.rin.acked.Load()
	switch {
	case r.Taken <= prev:
		return &violation{err: fmt.Errorf("%w (%d after %d)", errStaleReceipt, r.Taken, prev)}
	case r.Taken > ps.rin.sent.Load():
		return &violation{err: fmt.Errorf("%w (%d of %d)", errOverAcked, r.Taken, ps.rin.sent.Load())}
	}
	ps.rin.acked.Store(r.Taken)
	if ps.rin.wake != nil {
		select {
		case ps.rin.wake <- struct{}{}:
		default:
		}
	}
	if m := ps.meter.Load(); ps.receipted(m) {
		return m.receipted(r.Taken - prev)
	}
	return nil
}

// awaitRoom holds a parent's writer, about to write n priced deliveries on
// a receipted stream, until the child's receipts and its debt leave room
// for them (docs/protocol.md, "Prices", receipts), then counts them as
// sent. It fails when the child does not acknowledge for unackedWait
// (errUnacknowledged) or does not pay for debtWait (ErrUnpaid), or when
// the stream ends.
func (ps *peerStream) awaitRoom(m *meter, n int) error {
	var deadline, poll *time.Timer
	defer func() {
		if deadline != nil {
			deadline.Stop()
		}
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		done := ps.rin.acked.Load()
		unacked := ps.rin.sent.Load() - done
		acked := unacked+uint64(n) <= unackedWindow(done)
		paid, debt := true, uint64(0)
		if acked {
			paid, debt = m.l.debtRoom(price(m.down, int(unacked)+n))
			if paid {
				ps.rin.sent.Add(uint64(n))
				return nil
			}
		}
		if deadline == nil {
			wait := unackedWait
			if !paid {
				wait = debtWaits * m.l.p.settle.Interval
			}
			deadline = time.NewTimer(min(wait, ps.writeTimeout))
		}
		var tick <-chan time.Time
		if !paid {
			if poll == nil {
				poll = time.NewTimer(debtPoll)
			} else {
				poll.Reset(debtPoll)
			}
			tick = poll.C
		}
		select {
		case <-ps.rin.wake:
		case <-tick:
		case <-ps.quit:
			return ErrClosed
		case <-deadline.C:
			if !paid {
				m.l.p.metrics.unpaid.WithLabelValues("parent").Inc()
				return fmt.Errorf("%w: the child's debt %d is past %d (child %s)", ErrUnpaid, debt, m.l.debtBound(), ps.peer)
			}
			// Not provably a lie (a frozen child reads nothing either), so
			// no violation; but a squatter must not be given a window on
			// every stream it opens: bee blocklists it here for a while, as
			// its accounting does a debtor past its limit.
			m.l.p.metrics.unacked.Inc()
			return p2p.NewBlockPeerError(m.l.p.blocklist, fmt.Errorf("%w: %d deliveries untold (child %s)", errUnacknowledged, unacked, ps.peer))
		}
	}
}

// room is how many more deliveries the writer of a receipted stream may
// write by the window and by the ledger's estimate of the child's debt
// (debtRoom's, without asking bee).
func (ps *peerStream) room(m *meter) int {
	done := ps.rin.acked.Load()
	unacked, window := ps.rin.sent.Load()-done, unackedWindow(done)
	if unacked >= window {
		return 0
	}
	n := window - unacked
	if bound := m.l.debtBound(); bound > 0 {
		l := m.l
		l.mu.Lock()
		est := satAdd(satAdd(satAdd(l.owed, l.applied), l.held), price(m.down, int(unacked)))
		l.mu.Unlock()
		if est >= bound {
			return 0
		}
		n = min(n, (bound-est)/m.down)
	}
	return int(n)
}

// receipted charges, at either end, the n deliveries a receipt adds: a
// parent's child owes them, a child owes its parent.
func (m *meter) receipted(n uint64) error {
	if m == nil || m.down == 0 || n == 0 {
		return nil
	}
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	return m.l.holdLocked(price(m.down, int(min(n, math.MaxInt32))), int(n), true)
}

// debtBound is what a parent lets the child of its ledger owe it in bee's
// accounting before it stops delivering (Settlement.Debt; by default the
// payment threshold this node gave the peer, from bee's PeerAccounting,
// which bee's disconnect limit is 125 % of); 0: none.
func (l *ledger) debtBound() uint64 {
	l.boundOnce.Do(func() {
		switch d := l.p.settle.Debt; {
		case d > 0:
			l.bound = uint64(d)
		case d < 0:
			l.bound = 0
		default:
			l.bound = peerThreshold(l.p.acc, l.t.peer.String())
		}
	})
	return l.bound
}

// peerThreshold is the payment threshold acc gave peer (bee's
// PeerAccounting: ThresholdGiven), 0 if it knows none.
func peerThreshold(acc accounting.Interface, peer string) uint64 {
	pa, err := acc.PeerAccounting()
	if err != nil {
		return 0
	}
	th := pa[peer].ThresholdGiven
	if th == nil || th.Sign() <= 0 {
		return 0
	}
	if !th.IsUint64() {
		return math.MaxUint64
	}
	return th.Uint64()
}

// debtRoom reports whether the child of a parent's ledger may be written
// deliveries that will cost it more: what it owes in bee's accounting
// (its compensated balance), what the ledger holds unapplied and more
// within the bound. The balance is read from bee only when the ledger's
// own estimate — the last balance read and what it applied since, which
// only a payment lowers — would pass the bound, after applying what the
// ledger holds. debt is the estimate.
func (l *ledger) debtRoom(more uint64) (ok bool, debt uint64) {
	bound := l.debtBound()
	if bound == 0 {
		return true, 0
	}
	l.mu.Lock()
	est := satAdd(satAdd(satAdd(l.owed, l.applied), l.held), more)
	read := !l.owedRead.IsZero()
	l.mu.Unlock()
	if read && est <= bound {
		return true, est
	}
	// What the ledger holds is debt bee does not know of yet, so the
	// child cannot have paid it: it is applied first (the creditor's ledger
	// moving early is the safe way round), then bee's balance read — under
	// the ledger's lock, which every application takes (flushLocked): a
	// receipt's charge applied between the read and the reset of applied
	// would be in neither, and the child written past its bound (a debtor
	// got 16 deliveries of a bound of 13 on real nodes under load).
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held > 0 {
		_ = l.flushLocked(false)
	}
	l.owed, l.applied, l.owedRead = balanceOf(l.p.acc, l.t.peer), 0, time.Now()
	est = satAdd(satAdd(l.owed, l.held), more)
	return est <= bound, est
}

// balanceOf is what peer owes acc (its compensated balance: positive, the
// peer owes), 0 if it owes nothing or the balance cannot be read.
func balanceOf(acc accounting.Interface, peer swarm.Address) uint64 {
	b, err := acc.CompensatedBalance(peer)
	if err != nil || b == nil || b.Sign() <= 0 {
		return 0
	}
	if !b.IsUint64() {
		return math.MaxUint64
	}
	return b.Uint64()
}

func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxUint64
}
