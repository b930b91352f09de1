// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// The ledgers of pricing (pricing.go): a meter per priced stream, a ledger
// per peer and side, and the flusher that applies what ledgers hold on
// bee's accounting in batches. The arithmetic they count with is in
// price.go.

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	beemetrics "github.com/ethersphere/bee/v2/pkg/metrics"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/internal/delay"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protowire"
)

// pricing is the accounting of one Service. Its peers map is guarded by mu,
// a small mutex around a small map (one entry per peer with a priced
// stream); the tallies in it are atomic. The flusher's lists are guarded
// by qmu; a ledger is on each at most once.
type pricing struct {
	ctx     context.Context // the service's: bounds a wait for bee's per-peer lock
	acc     accounting.Interface
	prices  Prices
	settle  Settlement
	goOwned func(func()) bool // the service's: runs the flusher (nil: none runs)
	// blocklist: how long bee blocklists a child that acknowledged nothing
	// for too long (receipt.go); the service's BlocklistDuration.
	blocklist time.Duration

	metrics pricingMetrics

	mu    sync.Mutex
	peers map[string]*tally

	qmu      sync.Mutex
	queue    []*ledger     // ledgers holding charges, for the flusher's next round
	late     []lateLedger  // children's ledgers whose streams all ended, applied when due
	flushing bool          // the flusher runs
	stopped  bool          // the flusher has stopped for good: the service closes
	wake     chan struct{} // tells a sleeping flusher of a new late meter
}

// lateLedger is a child's ledger whose streams all ended: the flusher
// applies its kept charges at due (see meter.done).
type lateLedger struct {
	l   *ledger
	due time.Time
}

// tally is what BPS moved with one peer over the streams held with it, and
// the two ledgers of those streams.
type tally struct {
	peer     swarm.Address
	streams  int        // guarded by pricing.mu
	ledgers  [2]*ledger // guarded by pricing.mu: this node the child (0), the parent (1)
	debited  atomic.Uint64
	credited atomic.Uint64
}

type pricingMetrics struct {
	debited  prometheus.Counter
	credited prometheus.Counter
	unpaid   *prometheus.CounterVec
	flushes  prometheus.Counter
	unacked  prometheus.Counter
}

func newPricing(ctx context.Context, acc accounting.Interface, p Prices, st Settlement) *pricing {
	return &pricing{ctx: ctx, acc: acc, prices: p, settle: st.withDefaults(), peers: make(map[string]*tally), wake: make(chan struct{}, 1), metrics: pricingMetrics{
		debited: prometheus.NewCounter(prometheus.CounterOpts{Namespace: beemetrics.Namespace, Subsystem: "bps",
			Name: "accounting_debited", Help: "Accounting units BPS charged peers (deliveries down, publications up)."}),
		credited: prometheus.NewCounter(prometheus.CounterOpts{Namespace: beemetrics.Namespace, Subsystem: "bps",
			Name: "accounting_credited", Help: "Accounting units BPS was charged by parents."}),
		unpaid: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: beemetrics.Namespace, Subsystem: "bps",
			Name: "accounting_unpaid", Help: "Streams ended because bee's accounting refused a charge, by this node's side: parent (the child's debt), child (this node's)."},
			[]string{"side"}),
		flushes: prometheus.NewCounter(prometheus.CounterOpts{Namespace: beemetrics.Namespace, Subsystem: "bps",
			Name: "accounting_flushes", Help: "Charges BPS made on bee's accounting, each applying what one peer's ledger held (batched settlement)."}),
		unacked: prometheus.NewCounter(prometheus.CounterOpts{Namespace: beemetrics.Namespace, Subsystem: "bps",
			Name: "accounting_unacknowledged", Help: "Child streams ended because the child sent no receipt for the deliveries written past the window (receipt.go)."}),
	}}
}

func (p *pricing) charges() []PeerCharges {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]PeerCharges, 0, len(p.peers))
	for _, t := range p.peers {
		out = append(out, PeerCharges{Peer: t.peer, Debited: t.debited.Load(), Credited: t.credited.Load(), Streams: t.streams})
	}
	return out
}

// openLocked counts a new stream with peer on its tally; the caller holds
// p.mu.
func (p *pricing) openLocked(peer swarm.Address) *tally {
	t := p.peers[peer.ByteString()]
	if t == nil {
		t = &tally{peer: peer}
		p.peers[peer.ByteString()] = t
	}
	t.streams++
	return t
}

func (p *pricing) close(t *tally) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.streams--; t.streams == 0 {
		delete(p.peers, t.peer.ByteString())
	}
}

