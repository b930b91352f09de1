// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/devchain"
	"github.com/ethersphere/bps/pkg/node"
)

// bpsPlugin is a bps.Service as a node plugin, built with the node's
// transport binding check; HoldsStreams and Metrics are promoted.
type bpsPlugin struct {
	*bps.Service
	peers *peerSet // nil: no connect hooks
}

func (p bpsPlugin) Protocol() p2p.ProtocolSpec {
	spec := p.Service.Protocol()
	if p.peers != nil {
		spec.ConnectIn = p.peers.hook
		spec.ConnectOut = p.peers.hook
	}
	return spec
}

var _ node.StreamHolder = bpsPlugin{}

// bpsFactory attaches a bps.Service with options o; peers, if not nil,
// learns of every peer its connect hooks see.
func bpsFactory(o bps.Options, peers *peerSet) node.PluginFactory {
	return func(env node.PluginEnv) (node.Plugin, error) {
		o := o // each node its own
		o.Logger, o.PeerCheck, o.Signer = env.Logger, env.PeerCheck, env.Signer
		s, err := bps.New(env.Streamer, env.Overlay, o)
		if err != nil {
			return nil, err
		}
		return bpsPlugin{Service: s, peers: peers}, nil
	}
}

// peerSet records the peers a node's connect hooks saw.
type peerSet struct{ w *echo }

func newPeerSet() *peerSet {
	e, _ := newEcho(node.PluginEnv{Overlay: swarm.ZeroAddress})
	return &peerSet{w: e.(*echo)}
}

func (s *peerSet) hook(ctx context.Context, p p2p.Peer) error { return s.w.connect(ctx, p) }

func (s *peerSet) wait(ctx context.Context, peer swarm.Address) error { return s.w.waitPeer(ctx, peer) }

// quietBlockTime is the block time of startChain's devchain. bee v2.8.1
// races with itself (docs/design.md): its postage listener's
// batchservice.UpdateBlockNumber changes, in place, the chain state that
// status.LocalSnapshot reads when it answers a peer's salud round (every
// full node's, at its warm-up and 10 s, 30 s … later). With 1 s blocks the
// listener writes every few seconds, and `-race` failed
// TestPricingOnBeeAccounting — every assertion passed — about once in 100
// runs on a loaded machine ("race detected during execution of test").
// With 30 s blocks it writes as the node starts and then after these
// tests' nodes are gone (as cmd/bee-bps's testBlockTime); nothing here
// needs the chain to move.
const quietBlockTime = 30 * time.Second

// startChain starts a devchain that the test stops.
func startChain(t *testing.T) *devchain.Chain {
	t.Helper()
	chain, err := devchain.New(devchain.Options{BlockTime: quietBlockTime})
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := chain.Close(); err != nil {
			t.Error(err)
		}
	})
	return chain
}

// feedKey is a feed owner: the admin of an explicit-authorship cohort.
type feedKey struct {
	signer crypto.Signer
	addr   []byte
}

func newFeedKey(t testing.TB) feedKey {
	t.Helper()
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(pk)
	addr, err := signer.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	return feedKey{signer: signer, addr: addr.Bytes()}
}

func feedSpecOf(t testing.TB, name string, admin feedKey) *bps.Spec {
	t.Helper()
	topic, err := crypto.LegacyKeccak256([]byte(name))
	if err != nil {
		t.Fatal(err)
	}
	sp, err := bps.NewFeedSpec(topic, admin.addr)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// receive waits for the next delivery on c and checks its payload.
func receive(ctx context.Context, t *testing.T, who string, c <-chan bps.Delivery, want string) {
	t.Helper()
	select {
	case d, ok := <-c:
		if !ok {
			t.Fatalf("%s: subscription ended before %q arrived", who, want)
		}
		if string(d.Payload()) != want {
			t.Fatalf("%s: got %q, want %q", who, d.Payload(), want)
		}
	case <-ctx.Done():
		t.Fatalf("%s: %q did not arrive: %v", who, want, ctx.Err())
	}
}
