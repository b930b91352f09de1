// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"math/big"
	"sync"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// racingAccounting is recAccounting whose balance is what was applied, and
// whose CompensatedBalance runs onRead once while it reads: the balance it
// returns is the one it read before.
type racingAccounting struct {
	recAccounting
	once   sync.Once
	onRead func()
}

func (a *racingAccounting) CompensatedBalance(swarm.Address) (*big.Int, error) {
	b := a.sum()
	a.once.Do(func() {
		if a.onRead != nil {
			a.onRead()
		}
	})
	return new(big.Int).SetUint64(b), nil
}

func (a *racingAccounting) sum() (s uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.applied {
		s += p
	}
	return s
}

// TestDebtRoomCountsAChargeDuringItsRead: a parent's estimate of what its
// child owes (receipt.go, debtRoom) is bee's balance and what the ledger
// applied since it read it. A receipt's charge applied while the balance
// is read — by the stream's reader, beside the writer asking for room —
// must be in one or the other: the read and the reset happen under the
// ledger's lock, which every application takes. Reading outside it, a
// charge applied in between was in neither, and a debtor was written past
// its bound (16 deliveries of 13 in TestPricingOnBeeAccounting, pkg/node,
// under load).
func TestDebtRoomCountsAChargeDuringItsRead(t *testing.T) {
	t.Parallel()
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	acc := new(racingAccounting)
	// Credit 1: every charge is applied as it is counted.
	m := newPricing(context.Background(), acc, Prices{Delivery: 10}, Settlement{Credit: 1, Debt: 1000}).meter(peer, true, 0, nil)
	defer m.done()
	if err := m.receipted(5); err != nil {
		t.Fatal(err)
	}
	l := m.l
	raced := false
	acc.onRead = func() {
		// The stream's reader, taking a receipt now: it can apply only
		// if the ledger is not held.
		if l.mu.TryLock() {
			l.mu.Unlock()
			raced = true
			if err := m.receipted(3); err != nil {
				t.Error(err)
			}
		}
	}
	if _, debt := l.debtRoom(0); debt != acc.sum() {
		t.Fatalf("the estimate of the child's debt is %d, bee's balance %d (a charge applied during the read: %v)", debt, acc.sum(), raced)
	}
	if err := m.receipted(3); err != nil { // after the read: counted as applied since
		t.Fatal(err)
	}
	if _, debt := l.debtRoom(0); debt != acc.sum() {
		t.Fatalf("the estimate of the child's debt is %d, bee's balance %d", debt, acc.sum())
	}
}