// Charges are counted per stream and applied per peer: a meter prices its
// stream's frames, and what it counts goes to the ledger of the peer on the
// stream's side (this node the parent, or the child), which applies it on
// bee's accounting in batches (docs/protocol.md, "Prices", batched
// settlement), with the same totals as frame by frame: before a write that
// would take it past Settlement.Frames or Settlement.Credit, once a frame
// read does, at most Settlement.Interval after its first charge, and when
// the peer's last stream on that side ends. One ledger per peer, not per
// stream, so that what a node holds unapplied with a peer — a parent's
// credit bound, a child's margin — is bounded however many streams it holds
// with it.
//
// The two ends of a stream apply at different moments, and bee's
// pseudosettle needs the debtor's ledger never to stand above its
// creditor's: a child's early payment is accepted up to what the parent's
// ledger says it owes, and bee at the child blocklists a parent that
// accepts less than the child's ledger says ("accepted lower payment than
// expected"). bee's own protocols keep that order by reserving the debit
// before serving and applying the credit after; here a parent learns of a
// publication only once it has read it, and applies what it counted in
// batches. So a child applies only what it holds beyond a margin (keep):
// what its parent's ledger can hold unapplied and a write in flight each
// way on each stream, at most twice Credit. Its kept charges are applied
// when its last stream with the peer ends, once the parent has had time to
// apply its own (lateDelay). A child never holds more than its margin plus
// max(Credit, one write's price) of charges its own accounting was not
// told of.
//
// A delivery is charged at both ends by one rule (docs/protocol.md,
// "Prices"): a Message is priced down once per stream, by its address — the
// parent's writer skips one it has written on the stream within the last
// deliveryWindow, and the child charges only a delivery it took, valid, and
// new on that stream within the same window. Both see the stream's Messages
// in one order, so their windows agree; a parent that sends an invalid
// chunk is cut (receiver.take), and frames lost with the connection are
// charged by neither the child nor, past its last write, the parent.
type meter struct {
	l    *ledger
	down uint64 // the price of a Message written down (a delivery)
	up   uint64 // the price of a Message written up: Publish × the child's depth
	kill func(error) bool
	once sync.Once
	// sent is the addresses of the deliveries priced on the stream, the
	// most recent deliveryWindow: the parent's written, the child's taken;
	// under l.mu.
	sent *Window
}

// deliveryWindow is how many recent deliveries a stream's meter remembers
// at each end, so that a copy on the same stream is charged once.
const deliveryWindow = 256

// freshLocked records a delivery's FrameKey on the stream and reports
// whether it is the first within the window; under l.mu.
func (m *meter) freshLocked(key [32]byte) bool {
	if m.sent == nil {
		m.sent = NewWindow(deliveryWindow)
	}
	return m.sent.Add(key)
}

// took charges, at a child, one delivery the receiver took from the
// parent, valid: new on the stream, it is held as a frame read is; a copy
// the stream gave before is not charged, and took reports it (false).
func (m *meter) took(key [32]byte) (fresh bool, err error) {
	if m == nil || m.l.parent || m.down == 0 {
		return true, nil
	}
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	if !m.freshLocked(key) {
		return false, nil
	}
	return true, m.l.holdLocked(m.down, 1, true)
}

// pricedWrite reports whether the writer charges for f: at a parent a
// delivery it has not written on the stream within the window (recorded),
// at a child every publication.
func (m *meter) pricedWrite(f *outFrame) bool {
	if !pricedOut(f) {
		return false
	}
	if !m.l.parent || m.down == 0 {
		return true
	}
	_, n := protowire.ConsumeVarint(f.b)
	b := new(pb.Broadcast)
	_ = decodeFrame(f.b[max(n, 0):], b) // the node encoded it
	if b.Kind == pb.Kind_AUTH || b.Kind > pb.Kind_EOS {
		return false // a kind the child drops unread is not a delivery it takes (receiver.take)
	}
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	return m.freshLocked(FrameKey(b))
}

// ledger is what a node's priced streams with one peer, on one side, hold
// unapplied on bee's accounting.
type ledger struct {
	p      *pricing
	t      *tally
	parent bool        // this node is the streams' parent
	failed atomic.Bool // bee's accounting refused a flush: a new stream opens a new ledger

	mu     sync.Mutex // guards what follows, and serialises the ledger's flushes
	meters map[*meter]struct{}
	unit   uint64 // the dearest Message of its streams so far: the margin's unit
	held   uint64 // counted, not yet applied on bee's accounting
	frames int    // priced frames counted since the last flush
	queued bool   // on the flusher's list
	// lateDue: a child's ledger whose streams all ended applies what it
	// kept then (on the flusher's late list); zero if it waits for nothing.
	lateDue time.Time
	err     error // bee's accounting refused a flush: every later charge fails with it

	// A parent's view of its child's debt in bee's accounting (receipt.go,
	// debtRoom): the balance last read, when, and what the ledger applied
	// since; the bound, read once.
	owed      uint64
	applied   uint64
	owedRead  time.Time
	boundOnce sync.Once
	bound     uint64
}

