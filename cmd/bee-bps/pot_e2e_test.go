// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/storage"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/pot"
	"github.com/ethersphere/bps/pkg/wsclient"
)

// beeGetter retrieves chunks through a bee node's stock API (GET
// /chunks/{address}: its store or bee's retrieval), counting retrievals.
type beeGetter struct {
	api string
	n   atomic.Int64
}

func (g *beeGetter) Get(ctx context.Context, addr swarm.Address) (swarm.Chunk, error) {
	g.n.Add(1)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.api+"/chunks/"+addr.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, swarm.SpanSize+swarm.ChunkSize+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /chunks/%s: %s: %w", addr, resp.Status, storage.ErrNotFound)
	}
	return swarm.NewChunk(addr, b), nil
}

// TestDevClusterPotProfile is SWIP-65's pot profile on real bee nodes
// (conformance items 1, 2 and 5 with the profile on): the admin's dApp
// publishes from node-1, persistently, a feed whose every payload is the
// pot node over the updates so far (bps.PotNext, timestamp keys). On
// node-2, with nothing but bee's stock endpoints, a late reader takes the
// latest update by GET /feeds — a feed client that knows nothing of the
// profile — and from its payload alone reads the whole history in
// publication order through GET /chunks, each node verified by hash,
// n−1 retrievals for n updates; a seek to a time lands on the first
// update at or after it in O(log n) retrievals.
func TestDevClusterPotProfile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three bee nodes")
	}
	cl, ctx, batch := startStampedCluster(t)
	pubNode, reader := cl.Nodes[1], cl.Nodes[2]
	alice := newSWIP60Key(t)
	topic := swip60Topic(fmt.Sprintf("e2e-pot-%d", time.Now().UnixNano()))
	o := wsclient.Options{API: pubNode.API, Peer: cl.Nodes[0].Underlays[0], Topic: topic, Binding: wsclient.BindingFeed, Admin: alice.addr, PostageBatch: batch}
	pub, err := wsclient.PublishFeed(ctx, o, alice.signer, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()

	const n = 24
	var prev []byte
	var keys []uint64
	var key uint64
	for i := range uint64(n) {
		key = pot.TimeKey(time.Now(), key)
		payload, err := bps.PotNext(prev, key, fmt.Appendf(nil, "segment %d", i))
		if err != nil {
			t.Fatal(err)
		}
		if err := pub.SendFeedUpdate(alice.signer, i, payload); err != nil {
			t.Fatal(err)
		}
		prev, keys = payload, append(keys, key)
	}

	// A stock feed reader on node-2: the latest update, once stored.
	owner, th := hex.EncodeToString(alice.addr), hex.EncodeToString(topic)
	latest := getBody(ctx, t, fmt.Sprintf("%s/feeds/%s/%s", reader.API, owner, th))
	for string(latest) != string(prev) {
		select {
		case <-ctx.Done():
			t.Fatalf("GET /feeds never answered the latest update")
		case <-time.After(200 * time.Millisecond):
		}
		latest = getBody(ctx, t, fmt.Sprintf("%s/feeds/%s/%s", reader.API, owner, th))
	}
	top, err := pot.Decode(latest)
	if err != nil {
		t.Fatal(err)
	}
	topCh, err := top.Chunk()
	if err != nil {
		t.Fatal(err)
	}

	g := &beeGetter{api: reader.API}
	it := pot.Ascend(g, top, topCh.Address(), 0)
	for i := 0; ; i++ {
		e, err := it.Next(ctx)
		if errors.Is(err, io.EOF) {
			if i != n {
				t.Fatalf("history of %d updates, want %d", i, n)
			}
			break
		}
		if err != nil {
			t.Fatalf("history element %d: %v", i, err)
		}
		if i >= n || e.Key != keys[i] || string(e.Value()) != fmt.Sprint("segment ", i) {
			t.Fatalf("history element %d: key %d %q", i, e.Key, e.Value())
		}
	}
	if got := g.n.Load(); got != n-1 {
		t.Fatalf("%d retrievals for a history of %d", got, n)
	}

	g.n.Store(0)
	mid := keys[n/2]
	e, retrievals, err := pot.Seek(ctx, g, top, topCh.Address(), mid)
	if err != nil || e.Key != mid || string(e.Value()) != fmt.Sprint("segment ", n/2) {
		t.Fatalf("seek %d: %d %q %v", mid, e.Key, e.Value(), err)
	}
	bound := 2 * (pot.KeyBits - pot.PO(keys[0], keys[n-1]) + 1)
	if retrievals > bound {
		t.Fatalf("seek: %d retrievals, more than %d", retrievals, bound)
	}
	t.Logf("history of %d updates from the latest: %d retrievals through node-2's GET /chunks; seek to the middle: %d", n, n-1, retrievals)
}
