// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node/nodetest"
)

// oversaturationPeers is bee v2.8.1 kademlia's OverSaturationPeers: it
// refuses an inbound full node whose bin already holds this many reachable
// peers.
const oversaturationPeers = 18

// TestBrokerCapacityFromDistinctNodes: a real bee broker configured for 64
// subscriber streams per cohort holds one stream from each of 64 distinct
// bee identities (bee's libp2p service each, with its own key), half light
// nodes and half full nodes, every full one in the same kademlia bin of the
// broker (bin 0) — far past the 18 that bee's kademlia takes in a bin — and
// each receives the publication of a 65th identity. Without the node
// keeping BPS peers out of kademlia's bin counts, the broker refuses the
// full nodes past the 18th (bee's handshake picker).
func TestBrokerCapacityFromDistinctNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a bee node and 65 libp2p identities")
	}
	const (
		audience = 64
		full     = audience / 2
	)
	chain := startChain(t)
	bc := testConfig(t, "broker", chain)
	bc.FullNode = true
	bc.Plugin = bpsFactory(bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: audience}}, nil)
	broker := startNode(t, bc)
	underlays, err := broker.Underlays()
	if err != nil {
		t.Fatal(err)
	}
	holder := broker.Plugin().(bpsPlugin)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	identity := func(i int, isFull bool) *nodetest.Identity {
		t.Helper()
		o := nodetest.IdentityOptions{NetworkID: bc.NetworkID, Full: isFull}
		if isFull {
			o.Near, o.Bin = broker.Overlay(), 0
		}
		id, err := nodetest.NewIdentity(ctx, o)
		if err != nil {
			t.Fatalf("identity %d: %v", i, err)
		}
		t.Cleanup(func() {
			if err := id.Close(); err != nil {
				t.Errorf("identity %d: close: %v", i, err)
			}
		})
		if err := id.Connect(ctx, underlays); err != nil {
			t.Fatalf("identity %d (full %v): connect to the broker: %v", i, isFull, err)
		}
		return id
	}

	admin := newFeedKey(t)
	sp := feedSpecOf(t, "capacity", admin)
	subs := make([]*bps.Subscription, 0, audience)
	for i := range audience {
		isFull := i%2 == 1
		id := identity(i, isFull)
		sub, err := id.BPS.Subscribe(ctx, broker.Overlay(), sp)
		if err != nil {
			t.Fatalf("identity %d (full %v, %d subscribed before): subscribe: %v", i, isFull, len(subs), err)
		}
		t.Cleanup(func() { _ = sub.Close() })
		subs = append(subs, sub)
		if !holder.HoldsStreams(id.Overlay) {
			t.Fatalf("identity %d: the broker holds no stream of it", i)
		}
	}

	// bee's own view: the broker's bin 0 holds more full nodes than
	// kademlia would take. (bee runs a peer's connect hooks, which let its
	// streams in, before it adds the peer to kademlia: the last one may not
	// be there yet.)
	var topo struct {
		Bins map[string]struct {
			Connected int `json:"connected"`
		} `json:"bins"`
	}
	getJSON(t, broker.APIURL()+"/topology", &topo)
	if got := topo.Bins["bin_0"].Connected; got <= oversaturationPeers {
		t.Errorf("broker's kademlia bin 0 has %d connected peers, want more than %d", got, oversaturationPeers)
	}
	t.Logf("broker's kademlia bin 0: %d connected peers (bee takes %d)", topo.Bins["bin_0"].Connected, oversaturationPeers)

	pub := identity(audience, false)
	p, err := pub.BPS.Publish(ctx, broker.Overlay(), sp, bps.PublishOptions{Addr: admin.addr, Signer: admin.signer})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	if err := p.PublishUpdate(ctx, 0, []byte("to all 64")); err != nil {
		t.Fatal(err)
	}
	for i, sub := range subs {
		receive(ctx, t, fmt.Sprintf("subscriber %d", i), sub.C(), "to all 64")
	}
}
