// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	beemetrics "github.com/ethersphere/bee/v2/pkg/metrics"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/encoding/protowire"
)

// Charging for depth on bee's own accounting (docs/protocol.md, "Prices"):
// a child owes its parent Prices.Delivery per Message written down, and
// Prices.Publish × its depth per Message written up; control frames are
// free. Both ends price each frame alike, from the depth the parent stated
// in its Ack, and settle through a meter in batches. A charge bee refuses
// ends the stream with bee's own error (the parent: past the disconnect
// threshold; the child: ErrUnpaid), never as a BPS violation.

// BeeBasePrice is bee's base price in v2.8.1 (pkg/node: basePrice, not
// exported): what a retrieval or a pushsync hop costs for a chunk at the
// largest proximity, the cheapest chunk bee moves.
const BeeBasePrice = 10_000

// DefaultPrice is the default price of a delivery and of a publication's
// hop: bee's base price shared by a relay's default fan-out, so that a
// relay passing one update to its DefaultRelayCapacity children earns what
// a chunk's hop earns in bee. At it, pseudosettle's refresh alone
// (BeeRefreshRate) pays for 7,200 deliveries a second from a full-node
// parent to each child (720 to a light node).
const DefaultPrice = BeeBasePrice / DefaultRelayCapacity

// Prices are what BPS charges, in bee's accounting units. Node configuration
// (bps-delivery-price, bps-publish-price): both ends of a stream must agree
// on them, as bee's nodes agree on the base price; a node whose prices
// differ keeps a ledger its peers do not, and is cut by bee's accounting
// when the difference passes the threshold.
type Prices struct {
	// Delivery is what a child owes its parent for each Message the parent
	// writes down to it.
	Delivery uint64
	// Publish is what a child at depth d owes its parent, times d, for each
	// Message it writes up.
	Publish uint64
}

// DefaultPrices are DefaultPrice for a delivery and for each hop of a
// publication.
func DefaultPrices() Prices { return Prices{Delivery: DefaultPrice, Publish: DefaultPrice} }

// ErrUnpaid is wrapped by the error that ends a stream whose charge bee's
// accounting refused, at either end; the accounting's own error is wrapped
// too (accounting.ErrOverdraft, accounting.ErrDisconnectThresholdExceeded).
var ErrUnpaid = errors.New("bps: bandwidth not paid")

// SetAccounting makes the service charge for depth with prices on acc
// (bee's accounting). Call it before registering Protocol, as SetPeerCheck;
// a nil acc, or zero prices, charges nothing.
func (s *Service) SetAccounting(acc accounting.Interface, p Prices) {
	s.SetSettledAccounting(acc, p, Settlement{})
}

// SetSettledAccounting is SetAccounting with when each stream's meter
// applies what it counted (zero fields: the defaults).
func (s *Service) SetSettledAccounting(acc accounting.Interface, p Prices, st Settlement) {
	if acc == nil || p == (Prices{}) {
		s.pricing = nil
		return
	}
	s.pricing = newPricing(s.ctx, acc, p, st)
	s.pricing.goOwned = s.goOwned
}

// Settlement is when the service's meters apply what they counted; zero if
// it charges nothing.
func (s *Service) Settlement() Settlement {
	if s.pricing == nil {
		return Settlement{}
	}
	return s.pricing.settle
}

// Prices are the prices the service charges; zero if it charges nothing.
func (s *Service) Prices() Prices {
	if s.pricing == nil {
		return Prices{}
	}
	return s.pricing.prices
}

// PeerCharges is what BPS moved on bee's accounting with one peer, over the
// streams this node holds with it now (since the first of them opened).
type PeerCharges struct {
	Peer swarm.Address
	// Debited is what the peer was charged for (it owes this node): frames
	// this node delivered to it, publications it sent up to this node.
	Debited uint64
	// Credited is what this node was charged for (it owes the peer).
	Credited uint64
	// Streams are the priced streams held with the peer.
	Streams int
}

// Charges lists, per peer with a priced stream, what BPS moved on bee's
// accounting; nil if the service charges nothing.
func (s *Service) Charges() []PeerCharges {
	if s.pricing == nil {
		return nil
	}
	return s.pricing.charges()
}

// Settle applies on bee's accounting, now, all that every peer's ledger
// holds, a child's kept margin too: after it, Charges and bee's balances
// count every frame whose charge was counted before the call. Ledgers
// otherwise settle on their own (see Settlement and ledger), and a child's
// ledger stays behind its parent's by its margin; Settle may put it
// ahead of a parent that has not applied what it holds, so that a payment
// bee makes just then is accepted short and bee cuts the parent. It is for
// a node's tests and its measurements.
func (s *Service) Settle() {
	if s.pricing == nil {
		return
	}
	p := s.pricing
	var ls []*ledger
	p.mu.Lock()
	for _, t := range p.peers {
		for _, l := range t.ledgers {
			if l != nil {
				ls = append(ls, l)
			}
		}
	}
	p.mu.Unlock()
	p.qmu.Lock()
	for _, l := range p.late {
		ls = append(ls, l.l)
	}
	p.qmu.Unlock()
	for _, l := range ls {
		l.mu.Lock()
		_ = l.flushLocked(true)
		l.mu.Unlock()
	}
}

