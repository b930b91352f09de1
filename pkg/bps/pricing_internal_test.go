// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"math/big"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// recAccounting is an accounting.Interface that records the charges
// prepared, applied and released, for the writer's tests.
type recAccounting struct {
	mu       sync.Mutex
	prepared []uint64 // prices prepared, debits and credits
	applied  []uint64 // prices applied
	cleaned  int      // actions released
}

var _ accounting.Interface = (*recAccounting)(nil)

type recAction struct {
	a     *recAccounting
	price uint64
}

func (r recAction) Apply() error {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	r.a.applied = append(r.a.applied, r.price)
	return nil
}

func (r recAction) Cleanup() {
	r.a.mu.Lock()
	defer r.a.mu.Unlock()
	r.a.cleaned++
}

func (a *recAccounting) prepare(price uint64) (accounting.Action, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.prepared = append(a.prepared, price)
	return recAction{a: a, price: price}, nil
}

func (a *recAccounting) PrepareDebit(_ context.Context, _ swarm.Address, price uint64) (accounting.Action, error) {
	return a.prepare(price)
}

func (a *recAccounting) PrepareCredit(_ context.Context, _ swarm.Address, price uint64, _ bool) (accounting.Action, error) {
	return a.prepare(price)
}

func (*recAccounting) Balance(swarm.Address) (*big.Int, error)            { return new(big.Int), nil }
func (*recAccounting) SurplusBalance(swarm.Address) (*big.Int, error)     { return new(big.Int), nil }
func (*recAccounting) Balances() (map[string]*big.Int, error)             { return nil, nil }
func (*recAccounting) CompensatedBalance(swarm.Address) (*big.Int, error) { return new(big.Int), nil }
func (*recAccounting) CompensatedBalances() (map[string]*big.Int, error)  { return nil, nil }
func (*recAccounting) PeerAccounting() (map[string]accounting.PeerInfo, error) {
	return nil, nil
}

func (a *recAccounting) record() (prepared, applied []uint64, cleaned int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]uint64(nil), a.prepared...), append([]uint64(nil), a.applied...), a.cleaned
}

// meterParent is a meter at a parent of peer, on acc, charging delivery
// for each Message written down.
func meterParent(acc accounting.Interface, peer swarm.Address, delivery uint64) *meter {
	return newPricing(context.Background(), acc, Prices{Delivery: delivery}).meter(peer, true, 0)
}
