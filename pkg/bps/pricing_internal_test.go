// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"context"
	"errors"
	"math/big"
	"sync"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// recAccounting is an accounting.Interface that records the charges
// prepared, applied and released, for the writer's tests.
type recAccounting struct {
	mu       sync.Mutex
	prepared []uint64 // prices prepared, debits and credits
	applied  []uint64 // prices applied
	cleaned  int      // actions released
	notReady int      // probes refused before the peer's accounting is connected
	probes   int
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
	if price == 0 { // a probe of whether the peer's accounting is connected
		a.probes++
		if a.probes <= a.notReady {
			return nil, errors.New("connection not initialized yet")
		}
		return recAction{a: &recAccounting{}}, nil
	}
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
	return newPricing(context.Background(), acc, Prices{Delivery: delivery}, Settlement{}).meter(peer, true, 0, nil)
}

// TestPricingAwaitsAccounting: a new stream waits until bee's accounting
// takes charges for its peer (bee connects it on a goroutine of its own),
// with zero-priced probes that move nothing.
func TestPricingAwaitsAccounting(t *testing.T) {
	t.Parallel()
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	acc := &recAccounting{notReady: 3}
	newPricing(context.Background(), acc, Prices{Delivery: 5}, Settlement{}).await(peer)
	if acc.probes != 4 {
		t.Fatalf("%d probes, want 4: three refused, then taken", acc.probes)
	}
	if prepared, applied, _ := acc.record(); len(prepared) != 0 || len(applied) != 0 {
		t.Fatalf("the probes charged: prepared %v, applied %v", prepared, applied)
	}
}

// TestPricingRelayChild: at a parent that stated depth 2 in its Ack (a
// relay), a child's publication costs Publish × 3, read from the child; a
// lease request on an envelope is free (every bare frame is a Broadcast).
func TestPricingRelayChild(t *testing.T) {
	t.Parallel()
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	acc := new(recAccounting)
	s := &Service{pricing: newPricing(context.Background(), acc, Prices{Delivery: 1, Publish: 10}, Settlement{})}
	msg := encodeFrame(&pb.Broadcast{Soc: bytes.Repeat([]byte{1}, 120), Kind: pb.Kind_DATA})
	lease := encodeFrame(&pb.Lease{Nonce: 3, Addr: bytes.Repeat([]byte{2}, AddressSize)})
	for _, cd := range []codec{codecEnvelope} {
		var in bytes.Buffer
		in.Write(cd.out(outFrame{b: msg, kind: kindBroadcast}))
		in.Write(cd.out(outFrame{b: lease, kind: kindLease}))
		in.Write(cd.out(outFrame{b: msg, kind: kindBroadcast}))
		ps := &peerStream{peer: peer, codec: cd}
		fr := newFrameReader(&in)
		s.priceChild(ps, fr, encodeFrame(&pb.Ack{Status: pb.Status_OK, Depth: 2}))
		for range 3 {
			if _, err := fr.readRaw(); err != nil {
				t.Fatal(err)
			}
		}
		ps.meter.Load().done()
		_, applied, _ := acc.record()
		if len(applied) != 1 || applied[0] != 60 {
			t.Fatalf("codec %d: applied %v, want two publications at 3 hops × 10, in one charge at the stream's end", cd, applied)
		}
		acc.applied = nil
	}
	if len(s.pricing.peers) != 0 {
		t.Fatalf("%d tallies after every stream ended", len(s.pricing.peers))
	}
}