// PricingMetrics are the collectors of the accounting of BPS (nil if the
// service charges nothing), for the node to register beside Metrics.
func (s *Service) PricingMetrics() []prometheus.Collector {
	if s.pricing == nil {
		return nil
	}
	m := &s.pricing.metrics
	return []prometheus.Collector{m.debited, m.credited, m.unpaid, m.flushes}
}

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
type meter struct {
	l    *ledger
	down uint64 // the price of a Message written down (a delivery)
	up   uint64 // the price of a Message written up: Publish × the child's depth
	kill func(error) bool
	once sync.Once
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
}

// Settlement is when a peer's ledger applies what its streams counted (see
// meter). The zero value of a field takes its default.
type Settlement struct {
	// Frames: a ledger applies once it holds this many priced frames.
	// Default DefaultSettleFrames; 1 applies every frame on its own.
	Frames int
	// Credit: ... or once what it holds would pass this many units.
	// Default DefaultSettleCredit.
	Credit uint64
	// Interval: ... or at most this long after the first charge it holds.
	// Default DefaultSettleInterval.
	Interval time.Duration
	// Margin: what a child keeps back of what it counted with a peer,
	// applied only when its last stream with that peer ends, so that its
	// ledger never stands above its parent's (see meter). Default: what a
	// parent settling alike may hold unapplied (Credit or Frames frames,
	// whichever is less) and one write of 32 frames in flight each way on
	// each stream, at the dearest price of the streams, at most twice
	// Credit: 80,000 units at the default prices, depth 1 and one stream;
	// 180,000 from four streams on. Negative: none, the child applies as a
	// parent does — for a test of the batches, or an accounting that never
	// settles by refresh.
	Margin int64
}

// BeeRefreshRate is what bee v2.8.1's pseudosettle refreshes a full node
// per second, in accounting units (pkg/node: refreshRate, not exported); a
// light node gets a tenth.
const BeeRefreshRate = 4_500_000

// Default values of Settlement.
const (
	// DefaultSettleFrames is twice the frames one write batches.
	DefaultSettleFrames = 2 * maxBatchFrames
	// DefaultSettleCredit is what pseudosettle refreshes a full node in
	// 20 ms: 1/150 of bee's default payment threshold (13.5 M), 1/15 of a
	// light node's, well inside the 25 % tolerance above either at which
	// bee disconnects a debtor.
	DefaultSettleCredit = BeeRefreshRate / 50
	// DefaultSettleInterval is pseudosettle's own period.
	DefaultSettleInterval = time.Second
)

func (st Settlement) withDefaults() Settlement {
	if st.Frames <= 0 {
		st.Frames = DefaultSettleFrames
	}
	if st.Credit == 0 {
		st.Credit = DefaultSettleCredit
	}
	if st.Interval <= 0 {
		st.Interval = DefaultSettleInterval
	}
	return st
}

