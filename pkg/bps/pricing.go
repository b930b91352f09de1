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

// Charging for depth (docs/design.md; docs/protocol.md, "Prices"): BPS
// bills its bandwidth on bee's own accounting, the accounting.Interface
// that pushsync and retrieval use, settled by bee's pseudosettle and swap.
//
//   - Down: every Message a parent writes to a child — a delivery, a
//     service SOC included — costs the child Prices.Delivery, owed to the
//     parent.
//   - Up: every Message a child writes to its parent — a publication, its
//     own or one it relays — costs the child Prices.Publish × d, owed to
//     the parent, d being the child's depth: one below the depth the parent
//     stated in its Ack. A relay at depth d−1 pays its own parent for d−1
//     hops and so earns one.
//
// Both ends compute the same price from the frame's kind and the depth the
// parent stated in the Ack, which is fixed for the stream's life: the parent
// PrepareDebits the child, the child PrepareCredits the parent, both before
// the frame is written (the writer) or once it has been read whole (the
// reader), and both Apply once it has passed. Claims, probes and the other
// control frames are free.
//
// A charge that bee's accounting refuses ends the stream with the
// accounting's error, as it ends a pushsync or retrieval exchange: at the
// parent, a debt past the disconnect threshold (bee's
// accounting.ErrDisconnectThresholdExceeded, a p2p.BlockPeerError of bee's
// own) resets the child's stream and the handler returns the error to bee,
// which disconnects the peer for the time bee's accounting chose — not a BPS
// violation, no BPS blocklist; at the child, a debt it cannot settle (bee's
// accounting.ErrOverdraft, or a failed settlement) ends its stream, and
// Err() says why (ErrUnpaid).

// BeeBasePrice is bee's base price in v2.8.1 (pkg/node: basePrice, not
// exported): what a retrieval or a pushsync hop costs for a chunk at the
// largest proximity, the cheapest chunk bee moves. A BPS frame carries one
// chunk over one hop and is not routed by its address, so the defaults
// charge that cheapest price.
const BeeBasePrice = 10_000

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

// DefaultPrices are BeeBasePrice for a delivery and for each hop of a
// publication.
func DefaultPrices() Prices { return Prices{Delivery: BeeBasePrice, Publish: BeeBasePrice} }

// ErrUnpaid is wrapped by the error that ends a stream whose charge bee's
// accounting refused, at either end; the accounting's own error is wrapped
// too (accounting.ErrOverdraft, accounting.ErrDisconnectThresholdExceeded).
var ErrUnpaid = errors.New("bps: bandwidth not paid")