// meter opens the meter of a stream with peer, on the peer's ledger for
// this node's side; kill ends the stream when bee's accounting refuses
// what the ledger holds.
func (p *pricing) meter(peer swarm.Address, parent bool, stated uint32, kill func(error) bool) *meter {
	m := &meter{down: p.prices.Delivery, up: p.prices.upPrice(stated), kill: kill}
	side := 0
	if parent {
		side = 1
	}
	p.mu.Lock()
	t := p.openLocked(peer)
	l := t.ledgers[side]
	if l == nil || l.failed.Load() {
		l = &ledger{p: p, t: t, parent: parent, meters: make(map[*meter]struct{})}
		t.ledgers[side] = l
	}
	p.mu.Unlock()
	m.l = l
	l.mu.Lock()
	l.meters[m] = struct{}{}
	l.unit = max(l.unit, m.up, m.down)
	l.mu.Unlock()
	return m
}

// keepLocked is what the ledger keeps back unapplied: a child's margin, 0 at
// a parent. The caller holds l.mu.
func (l *ledger) keepLocked() uint64 {
	if l.parent {
		return 0
	}
	return l.p.settle.keep(l.unit, max(len(l.meters), 1))
}

// done ends the meter's stream. What the ledger holds past the margin of
// the streams left is applied; when it was the peer's last stream on this
// side, all of it — at a child, its kept margin lateDelay later, by the
// flusher (at once if the service is closing). Later calls do nothing; a
// charge after it goes to the ledger as before.
func (m *meter) done() {
	if m == nil {
		return
	}
	m.once.Do(func() {
		l := m.l
		l.mu.Lock()
		delete(l.meters, m)
		last := len(l.meters) == 0
		_ = l.flushLocked(last && l.parent)
		late := last && !l.parent && l.held > 0 && l.err == nil
		var due time.Time
		if late {
			// A later end pushes back an application already due: the
			// parent applies this stream's end too before the margin goes.
			due = time.Now().Add(l.p.settle.lateDelay())
			l.lateDue = due
		}
		l.mu.Unlock()
		if late && !l.p.enqueueLate(l, due) {
			l.flushLate(true)
		}
		l.p.close(l.t)
	})
}

// heldCharge is the accounting.Action prepareWrite hands the writer: its
// Apply is apply's, which adds the write's price to what the ledger holds.
type heldCharge struct{ m *meter }

func (heldCharge) Apply() error { return nil }
func (heldCharge) Cleanup()     {}

// batchFrames is how many priced frames one write on the meter's stream
// may carry: at a parent, as many as Settlement.Credit pays for, at least
// one — a write's charge is held until the next write applies it, so that a
// batch past that would let a child that cannot pay take a whole batch past
// bee's disconnect limit, where it would be cut at a moment that depends on
// how the writer batched (on load). Unbounded (maxBatchFrames) at a child
// and on an unpriced stream.
func (m *meter) batchFrames() int {
	if m == nil || !m.l.parent || m.down == 0 {
		return maxBatchFrames
	}
	return int(max(1, min(m.l.p.settle.Credit/m.down, maxBatchFrames)))
}

// unit is the price of a Message this node writes on the meter's stream:
// down at a parent, up at a child.
func (m *meter) unit() uint64 {
	if m.l.parent {
		return m.down
	}
	return m.up
}

// prepareWrite readies the charge of n Messages the stream's writer is
// about to write — down at a parent, up at a child — applying first what
// the ledger holds if the write would take it past the settlement's
// bounds. An error (bee's accounting refused what the ledger held) ends
// the stream before the write.
func (m *meter) prepareWrite(n int) (accounting.Action, uint64, error) {
	pr := price(m.unit(), n)
	if pr == 0 {
		return nil, 0, nil
	}
	l := m.l
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, 0, l.err
	}
	if keep := l.keepLocked(); l.held > keep {
		over := l.held - keep
		if l.frames+n > l.p.settle.Frames || over+pr > l.p.settle.Credit || over+pr < over {
			if err := l.flushLocked(false); err != nil {
				return nil, 0, err
			}
		}
	}
	return heldCharge{m}, pr, nil
}

