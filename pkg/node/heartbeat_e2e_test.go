// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node/nodetest"
)

// TestHeartbeatOverBee: three bee identities (bee's libp2p service and
// handshake each, with its own swarm key): a root that admits one
// subscriber stream, a relay that took it, and a node the root refers to
// the relay. The root signs its heartbeats with its bee signer; the node,
// two hops down, learns the key from the root's Ack on its first Join and
// verifies every heartbeat the relay passes on against it — the same
// address bee's handshake bound to the root's overlay (the bzz.Address the
// node's own connect to the root returned).
func TestHeartbeatOverBee(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three libp2p identities")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const period = 100 * time.Millisecond
	var (
		mu    sync.Mutex
		beats []bps.Event
		bad   []bps.Event
		got   = make(chan struct{}, 1)
	)
	tracer := bps.TracerFunc(func(e bps.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case e.Kind == bps.EventHeartbeat && e.Err == nil:
			beats = append(beats, e)
			select {
			case got <- struct{}{}:
			default:
			}
		case e.Kind == bps.EventHeartbeat, e.Kind == bps.EventViolation, e.Kind == bps.EventEscape:
			bad = append(bad, e)
		}
	})
	identity := func(name string, o bps.Options) *nodetest.Identity {
		t.Helper()
		id, err := nodetest.NewIdentity(ctx, nodetest.IdentityOptions{NetworkID: 1, Full: true, BPS: o})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Cleanup(func() {
			if err := id.Close(); err != nil {
				t.Errorf("%s: close: %v", name, err)
			}
		})
		return id
	}
	rootOpts := bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}}
	rootOpts.Heartbeat = period
	root := identity("root", rootOpts)
	relayOpts := bps.Options{}
	relayOpts.RelayCapacity = 2
	relay := identity("relay", relayOpts)
	nodeOpts := bps.Options{}
	nodeOpts.Tracer = tracer
	nd := identity("node", nodeOpts)

	rootAddrs, err := root.P2P.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	relayAddrs, err := relay.P2P.Addresses()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.P2P.Connect(ctx, rootAddrs); err != nil {
		t.Fatalf("relay: connect to the root: %v", err)
	}
	bzzRoot, err := nd.P2P.Connect(ctx, rootAddrs)
	if err != nil {
		t.Fatalf("node: connect to the root: %v", err)
	}
	if _, err := nd.P2P.Connect(ctx, relayAddrs); err != nil {
		t.Fatalf("node: connect to the relay: %v", err)
	}

	admin := newFeedKey(t)
	sp := feedSpecOf(t, "heartbeat over bee", admin)
	rsub, err := relay.BPS.Subscribe(ctx, root.Overlay, sp)
	if err != nil {
		t.Fatalf("relay: subscribe: %v", err)
	}
	t.Cleanup(func() { _ = rsub.Close() })
	sub, err := nd.BPS.Subscribe(ctx, root.Overlay, sp)
	if err != nil {
		t.Fatalf("node: subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(relay.Overlay) {
		t.Fatalf("node's parents %v, want the relay %s alone", ps, relay.Overlay)
	}
	if k := sub.HeartbeatKey(); !bytes.Equal(k, bzzRoot.EthereumAddress) {
		t.Fatalf("the root stated heartbeat key %x; bee's handshake bound %x to its overlay", k, bzzRoot.EthereumAddress)
	}

	const want = 5
	for {
		mu.Lock()
		n := len(beats)
		mu.Unlock()
		if n >= want {
			break
		}
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatalf("%d heartbeats taken, want %d", n, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range beats {
		if !e.Peer.Equal(relay.Overlay) {
			t.Fatalf("a heartbeat from %s, want the relay's copies only", e.Peer)
		}
	}
	if len(bad) != 0 {
		t.Fatalf("events that must not happen: %+v", bad)
	}
}