// upPrice is Prices.Publish × the depth of a child of a parent that stated
// depth, saturated.
func (p Prices) upPrice(stated uint32) uint64 {
	hi, lo := bits.Mul64(p.Publish, uint64(stated)+1)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
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

// keep is a child's margin with a peer over streams streams whose dearest
// Message costs unit: what its parent's ledger, settling alike, may hold
// unapplied — Credit or Frames frames, whichever is less — and, on each
// stream, a write of maxBatchFrames the parent counts only once it has
// passed and one the child counts only once it has passed; at most twice
// Credit, so that the margin does not delay the child's early payment past
// what bee tolerates (a light node's 25 %: 337,500 units, less what the
// child may hold past its margin). The cap takes over from four streams on
// at the defaults: a refresh sent while more than that many writes are in
// flight at once could be accepted short.
func (st Settlement) keep(unit uint64, streams int) uint64 {
	switch {
	case st.Margin < 0:
		return 0
	case st.Margin > 0:
		return uint64(st.Margin)
	}
	hold := min(st.Credit, price(unit, st.Frames))
	inFlight := price(unit, maxBatchFrames)
	k := hold + price(inFlight, 2*streams)
	if k < hold {
		k = math.MaxUint64
	}
	return min(k, 2*min(st.Credit, math.MaxUint64/2))
}

// lateDelay is how long after a child's last stream with a peer ended it
// applies the margin it kept (Settlement.Interval, at most 250 ms): its
// parent applies what it holds as it sees the stream end, and the end
// travels ahead of the payment on the same connection. Longer would lose
// the margin to a connection bee prunes once its last stream has ended.
func (st Settlement) lateDelay() time.Duration { return min(st.Interval, 250*time.Millisecond) }

// accountingWait bounds how long a new stream waits for bee to connect its
// peer's accounting.
const accountingWait = 2 * time.Second

// await waits, at most accountingWait, until bee's accounting takes charges
// for peer. bee connects a peer's accounting on a goroutine of its
// pseudosettle hook once the peer has connected, and a charge before that
// fails ("connection not initialized yet"): a stream opened in the first
// moments of a connection would end on its first frame. A zero debit,
// released at once, is the probe: it moves no balance. If the wait runs
// out, the stream goes ahead and its first charge says why.
func (p *pricing) await(peer swarm.Address) {
	var t *time.Timer
	for wait, waited := 5*time.Millisecond, time.Duration(0); ; wait *= 2 {
		act, err := p.acc.PrepareDebit(p.ctx, peer, 0)
		if err == nil {
			act.Cleanup()
			return
		}
		if waited >= accountingWait || p.ctx.Err() != nil {
			return
		}
		wait = min(wait, accountingWait-waited)
		if t == nil {
			t = time.NewTimer(wait)
			defer t.Stop()
		} else {
			t.Reset(wait)
		}
		select {
		case <-t.C:
		case <-p.ctx.Done():
			return
		}
		waited += wait
	}
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

// price is unit × n, saturated.
func price(unit uint64, n int) uint64 {
	hi, lo := bits.Mul64(unit, uint64(n))
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// heldCharge is the accounting.Action prepareWrite hands the writer: its
// Apply is apply's, which adds the write's price to what the ledger holds.
type heldCharge struct{ m *meter }

func (heldCharge) Apply() error { return nil }
func (heldCharge) Cleanup()     {}

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
	t := time.NewTimer(0) // the first pass finds when the first late ledger is due
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-p.wake:
		case <-p.ctx.Done():
			p.qmu.Lock()
			late := p.late
			p.late = nil
			p.flushing = false
			p.stopped = true
			p.qmu.Unlock()
			for _, ll := range late {
				ll.l.flushLate(true)
			}
			return // the rest apply what they hold as their streams end
		}
		now := time.Now()
		p.qmu.Lock()
		var ls []*ledger
		round := !now.Before(next)
		if round {
			ls = p.queue
			p.queue = nil
			next = now.Add(p.settle.Interval)
		}
		var due []*ledger
		wake := next
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
			p.qmu.Unlock()
			return
		}
		p.qmu.Unlock()
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
		t.Reset(time.Until(wake))
	}
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
	case !m.l.parent && pricedDown(cd, b):
		unit = m.down
	}
	if unit == 0 {
		return nil
	}
	m.l.mu.Lock()
	defer m.l.mu.Unlock()
	return m.l.holdLocked(unit, 1, true)
}

// pricedOut reports whether the writer charges for f: a Message (a bare
// frame whose kind is unset is one).
func pricedOut(f *outFrame) bool {
	return f.b != nil && (f.kind == 0 || f.kind == kindMessage)
}

// pricedDown reports whether a frame read from a parent is a Message: every
// bare frame is; an envelope says so in its first field.
func pricedDown(cd codec, b []byte) bool {
	if cd == codecBare {
		return true
	}
	return envelopeKind(b) == kindMessage
}

// pricedUp reports whether a frame read from a child is a Message. A bare
// frame is one unless it is a well-formed Claim — what decodeUp takes for a
// claim; anything else that is not a Message is a violation that ends the
// stream anyway. A Message's address is 32 bytes and a claim's 20, so only
// a frame whose first field is 20 bytes long is decoded.
func pricedUp(cd codec, b []byte) bool {
	if cd != codecBare {
		return envelopeKind(b) == kindMessage
	}
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num != 1 || typ != protowire.BytesType {
		return true
	}
	if v, k := protowire.ConsumeBytes(b[n:]); k < 0 || len(v) != AddressSize {
		return true
	}
	claim := new(pb.Claim)
	return decodeFrame(b, claim) != nil || !claimWellFormed(claim)
}

// envelopeKind is the kind of an envelope's frame: its first field's
// number, 0 if it has none.
func envelopeKind(b []byte) frameKind {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || typ != protowire.BytesType || num > math.MaxUint8 {
		return 0
	}
	return frameKind(num)
}

// priceChild meters the stream of a child at this node, a parent: what the
// writer writes down and what fr reads up. ack is the Ack the writer writes
// first, whose depth prices the child's publications. Call it before the
// writer starts; the meter ends with the writer.
func (s *Service) priceChild(ps *peerStream, fr *frameReader, ack []byte) {
	if s.pricing == nil {
		return
	}
	var stated uint32
	a := new(pb.Ack)
	if n, k := protowire.ConsumeVarint(ack); k > 0 && uint64(len(ack)-k) == n && decodeFrame(ack[k:], a) == nil {
		stated = a.GetDepth()
	}
	s.pricing.await(ps.peer)
	m := s.pricing.meter(ps.peer, true, stated, ps.kill)
	ps.meter.Store(m)
	fr.onFrame = func(b []byte) error { return m.read(ps.codec, b) }
}

// priceParent meters this node's stream to a parent that stated depth
// stated in its Ack: what the writer writes up and what fr reads down.
// newClientStream has waited for the parent's accounting.
func (s *Service) priceParent(cs *clientStream, fr *frameReader) {
	if s.pricing == nil {
		return
	}
	m := s.pricing.meter(cs.peer, false, cs.stated, cs.kill)
	cs.meter.Store(m)
	fr.onFrame = func(b []byte) error { return m.read(cs.codec, b) }
}
