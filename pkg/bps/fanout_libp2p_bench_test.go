// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build unix && benchlibp2p

package bps_test

// The fan-out benchmarks on real libp2p streams: bee's own libp2p service
// (pkg/p2p/libp2p: bee's handshake, yamux over TCP on loopback), one per
// node, as pkg/node/nodetest starts it for identities. A build tag keeps
// pkg/node and bee's libp2p out of the package's ordinary test binary:
//
//	go test -tags benchlibp2p -run '^$' -bench 'Fanout' ./pkg/bps/

import (
	"context"
	"fmt"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node/nodetest"
	"go.uber.org/goleak"
)

// libp2p's and bee's goroutines that outlive a closed identity for a while:
// nodetest's list, and bee's reachability worker.
func init() {
	leakOptions = append(leakOptions, nodetest.LeakOptions()...)
	leakOptions = append(leakOptions,
		goleak.IgnoreTopFunction("github.com/ethersphere/bee/v2/pkg/p2p/libp2p.(*Service).reachabilityWorker.func1"))
}

// libp2pSubs are the audiences on libp2p: every subscriber stream of a
// benchmark comes from one identity, over one yamux connection.
var libp2pSubs = []int{100, 1000}

func BenchmarkFanoutLibp2p(b *testing.B) {
	forLibp2p(b, func(b *testing.B, n, size int) { benchRawFanout(b, libp2pTransport, n, size, false) })
}

func BenchmarkFanoutLibp2pPaced(b *testing.B) {
	forLibp2p(b, func(b *testing.B, n, size int) { benchFanoutPaced(b, libp2pTransport, n, size) })
}

func BenchmarkFanoutLibp2pFloor(b *testing.B) {
	forLibp2p(b, func(b *testing.B, n, size int) { benchFanoutFloor(b, libp2pTransport, n, size, false, false) })
}

func BenchmarkFanoutLibp2pFloorPaced(b *testing.B) {
	forLibp2p(b, func(b *testing.B, n, size int) { benchFanoutFloor(b, libp2pTransport, n, size, true, false) })
}

func forLibp2p(b *testing.B, f func(b *testing.B, n, size int)) {
	for _, n := range libp2pSubs {
		for _, p := range benchPayloads {
			b.Run(fmt.Sprintf("subs=%d/payload=%s", n, p.name), func(b *testing.B) { f(b, n, p.size) })
		}
	}
}

// libp2pNet starts nodetest identities: each node a bee libp2p service
// listening on loopback, with a BPS service.
type libp2pNet struct{}

func libp2pTransport(testing.TB) fanoutTransport { return libp2pNet{} }

type libp2pNode struct{ *nodetest.Identity }

func (n libp2pNode) NewStream(ctx context.Context, to swarm.Address, h p2p.Headers, proto, version, stream string) (p2p.Stream, error) {
	return n.P2P.NewStream(ctx, to, h, proto, version, stream)
}

func (n libp2pNode) AddProtocol(spec p2p.ProtocolSpec) error { return n.P2P.AddProtocol(spec) }

func (n libp2pNode) Overlay() swarm.Address { return n.Identity.Overlay }

const benchNetworkID = 1

func (libp2pNet) node(tb testing.TB, o *bps.Options) (fanoutNode, *bps.Service) {
	tb.Helper()
	io := nodetest.IdentityOptions{NetworkID: benchNetworkID, Full: true}
	if o != nil {
		io.BPS = *o
	}
	id, err := nodetest.NewIdentity(context.Background(), io)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := id.Close(); err != nil {
			tb.Errorf("close identity: %v", err)
		}
	})
	return libp2pNode{id}, id.BPS
}

func (libp2pNet) connect(tb testing.TB, a, b fanoutNode) {
	tb.Helper()
	addrs, err := b.(libp2pNode).P2P.Addresses()
	if err != nil {
		tb.Fatal(err)
	}
	if err := a.(libp2pNode).Connect(context.Background(), addrs); err != nil {
		tb.Fatal(err)
	}
}
