// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"math/big"
	"slices"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	statestore "github.com/ethersphere/bee/v2/pkg/statestore/mock"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest/bpsnet"
)

// Depth-priced bandwidth (issue 10; docs/protocol.md, "Prices: charging
// for depth on bee's accounting"): with prices set, every node charges on
// bee's own accounting — one accounting.Accounting per node
// over an in-memory state store, kept across the node's restarts as a bee
// node keeps its state store — connected to a peer when the two connect,
// as bee's p2p layer connects it. The payment threshold is out of reach, so
// nothing settles and nobody is cut: the run measures what moves.

// ledgers holds every node's accounting, by overlay.
type ledgers struct {
	mu sync.Mutex
	m  map[string]*accounting.Accounting
}

// newAccounting is the accounting of a node about to be built, which
// keep then files under the node's overlay.
func newAccounting() (*accounting.Accounting, error) {
	return accounting.NewAccounting(new(big.Int).Lsh(big.NewInt(1), 100), 25, 50, log.Noop, statestore.NewStateStore(), nil, big.NewInt(4_500_000), 10, nil)
}

// keep files acc as nd's accounting.
func (l *ledgers) keep(nd *bpsnet.Node, acc *accounting.Accounting) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]*accounting.Accounting)
	}
	l.m[nd.Overlay().ByteString()] = acc
}

// of is nd's accounting; nil if it has none.
func (l *ledgers) of(nd *bpsnet.Node) *accounting.Accounting {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[nd.Overlay().ByteString()]
}

func (sc Scenario) prices() bps.Prices {
	return bps.Prices{Delivery: sc.DeliveryPrice, Publish: sc.PublishPrice}
}

// priced makes o, the options of a node about to be built, charge the
// scenario's prices on an accounting of the node's own, which it returns
// (nil, if the scenario charges nothing). A restarted node keeps its
// options, so its accounting, as a bee node keeps its state store.
func (s *sim) priced(o *bps.Options) (*accounting.Accounting, error) {
	if s.sc.prices() == (bps.Prices{}) {
		return nil, nil
	}
	acc, err := newAccounting()
	if err != nil {
		return nil, err
	}
	o.Accounting, o.Prices = acc, s.sc.prices()
	return acc, nil
}

// price connects nd's accounting to every peer it connects to from now on
// and to the peers it has, as bee's p2p layer connects it. It runs before
// any peer can reach nd: at its first start, and in a restart's setup
// (bpsnet.RestartWith).
func (s *sim) price(nd *bpsnet.Node) error {
	acc := s.ledgers.of(nd)
	if acc == nil {
		return nil
	}
	connect := func(_ context.Context, p p2p.Peer) error { acc.Connect(p.Address, true); return nil }
	if err := nd.AddProtocol(p2p.ProtocolSpec{Name: "bps-sim-accounting", Version: "1.0.0", ConnectIn: connect, ConnectOut: connect}); err != nil {
		return err
	}
	for _, p := range nd.Peers() {
		acc.Connect(p.Address, true)
	}
	return nil
}

// PriceResult is what BPS moved on the nodes' accounting, by depth.
type PriceResult struct {
	Prices  bps.Prices         `json:"prices"`
	ByDepth []DepthBalance     `json:"by_depth"`
	Debited uint64             `json:"debited"`  // all nodes charged their peers
	Credit  uint64             `json:"credited"` // all nodes were charged; equal to debited when both ends agree
	Roles   map[string]Balance `json:"roles"`
}

// DepthBalance is the balance of the nodes at one depth: what they earned
// (charged their children and the publishers under them) and paid (were
// charged by their parents), per node.
type DepthBalance struct {
	Depth  int     `json:"depth"`
	Nodes  int     `json:"nodes"`
	Earned float64 `json:"earned"` // mean per node
	Paid   float64 `json:"paid"`   // mean per node
	NetMin int64   `json:"net_min"`
	NetP50 int64   `json:"net_p50"`
	NetMax int64   `json:"net_max"`
}

// Balance is a role's totals.
type Balance struct {
	Nodes  int    `json:"nodes"`
	Earned uint64 `json:"earned"`
	Paid   uint64 `json:"paid"`
}

// collectPrices reads every live node's charges, before the run stops its
// streams (charges are kept per stream held).
func (s *sim) collectPrices(res *Result) {
	if s.sc.prices() == (bps.Prices{}) {
		return
	}
	// Every node applies what its streams' meters hold (a node settles in
	// batches: pkg/bps/ledger.go), the run being quiet by now.
	for c := range res.Trees {
		for _, m := range s.members(c) {
			if m.svc != nil {
				m.svc.Settle()
			}
		}
	}
	pr := &PriceResult{Prices: s.sc.prices(), Roles: map[string]Balance{}}
	nets := map[int][]int64{}
	earned, paid := map[int]uint64{}, map[int]uint64{}
	for c, t := range res.Trees {
		depth := make(map[string]int, len(t.Nodes))
		for _, n := range t.Nodes {
			depth[n.Overlay] = n.Depth
		}
		for _, m := range s.members(c) {
			d, ok := depth[m.overlay.String()]
			if m.svc == nil || !ok || d < 0 {
				continue
			}
			var e, p uint64
			for _, ch := range m.svc.Charges() {
				e += ch.Debited
				p += ch.Credited
			}
			nets[d] = append(nets[d], int64(e)-int64(p))
			earned[d] += e
			paid[d] += p
			pr.Debited += e
			pr.Credit += p
			r := pr.Roles[m.role]
			r.Nodes++
			r.Earned += e
			r.Paid += p
			pr.Roles[m.role] = r
		}
	}
	depths := make([]int, 0, len(nets))
	for d := range nets {
		depths = append(depths, d)
	}
	slices.Sort(depths)
	for _, d := range depths {
		ns := nets[d]
		slices.Sort(ns)
		pr.ByDepth = append(pr.ByDepth, DepthBalance{
			Depth: d, Nodes: len(ns),
			Earned: float64(earned[d]) / float64(len(ns)), Paid: float64(paid[d]) / float64(len(ns)),
			NetMin: ns[0], NetP50: ns[len(ns)/2], NetMax: ns[len(ns)-1],
		})
	}
	res.Pricing = pr
}