// apply counts the charge of price prepareWrite readied once its frames have
// passed.
func (m *meter) apply(_ accounting.Action, price uint64) error {
	l := m.l
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.holdLocked(price, int(price/m.unit()), false)
}

// holdLocked adds a charge of n frames to what the ledger holds, applying
// the lot at once if no stream is left to wait for or, when over (a frame
// read), what it holds past its margin if that reached the settlement's
// bounds; otherwise the flusher is told.
func (l *ledger) holdLocked(price uint64, n int, over bool) error {
	if l.err != nil {
		return l.err
	}
	held := l.held + price
	if held < l.held {
		held = math.MaxUint64
	}
	l.held, l.frames = held, l.frames+n
	if len(l.meters) == 0 && l.lateDue.IsZero() {
		return l.flushLocked(true)
	}
	st := &l.p.settle
	keep := l.keepLocked()
	if over && l.held > keep && (l.frames >= st.Frames || l.held-keep >= st.Credit) {
		return l.flushLocked(false)
	}
	if !l.queued && l.held > keep {
		l.queued = true
		l.p.enqueue(l)
	}
	return nil
}

// flushWait bounds a flush's wait for bee's per-peer lock. A flush does not
// end with the service's context: what a closing service's streams hold is
// applied as they end.
const flushWait = 5 * time.Second

// flushLocked applies what the ledger holds on bee's accounting, in one
// charge: at a parent a debit of the child, at a child a credit of the
// parent of what it holds past its margin (all of it if all). A refusal is
// kept, ends every stream of the ledger, and fails every later charge.
func (l *ledger) flushLocked(all bool) error {
	if l.err != nil {
		return l.err
	}
	pr := l.held
	if !all {
		keep := l.keepLocked()
		if l.held <= keep {
			return nil
		}
		pr = l.held - keep
	}
	if pr == 0 {
		return nil
	}
	l.held -= pr
	l.frames = 0
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.p.ctx), flushWait)
	defer cancel()
	var (
		act accounting.Action
		err error
	)
	if l.parent {
		act, err = l.p.acc.PrepareDebit(ctx, l.t.peer, pr)
	} else {
		act, err = l.p.acc.PrepareCredit(ctx, l.t.peer, pr, true)
	}
	if err == nil {
		err = act.Apply()
		act.Cleanup()
	}
	l.p.metrics.flushes.Inc()
	if err != nil {
		l.err = l.unpaid(pr, err)
		l.failed.Store(true)
		for m := range l.meters {
			if m.kill != nil {
				m.kill(l.err)
			}
		}
		return l.err
	}
	if l.parent {
		l.applied = satAdd(l.applied, pr)
		l.t.debited.Add(pr)
		l.p.metrics.debited.Add(float64(pr))
	} else {
		l.t.credited.Add(pr)
		l.p.metrics.credited.Add(float64(pr))
	}
	return nil
}

// flushQueued is the flusher's flush of a ledger it had queued: what it
// holds past its margin, all of it if its streams all ended and it waits
// for no late application.
func (l *ledger) flushQueued() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queued = false
	_ = l.flushLocked(len(l.meters) == 0 && l.lateDue.IsZero())
}

// flushLate applies a child's kept margin when it falls due (now, if now):
// all the ledger holds, unless a stream with the peer opened on it
// meanwhile. An entry a later end pushed back does nothing.
func (l *ledger) flushLate(now bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lateDue.IsZero() || !now && time.Now().Before(l.lateDue) {
		return
	}
	l.lateDue = time.Time{}
	_ = l.flushLocked(len(l.meters) == 0)
}

// enqueue puts l on the flusher's list, starting the flusher if it is not
// running. If the service is closing, nothing is started: l's streams
// apply what it holds as they end.
func (p *pricing) enqueue(l *ledger) {
	p.qmu.Lock()
	p.queue = append(p.queue, l)
	p.qmu.Unlock()
	p.startFlusher()
}

// enqueueLate hands the flusher a child's ledger whose streams all ended,
// to apply what it kept at due; false if no flusher runs or can start (the
// service is closing): the caller applies it.
func (p *pricing) enqueueLate(l *ledger, due time.Time) bool {
	p.qmu.Lock()
	if p.stopped || p.ctx.Err() != nil {
		p.qmu.Unlock()
		return false
	}
	p.late = append(p.late, lateLedger{l: l, due: due})
	p.qmu.Unlock()
	if p.startFlusher() {
		select {
		case p.wake <- struct{}{}:
		default:
		}
		return true
	}
	// No flusher: take l back, unless a flusher that was stopping has
	// applied it already.
	p.qmu.Lock()
	defer p.qmu.Unlock()
	for i, ll := range p.late {
		if ll.l == l {
			p.late = append(p.late[:i], p.late[i+1:]...)
			return false
		}
	}
	return true
}

