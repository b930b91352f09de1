// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/node"
)

// TestConnectGivesStorageRadius: on real bee nodes, a node that reaches
// the broker as a bootnode has no storage radius after its first
// connection (bee's salud leaves bootnodes out, and its next round is 10 s
// away), while a node connected by node.Connect, as bee's POST /connect
// does, has one within moments of the connection — the radius bee's
// pushsync and retrieval wait for. A light node connected so has it too,
// and a bad address is an error, not a panic.
func TestConnectGivesStorageRadius(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four bee nodes")
	}
	chain := startChain(t)

	bc := testConfig(t, "broker", chain)
	bc.FullNode = true
	broker := startNode(t, bc)
	underlays, err := broker.Underlays()
	if err != nil || len(underlays) == 0 {
		t.Fatalf("broker underlays %v: %v", underlays, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// radius waits until n has a storage radius.
	radius := func(name string, n *node.Node) {
		t.Helper()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			r, known, err := n.StorageRadius()
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if known {
				if r != 0 {
					t.Fatalf("%s: storage radius %d on a network of four, want 0", name, r)
				}
				return
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				t.Fatalf("%s: no storage radius: %v", name, ctx.Err())
			}
		}
	}

	// A full node with the broker as its bootnode.
	boot := testConfig(t, "bootnoded", chain)
	boot.FullNode = true
	for _, u := range underlays {
		boot.Bootnodes = append(boot.Bootnodes, u.String())
	}
	bn := startNode(t, boot)
	if err := broker.Plugin().(*echo).waitPeer(ctx, bn.Overlay()); err != nil {
		t.Fatal(err)
	}
	bootConnected := time.Now()

	// Full and light nodes that connect to the broker as to any peer.
	for _, full := range []bool{true, false} {
		name := map[bool]string{true: "full", false: "light"}[full]
		c := testConfig(t, name, chain)
		c.FullNode = full
		n := startNode(t, c)
		if _, err := n.Connect(ctx, "not-a-multiaddr"); err == nil {
			t.Fatalf("%s: connect to a bad address succeeded", name)
		}
		if _, _, err := n.StorageRadius(); err != nil {
			t.Fatal(err)
		}
		at := time.Now()
		peer, err := n.Connect(ctx, underlays[0].String())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !peer.Equal(broker.Overlay()) {
			t.Fatalf("%s: connected to %s, want the broker %s", name, peer, broker.Overlay())
		}
		radius(name, n)
		if took := time.Since(at); took > 5*time.Second {
			t.Fatalf("%s: storage radius %s after the connection: not from salud's first round", name, took)
		} else {
			t.Logf("%s node connected by node.Connect: storage radius %s after the connection", name, took.Round(time.Millisecond))
		}
	}

	// The bootnoded node: still none, unless salud's second round has come.
	if _, known, err := bn.StorageRadius(); err != nil {
		t.Fatal(err)
	} else if since := time.Since(bootConnected); known && since < 9*time.Second {
		t.Fatalf("a node whose only full peer was its bootnode has a storage radius %s after connecting: bee's salud counts bootnodes now, node.Connect's reason is gone", since)
	} else if !known {
		t.Logf("a node that reached the broker as a bootnode: no storage radius %s after connecting", since.Round(time.Millisecond))
	}
}
