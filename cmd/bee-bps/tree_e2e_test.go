// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/wsclient"
)

// treeDeadline bounds the whole tree run.
const treeDeadline = 4 * time.Minute

// startDevClusterArgs starts `bee-bps dev` with args as a child process
// (startDevProcess) and returns the cluster once it is ready; it stops
// with the test. Not in this process: bee v2.8.1's batch service updates
// the chain state in place while its status protocol reads it for a
// peer's salud round, which `-race` reports in any long in-process
// cluster of full nodes (docs/design.md).
func startDevClusterArgs(t *testing.T, args ...string) devCluster {
	t.Helper()
	return startDevProcess(t, append([]string{"--api-addr", "127.0.0.1:0", "--verbosity", "0"}, args...)...)
}

// treeEntry is what the test reads of a node's GET /pubsub/ entry for the
// cohort.
type treeEntry struct {
	Cohort    string   `json:"cohort"`
	Role      string   `json:"role"`
	Depth     uint32   `json:"depth"`
	Parents   []string `json:"parents"`
	Children  int      `json:"children"`
	Reparents uint64   `json:"reparents"`
}

// treeOf reads node api's entry for the cohort (one per cohort: a
// subscriber, or a publisher where its sessions also publish).
func treeOf(ctx context.Context, t *testing.T, api string) treeEntry {
	t.Helper()
	e, ok := treeEntryOf(ctx, t, api)
	if !ok {
		t.Fatalf("%s: no entry for the cohort", api)
	}
	return e
}

// treeEntryOf reads node api's entry for the cohort, if it has one.
func treeEntryOf(ctx context.Context, t *testing.T, api string) (treeEntry, bool) {
	t.Helper()
	var resp struct {
		Topics []treeEntry `json:"topics"`
	}
	getJSON(ctx, t, api+"/pubsub/", &resp)
	for _, e := range resp.Topics {
		if e.Role == "subscriber" || e.Role == "publisher" {
			return e, true
		}
	}
	return treeEntry{}, false
}