// startFlusher starts the flusher if it is not running; false if it is not
// running and cannot start (the service is closing).
func (p *pricing) startFlusher() bool {
	p.qmu.Lock()
	start := !p.flushing && !p.stopped
	running := p.flushing
	p.flushing = true
	p.qmu.Unlock()
	if running {
		return true
	}
	if start && p.goOwned != nil && p.goOwned(p.flushLoop) {
		return true
	}
	p.qmu.Lock()
	p.flushing = false
	p.qmu.Unlock()
	return false
}

// flushLoop is the flusher, a goroutine owned by the service and running
// only while ledgers hold charges: every Settlement.Interval it applies what
// each ledger queued since the last round holds past its margin, and when
// a child's kept margin falls due it applies that. It returns after a round
// that found nothing to do; when the service closes it applies every kept
// margin due at once and stops for good.
func (p *pricing) flushLoop() {
	next := time.Now().Add(p.settle.Interval)
	t := time.NewTimer(delay.Positive(0)) // the first pass finds when the first late ledger is due
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.wake:
		case <-p.ctx.Done():
			p.stopFlusher()
			return // the rest apply what they hold as their streams end
		}
		now := time.Now()
		ls, due, wake, idle := p.takeDue(now, &next)
		if idle {
			return
		}
		for _, l := range ls {
			if p.ctx.Err() != nil {
				break // the rest apply what they hold as their streams end, or as the loop stops
			}
			l.flushQueued()
		}
		for _, l := range due {
			if p.ctx.Err() != nil {
				break
			}
			l.flushLate(false)
		}
		t.Reset(delay.Positive(time.Until(wake)))
	}
}

// stopFlusher stops the flusher for good, as the service closes, and
// applies every kept margin at once.
func (p *pricing) stopFlusher() {
	p.qmu.Lock()
	late := p.late
	p.late = nil
	p.flushing = false
	p.stopped = true
	p.qmu.Unlock()
	for _, ll := range late {
		ll.l.flushLate(true)
	}
}

// takeDue takes off the flusher's lists, at now, the queued ledgers if a
// round is due (*next, moved on to the next round) and the late ledgers
// that fell due; wake is when the flusher next has something to do. idle:
// a round found nothing to do and nothing waits: the flusher is marked not
// running, for the next charge to start it again.
func (p *pricing) takeDue(now time.Time, next *time.Time) (ls, due []*ledger, wake time.Time, idle bool) {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	round := !now.Before(*next)
	if round {
		ls = p.queue
		p.queue = nil
		*next = now.Add(p.settle.Interval)
	}
	wake = *next
	kept := p.late[:0]
	for _, ll := range p.late {
		if !now.Before(ll.due) {
			due = append(due, ll.l)
			continue
		}
		kept = append(kept, ll)
		if ll.due.Before(wake) {
			wake = ll.due
		}
	}
	clear(p.late[len(kept):])
	p.late = kept
	if round && len(ls) == 0 && len(due) == 0 && len(p.late) == 0 {
		p.flushing = false
		return nil, nil, wake, true
	}
	return ls, due, wake, false
}

// unpaid is the error that ends the streams of a ledger whose charge bee's
// accounting refused, counted. It wraps err as it is: a p2p.BlockPeerError
// from bee's accounting stays one, for the handler to return to bee. The
// reason comes first, so that it survives a cut to a WebSocket close
// reason (123 bytes).
func (l *ledger) unpaid(price uint64, err error) error {
	if l.parent {
		l.p.metrics.unpaid.WithLabelValues("parent").Inc()
		return fmt.Errorf("%w: %w (child %s, a charge of %d)", ErrUnpaid, err, l.t.peer, price)
	}
	l.p.metrics.unpaid.WithLabelValues("child").Inc()
	return fmt.Errorf("%w: %w (parent %s, a charge of %d)", ErrUnpaid, err, l.t.peer, price)
}

// read charges one frame read whole from the stream, priced by cd: at a
// parent a frame from the child (up), at a child one from the parent
// (down). The frame has passed: it is held, and what the ledger holds is
// applied if it reached the settlement's bounds.
func (m *meter) read(cd codec, b []byte) error {
	var unit uint64
	switch {
	case m.l.parent && pricedUp(cd, b):
		unit = m.up
	}
	// A child charges a delivery once the receiver took it (took).
	if unit == 0 {
		return nil
	}
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	return m.l.holdLocked(unit, 1, true)
}