// SetAccounting makes the service charge for depth with prices on acc
// (bee's accounting). Call it before registering Protocol, as SetPeerCheck;
// a nil acc, or zero prices, charges nothing.
func (s *Service) SetAccounting(acc accounting.Interface, p Prices) {
	if acc == nil || p == (Prices{}) {
		s.pricing = nil
		return
	}
	s.pricing = newPricing(s.ctx, acc, p)
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

// PricingMetrics are the collectors of the accounting of BPS (nil if the
// service charges nothing), for the node to register beside Metrics.
func (s *Service) PricingMetrics() []prometheus.Collector {
	if s.pricing == nil {
		return nil
	}
	m := &s.pricing.metrics
	return []prometheus.Collector{m.debited, m.credited, m.unpaid}
}

// pricing is the accounting of one Service. Its peers map is guarded by mu,
// a small mutex around a small map (one entry per peer with a priced
// stream); the tallies in it are atomic.
type pricing struct {
	ctx    context.Context // the service's: bounds a wait for bee's per-peer lock
	acc    accounting.Interface
	prices Prices

	metrics pricingMetrics

	mu    sync.Mutex
	peers map[string]*tally
}

type tally struct {
	peer     swarm.Address
	streams  int // guarded by pricing.mu
	debited  atomic.Uint64
	credited atomic.Uint64
}

type pricingMetrics struct {
	debited  prometheus.Counter
	credited prometheus.Counter
	unpaid   *prometheus.CounterVec
}

func newPricing(ctx context.Context, acc accounting.Interface, p Prices) *pricing {
	return &pricing{ctx: ctx, acc: acc, prices: p, peers: make(map[string]*tally), metrics: pricingMetrics{
		debited: prometheus.NewCounter(prometheus.CounterOpts{Namespace: beemetrics.Namespace, Subsystem: "bps",
			Name: "accounting_debited", Help: "Accounting units BPS charged peers (deliveries down, publications up)."}),
		credited: prometheus.NewCounter(prometheus.CounterOpts{Namespace: beemetrics.Namespace, Subsystem: "bps",
			Name: "accounting_credited", Help: "Accounting units BPS was charged by parents."}),
		unpaid: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: beemetrics.Namespace, Subsystem: "bps",
			Name: "accounting_unpaid", Help: "Streams ended because bee's accounting refused a charge, by this node's side: parent (the child's debt), child (this node's)."},
			[]string{"side"}),
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

func (p *pricing) open(peer swarm.Address) *tally {
	p.mu.Lock()
	defer p.mu.Unlock()
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

// meter is the accounting of one priced stream: at a parent (a child's
// stream) every charge is a debit of the child, at a child (a stream to a
// parent) a credit of the parent.
type meter struct {
	p      *pricing
	t      *tally
	parent bool   // this node is the stream's parent
	down   uint64 // the price of a Message written down (a delivery)
	up     uint64 // the price of a Message written up: Publish × the child's depth
	once   sync.Once
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

func (p *pricing) meter(peer swarm.Address, parent bool, stated uint32) *meter {
	return &meter{p: p, t: p.open(peer), parent: parent, down: p.prices.Delivery, up: p.prices.upPrice(stated)}
}

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

// done ends the meter's stream's tally; later calls do nothing.
func (m *meter) done() {
	if m != nil {
		m.once.Do(func() { m.p.close(m.t) })
	}
}

// charge prepares a charge of n Messages at unit each (nil, nil if it is
// free): at a parent a debit of the child, at a child a credit of the
// parent.
func (m *meter) charge(unit uint64, n int) (accounting.Action, uint64, error) {
	hi, price := bits.Mul64(unit, uint64(n))
	if hi != 0 {
		price = math.MaxUint64
	}
	if price == 0 {
		return nil, 0, nil
	}
	var (
		act accounting.Action
		err error
	)
	if m.parent {
		act, err = m.p.acc.PrepareDebit(m.p.ctx, m.t.peer, price)
	} else {
		act, err = m.p.acc.PrepareCredit(m.p.ctx, m.t.peer, price, true)
	}
	if err != nil {
		return nil, 0, m.unpaid(price, err)
	}
	return act, price, nil
}

// prepareWrite prepares the charge of n Messages the stream's writer is
// about to write: down at a parent, up at a child.
func (m *meter) prepareWrite(n int) (accounting.Action, uint64, error) {
	if m.parent {
		return m.charge(m.down, n)
	}
	return m.charge(m.up, n)
}

// apply applies a prepared charge of price once its frames have passed, and
// releases it.
func (m *meter) apply(act accounting.Action, price uint64) error {
	err := act.Apply()
	act.Cleanup()
	if err != nil {
		return m.unpaid(price, err)
	}
	if m.parent {
		m.t.debited.Add(price)
		m.p.metrics.debited.Add(float64(price))
	} else {
		m.t.credited.Add(price)
		m.p.metrics.credited.Add(float64(price))
	}
	return nil
}

// unpaid is the error that ends a stream whose charge bee's accounting
// refused, counted. It wraps err as it is: a p2p.BlockPeerError from bee's
// accounting stays one, for the handler to return to bee. The reason comes
// first, so that it survives a cut to a WebSocket close reason (123 bytes).
func (m *meter) unpaid(price uint64, err error) error {
	if m.parent {
		m.p.metrics.unpaid.WithLabelValues("parent").Inc()
		return fmt.Errorf("%w: %w (child %s, a charge of %d)", ErrUnpaid, err, m.t.peer, price)
	}
	m.p.metrics.unpaid.WithLabelValues("child").Inc()
	return fmt.Errorf("%w: %w (parent %s, a charge of %d)", ErrUnpaid, err, m.t.peer, price)
}

// read charges one frame read whole from the stream, priced by cd: at a
// parent a frame from the child (up), at a child one from the parent
// (down). The frame has passed: the charge is applied at once.
func (m *meter) read(cd codec, b []byte) error {
	var act accounting.Action
	var price uint64
	var err error
	switch {
	case m.parent && pricedUp(cd, b):
		act, price, err = m.charge(m.up, 1)
	case !m.parent && pricedDown(cd, b):
		act, price, err = m.charge(m.down, 1)
	}
	if err != nil || act == nil {
		return err
	}
	return m.apply(act, price)
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
	m := s.pricing.meter(ps.peer, true, stated)
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
	m := s.pricing.meter(cs.peer, false, cs.stated)
	cs.meter.Store(m)
	fr.onFrame = func(b []byte) error { return m.read(cs.codec, b) }
}
