// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node"
)

// TestPricingSustainedRate measures what deliveries a second a full-node
// parent can sell a child that pays by pseudosettle alone (no swap), at a
// price: on two real bee nodes, the parent's and the child's bee
// accounting take the charges BPS's meters make — one debit at the parent
// and one credit at the child per bps.DefaultSettleFrames deliveries —
// at a rate, for 20 s, while bee's pseudosettle refreshes over the
// connection. A rate is sustained if neither end refuses a charge (the
// parent's disconnect threshold, the child's overdraft). BPS's own frame
// path is not in the loop: this measures the accounting's cap, which
// ledger.go's batching leaves unchanged. A measurement, not a test (it
// takes minutes):
//
//	BPS_MEASURE_RATE=1 go test -run TestPricingSustainedRate -v ./pkg/node/
func TestPricingSustainedRate(t *testing.T) {
	if os.Getenv("BPS_MEASURE_RATE") == "" {
		t.Skip("a measurement: set BPS_MEASURE_RATE=1")
	}
	chain := startChain(t)
	bc := testConfig(t, "parent", chain)
	bc.FullNode = true
	bc.Plugin = pricedFactory(bps.DefaultPrices(), nil)
	parent := startNode(t, bc)
	underlays, err := parent.Underlays()
	if err != nil || len(underlays) == 0 {
		t.Fatalf("parent underlays %v: %v", underlays, err)
	}
	parentAcc := parent.Plugin().(pricedPlugin).acc

	const run = 20 * time.Second
	for _, tc := range []struct {
		name  string
		price uint64
		rate  int // deliveries per second
		full  bool
	}{
		{"before: bee's base price", bps.BeeBasePrice, 400, true},
		{"before: bee's base price", bps.BeeBasePrice, 900, true},
		{"after: the default price", bps.DefaultPrice, 5_000, true},
		{"after: the default price", bps.DefaultPrice, 6_400, true},
		{"after: the default price", bps.DefaultPrice, 14_400, true},
		{"after: the default price, a light child", bps.DefaultPrice, 640, false},
		{"after: the default price, a light child", bps.DefaultPrice, 1_440, false},
	} {
		t.Run(fmt.Sprintf("%s %d, %d a second", tc.name, tc.price, tc.rate), func(t *testing.T) {
			peers := newPeerSet()
			c := testConfig(t, "child", chain)
			c.FullNode = tc.full
			c.Plugin = pricedFactory(bps.DefaultPrices(), peers)
			for _, u := range underlays {
				c.Bootnodes = append(c.Bootnodes, u.String())
			}
			child := startNode(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := peers.wait(ctx, parent.Overlay()); err != nil {
				t.Fatal(err)
			}
			childAcc := child.Plugin().(pricedPlugin).acc
			waitAccounting(t, parentAcc, child.Overlay())
			waitAccounting(t, childAcc, parent.Overlay())
			delivered, maxDebt, cut := sell(t, parentAcc, childAcc, parent, child, tc.price, tc.rate, run)
			if cut != nil {
				t.Logf("CUT after %d deliveries (%.1f s): %v; the child owed at most %d", delivered, float64(delivered)/float64(tc.rate), cut, maxDebt)
				return
			}
			t.Logf("SUSTAINED %d deliveries in %s; the child owed at most %d", delivered, run, maxDebt)
		})
	}
}

// sell charges a batch of bps.DefaultSettleFrames deliveries at price
// every DefaultSettleFrames/rate seconds for run, as the parent's and the
// child's meters would — the parent's first: a child's ledger stays behind
// its parent's (pkg/bps, ledger.go) — it returns how many were charged, the largest debt
// the parent saw, and the refusal that ended it (nil: none).
func sell(t *testing.T, parentAcc, childAcc accounting.Interface, parent, child *node.Node, price uint64, rate int, run time.Duration) (int, int64, error) {
	t.Helper()
	const batch = bps.DefaultSettleFrames
	ctx := context.Background()
	tick := time.NewTicker(time.Duration(float64(time.Second) * batch / float64(rate)))
	defer tick.Stop()
	end := time.Now().Add(run)
	delivered, maxDebt := 0, int64(0)
	charge := price * batch
	for time.Now().Before(end) {
		<-tick.C
		debit, err := parentAcc.PrepareDebit(ctx, child.Overlay(), charge)
		if err != nil {
			return delivered, maxDebt, fmt.Errorf("parent: %w", err)
		}
		err = debit.Apply()
		debit.Cleanup()
		delivered += batch
		if b, berr := parentAcc.Balance(child.Overlay()); berr == nil && b.Int64() > maxDebt {
			maxDebt = b.Int64()
		}
		if err != nil {
			if !errors.Is(err, accounting.ErrDisconnectThresholdExceeded) {
				t.Fatalf("parent: %v", err)
			}
			return delivered, maxDebt, fmt.Errorf("parent: %w", err)
		}
		credit, err := childAcc.PrepareCredit(ctx, parent.Overlay(), charge, true)
		if err != nil {
			return delivered, maxDebt, fmt.Errorf("child: %w", err)
		}
		err = credit.Apply()
		credit.Cleanup()
		if err != nil {
			return delivered, maxDebt, fmt.Errorf("child: %w", err)
		}
	}
	return delivered, maxDebt, nil
}