// TestDevClusterTree is SWIP-61 on real bee nodes: a dev cluster of 9 (the
// broker and 8), the broker taking 2 streams per cohort and every node
// relaying 2. A WebSocket subscriber on each of the 8 nodes, joined in
// turn, builds a tree at least 3 deep in which the nodes below the broker's
// children keep two parents, and bee-bps tree draws it as the nodes state
// it. A publisher on a node at depth 2 or more —
// the broker has no room for it — attaches at a relay, and its message
// reaches every subscriber through the root. A relay at depth 2 then fails
// (cut off from every peer at once): the next message still reaches every
// other subscriber — each of its children has a second parent. Then a relay
// at depth 1 stops its session (a graceful stop): its children are
// reparented off it, and the next message still reaches everyone left.
func TestDevClusterTree(t *testing.T) {
	if testing.Short() {
		t.Skip("starts nine bee nodes")
	}
	cl := startDevClusterArgs(t, "--nodes", "9", "--bps-max-streams-per-cohort", "2", "--bps-relay-capacity", "2")
	ctx, cancel := context.WithTimeout(context.Background(), treeDeadline)
	defer cancel()
	broker := cl.Nodes[0].Underlays[0]
	admin := newSWIP60Key(t)
	o := wsclient.Options{Peer: broker, Topic: swip60Topic("e2e-tree"), Binding: wsclient.BindingMnemonic,
		Admin: admin.addr, Publishers: wsclient.PublishersAll, Fields: "address,payload"}

	subs := make([]*wsclient.Session, len(cl.Nodes))
	for i := 1; i < len(cl.Nodes); i++ {
		o.API = cl.Nodes[i].API
		s, err := wsclient.Subscribe(ctx, o)
		if err != nil {
			t.Fatalf("subscribe on node %d: %v", i, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		subs[i] = s
	}

	entries := make([]treeEntry, len(cl.Nodes))
	deepest, twoParents := 0, 0
	for i := 1; i < len(cl.Nodes); i++ {
		entries[i] = treeOf(ctx, t, cl.Nodes[i].API)
		if entries[i].Depth > entries[deepest].Depth {
			deepest = i
		}
		if len(entries[i].Parents) == 2 {
			twoParents++
		}
		t.Logf("node %d: depth %d, parents %d, children %d", i, entries[i].Depth, len(entries[i].Parents), entries[i].Children)
	}
	if entries[deepest].Depth < 3 {
		t.Fatalf("the tree is %d deep, want at least 3", entries[deepest].Depth)
	}
	if twoParents < 4 {
		t.Fatalf("%d nodes keep two parents, want every node below the broker's children (6)", twoParents)
	}
	// bee-bps tree draws it as the nodes state it.
	checkTreeCommand(ctx, t, cl, "e2e-tree")

	// A publisher at depth 2 or more: the broker has no room for it.
	author := newSWIP60Key(t)
	o.API = cl.Nodes[deepest].API
	pub, err := wsclient.Publish(ctx, o, author.signer)
	if err != nil {
		t.Fatalf("publish on node %d: %v", deepest, err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	var next uint64 // the author's feed index: every chunk is a session-feed update (SWIP-74 Rev 8)
	say := func(what string, skip ...int) {
		t.Helper()
		if err := pub.SendUpdate(author.signer, next, []byte(what)); err != nil {
			t.Fatal(err)
		}
		next++
		for i := 1; i < len(cl.Nodes); i++ {
			if slices.Contains(skip, i) {
				continue
			}
			m, err := subs[i].NextMessage(ctx)
			if err != nil || string(m.Payload) != what {
				t.Fatalf("node %d: %q (%v), want %q", i, m.Payload, err, what)
			}
		}
	}
	say("from depth")

	// A relay fails: a node at depth 2 with children is cut off from
	// every peer at once (bee's DELETE /peers on its API, which resets
	// every stream it holds). Nothing below it misses the next message:
	// each child still has its other parent.
	failed := slices.IndexFunc(entries, func(e treeEntry) bool { return e.Depth == 2 && e.Children > 0 })
	if failed < 1 {
		t.Fatalf("no relay at depth 2 among %+v", entries)
	}
	cutOff(ctx, t, cl.Nodes[failed].API)
	say("after a relay failed", failed)
	// The failed node itself is out of the test from here: cut off from
	// every peer, it waits for bee's kademlia to reconnect it.

	// A graceful stop of a relay at depth 1: its children move.
	relay := slices.IndexFunc(entries, func(e treeEntry) bool { return e.Depth == 1 && e.Children > 0 })
	// (The failed node is at depth 2: never this one.)
	if relay < 1 {
		t.Fatalf("no relay at depth 1 among %+v", entries)
	}
	relayOverlay := cl.Nodes[relay].Overlay
	var kids []int
	for i := 1; i < len(cl.Nodes); i++ {
		if i != failed && slices.Contains(entries[i].Parents, relayOverlay) {
			kids = append(kids, i)
		}
	}
	if err := subs[relay].Close(); err != nil {
		t.Fatalf("close the relay's session: %v", err)
	}
	for _, k := range kids {
		waitFor(ctx, t, fmt.Sprintf("node %d reparented off node %d", k, relay), func() bool {
			e, ok := treeEntryOf(ctx, t, cl.Nodes[k].API)
			if !ok {
				_, err := subs[k].NextMessage(ctx)
				t.Fatalf("node %d: its subscription ended: %v", k, err)
			}
			return len(e.Parents) > 0 && !slices.Contains(e.Parents, relayOverlay)
		})
	}
	say("after the leave", relay, failed)
}

// cutOff disconnects the node whose API is api from every peer it has.
func cutOff(ctx context.Context, t *testing.T, api string) {
	t.Helper()
	var peers struct {
		Peers []struct {
			Address string `json:"address"`
		} `json:"peers"`
	}
	getJSON(ctx, t, api+"/peers", &peers)
	for _, p := range peers.Peers {
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, api+"/peers/"+p.Address, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("DELETE %s/peers/%s: %s", api, p.Address, resp.Status)
		}
	}
}

// waitFor polls cond until it holds or ctx ends: the node's API is the
// only view of its tree from here, and it offers no event to wait on.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-tick.C:
		}
	}
}
