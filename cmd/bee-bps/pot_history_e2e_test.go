// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/pot"
	"github.com/ethersphere/bps/pkg/wsclient"
)

// TestDevClusterPotHistory is a history cohort with the pot profile on real
// bee nodes (SWIP-65 items 2 and 3): the admin's dApp publishes from
// node-1, persistently, a pot-profile feed; a late joiner on node-2 asks
// for history (history=true, pot=true) and, at the next live update, gets
// every earlier update from storage by descent from that update's payload —
// announced, in order, before it.
func TestDevClusterPotHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three bee nodes")
	}
	cl, ctx, batch := startStampedCluster(t)
	pubNode, subNode, reader := cl.Nodes[1], cl.Nodes[2], cl.Nodes[0]
	alice := newSWIP60Key(t)
	topic := swip60Topic(fmt.Sprintf("e2e-pot-history-%d", time.Now().UnixNano()))
	o := wsclient.Options{API: pubNode.API, Peer: cl.Nodes[0].Underlays[0], Topic: topic, Binding: wsclient.BindingFeed, Admin: alice.addr,
		PostageBatch: batch, History: true, Pot: true}
	pub, err := wsclient.PublishFeed(ctx, o, alice.signer, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	const n = 16
	payloads := make([][]byte, 0, n+1)
	var prev []byte
	var key uint64
	publish := func(i uint64) {
		t.Helper()
		key = pot.TimeKey(time.Now(), key)
		payload, err := bps.PotNext(prev, key, fmt.Appendf(nil, "segment %d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.SendFeedUpdate(alice.signer, i, payload); err != nil {
			t.Fatal(err)
		}
		prev, payloads = payload, append(payloads, payload)
	}
	for i := range uint64(n) {
		publish(i)
	}
	// Stored: another node reads the latest update by its SOC.
	getBody(ctx, t, fmt.Sprintf("%s/soc/%s/%s", reader.API, hex.EncodeToString(alice.addr), hex.EncodeToString(bps.FeedID(topic, n-1))))

	so := wsclient.Options{API: subNode.API, Peer: cl.Nodes[0].Underlays[0], Topic: topic, Binding: wsclient.BindingFeed, Admin: alice.addr,
		History: true, Pot: true, Fields: "index,payload"}
	late, err := wsclient.Subscribe(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	began := time.Now()
	publish(n)
	f, err := late.Await(ctx, "recovered")
	if err != nil {
		t.Fatal(err)
	}
	if f["from"] != float64(0) || f["to"] != float64(n-1) {
		t.Fatalf("recovered frame %v, want 0-%d", f, n-1)
	}
	for i := range n + 1 {
		m, err := late.NextMessage(ctx)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		if m.Index != uint64(i) || string(m.Payload) != string(payloads[i]) {
			t.Fatalf("update %d: index %d, payload %x", i, m.Index, m.Payload)
		}
	}
	t.Logf("a late joiner got the history of %d updates by pot descent and the live one in %s", n, time.Since(began).Round(time.Millisecond))
}
