// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"errors"
	"time"

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
//
// Three files: this one, the Service's pricing API and where a stream is
// metered (priceChild at a parent, priceParent at a child, await before
// either); price.go, what a frame costs and which frames are priced, pure;
// ledger.go, the meters and ledgers that count and apply charges, and
// their flusher. The writer charges in stream.go (putBatch), the reader in
// codec.go (frameReader.onFrame).

// ErrUnpaid is wrapped by the error that ends a stream whose charge bee's
// accounting refused, at either end; the accounting's own error is wrapped
// too (accounting.ErrOverdraft, accounting.ErrDisconnectThresholdExceeded).
var ErrUnpaid = errors.New("bps: bandwidth not paid")

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

// Settle sends, on every multihop stream to a parent, a receipt of the
// deliveries not yet acknowledged (receipt.go) and waits until each is
// written; then it applies on bee's accounting, now, all that every
// peer's ledger holds, a child's kept margin too: after it, Charges and bee's balances
// count every frame whose charge was counted before the call. Ledgers
// otherwise settle on their own (see Settlement and ledger), and a child's
// ledger stays behind its parent's by its margin; Settle may put it
// ahead of a parent that has not applied what it holds, so that a payment
// bee makes just then is accepted short and bee cuts the parent. It is for
// a node's tests and its measurements.
func (s *Service) Settle() {
	s.tellReceipts()
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
	return []prometheus.Collector{m.debited, m.credited, m.unpaid, m.flushes, m.unacked}
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
	if ps.receipted(m) {
		m.l.debtBound() // read from bee once, here, not under the writer's locks
	}
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
