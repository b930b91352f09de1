// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build unix && benchlibp2p

package bps_test

import (
	"context"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node/nodetest"
)

// BenchmarkPricingLibp2p is BenchmarkPricing on bee's libp2p (one identity
// per node, yamux over TCP on loopback), where a delivery costs what it
// costs in a node:
//
//	go test -tags benchlibp2p -run '^$' -bench 'PricingLibp2p' ./pkg/bps/
func BenchmarkPricingLibp2p(b *testing.B) {
	b.Run("free", func(b *testing.B) { benchPricing(b, libp2pPricingTransport(), false, false) })
	b.Run("priced/ledger", func(b *testing.B) { benchPricing(b, libp2pPricingTransport(), true, false) })
	b.Run("priced/bee", func(b *testing.B) { benchPricing(b, libp2pPricingTransport(), true, true) })
}

// BenchmarkPricingPairedLibp2p is BenchmarkPricingPaired on bee's libp2p:
//
//	go test -tags benchlibp2p -run '^$' -bench 'PricingPairedLibp2p' -benchtime 1000x -cpu 2 ./pkg/bps/
func BenchmarkPricingPairedLibp2p(b *testing.B) {
	benchPricingPaired(b, libp2pPricingTransport())
}

func libp2pPricingTransport() benchTransport {
	ids := make(map[string]*nodetest.Identity)
	return benchTransport{
		node: func(b *testing.B, acc accounting.Interface) benchPeer {
			o := bps.Options{Bounds: bps.Bounds{QueueLen: 1024}}
			if acc != nil {
				o.Accounting, o.Prices = acc, bps.DefaultPrices()
			}
			id, err := nodetest.NewIdentity(context.Background(), nodetest.IdentityOptions{NetworkID: benchNetworkID, Full: true, BPS: o})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = id.Close() })
			ids[id.Overlay.ByteString()] = id
			return benchPeer{overlay: id.Overlay, svc: id.BPS}
		},
		connect: func(b *testing.B, a, c benchPeer) {
			addrs, err := ids[c.overlay.ByteString()].P2P.Addresses()
			if err != nil {
				b.Fatal(err)
			}
			if err := ids[a.overlay.ByteString()].Connect(context.Background(), addrs); err != nil {
				b.Fatal(err)
			}
		},
	}
}
