// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node"
)

// TestLightAndFullNodes: on real bee nodes, a full-node broker serves a
// light node and a full node, each in both roles. The light node publishes
// (explicit authorship: it claims against the broker's overlay, whose
// record it holds) to a cohort the full node subscribes to, and subscribes
// to a cohort the full node publishes to. bee keeps no signed address record
// of a light node, so the broker's transport binding check must accept its
// incoming streams without one (SWIP-74 item 11 as docs/protocol.md states
// it), and nobody is blocklisted.
func TestLightAndFullNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three bee nodes")
	}
	chain := startChain(t)

	bc := testConfig(t, "broker", chain)
	bc.FullNode = true
	bc.Plugin = bpsFactory(bps.Options{}, nil)
	broker := startNode(t, bc)
	underlays, err := broker.Underlays()
	if err != nil || len(underlays) == 0 {
		t.Fatalf("broker underlays %v: %v", underlays, err)
	}

	start := func(name string, full bool) (*node.Node, *bps.Service) {
		peers := newPeerSet()
		c := testConfig(t, name, chain)
		c.FullNode = full
		c.Plugin = bpsFactory(bps.Options{}, peers)
		for _, u := range underlays {
			c.Bootnodes = append(c.Bootnodes, u.String())
		}
		n := startNode(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := peers.wait(ctx, broker.Overlay()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return n, n.Plugin().(bpsPlugin).Service
	}
	_, light := start("light", false)
	_, full := start("full", true)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name     string
		pub, sub *bps.Service
	}{
		{"light publishes, full subscribes", light, full},
		{"full publishes, light subscribes", full, light},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := newFeedKey(t)
			sp := feedSpecOf(t, tc.name, admin)
			sub, err := tc.sub.Subscribe(ctx, broker.Overlay(), sp)
			if err != nil {
				t.Fatalf("subscribe: %v", err)
			}
			defer func() { _ = sub.Close() }()
			p, err := tc.pub.Publish(ctx, broker.Overlay(), sp, bps.PublishOptions{Addr: admin.addr, Signer: admin.signer})
			if err != nil {
				t.Fatalf("publish: %v", err)
			}
			defer func() { _ = p.Close() }()
			for i, msg := range []string{"one", "two"} {
				if err := p.PublishUpdate(ctx, uint64(i), []byte(msg)); err != nil {
					t.Fatalf("publish %q: %v", msg, err)
				}
				receive(ctx, t, "subscriber", sub.C(), msg)
			}
		})
	}

	// Nobody was blocklisted: not the light node, not the full one.
	var bl struct {
		Peers []any `json:"peers"`
	}
	getJSON(t, broker.APIURL()+"/blocklist", &bl)
	if len(bl.Peers) != 0 {
		t.Fatalf("broker blocklisted %v", bl.Peers)
	}
}
