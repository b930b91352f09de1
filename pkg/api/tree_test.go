// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
)

// treeEntry is the tree part of a GET /pubsub/ entry, the JSON types held
// exactly (a missing field fails to decode into its pointer).
type treeEntry struct {
	Role     string    `json:"role"`
	Relay    bool      `json:"relay"`
	Depth    *uint32   `json:"depth"`
	Parents  *[]string `json:"parents"`
	Children *int      `json:"children"`
}

func getTree(t *testing.T, n *tnode) map[string]treeEntry {
	t.Helper()
	resp, err := http.Get(n.srv.URL + "/pubsub/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /pubsub/: %s", resp.Status)
	}
	var body struct {
		Topics []treeEntry `json:"topics"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	out := make(map[string]treeEntry)
	for _, e := range body.Topics {
		if e.Depth == nil || e.Parents == nil || e.Children == nil {
			t.Fatalf("%s entry: depth, parents and children required: %+v", e.Role, e)
		}
		out[e.Role] = e
	}
	return out
}

// TestTopicsTree: GET /pubsub/ shows per entry the node's place in the
// cohort's tree — a broker's entry is the root (depth 0, no parent, its
// children counted once per node); a node whose sessions both subscribe and
// publish has one entry for the cohort, a publisher at depth 1 under the
// broker, with no children.
func TestTopicsTree(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	g := newGSOC(t, "topics-tree")
	peer := c.broker.addr

	pub := dial(t, a, g.topic(), g.publishQuery(peer), nil)
	subA := dial(t, a, g.topic(), url.Values{"peer": {peer}}, nil)
	subB := dial(t, b, g.topic(), url.Values{"peer": {peer}}, nil)
	f := g.frame(t, "hello")
	pub.send(2, f)
	for _, s := range []*client{subA, subB} {
		if got := s.binary(); !bytes.Equal(got, f) {
			t.Fatalf("got %x, want %x", got, f)
		}
	}

	broker := []string{c.broker.Overlay().String()}
	atA := getTree(t, a)
	if e, ok := atA["publisher"]; !ok || len(atA) != 1 || *e.Depth != 1 || !slices.Equal(*e.Parents, broker) || *e.Children != 0 {
		t.Fatalf("A's entries %+v: want one, a publisher at depth 1 under %v, no children", atA, broker)
	}
	atBroker := getTree(t, c.broker)
	if e, ok := atBroker["broker"]; !ok || len(atBroker) != 1 || *e.Depth != 0 || len(*e.Parents) != 0 || *e.Children != 2 {
		t.Fatalf("the broker's entries %+v: want the root at depth 0, no parent, 2 children", atBroker)
	}
}

// TestTopicsRelay: a node that relays says so in its one entry for the
// cohort: a subscriber (the role bee-js knows) with relay true, its real
// depth under its parent, its children, and as connections the peers of
// all its streams; its child's entry sits one deeper under it.
func TestTopicsRelay(t *testing.T) {
	t.Parallel()
	c := newClusterWith(t, 2, api.Options{}, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Tree: bps.Tree{ProbeWait: 5 * time.Second}}, bps.Options{Tree: bps.Tree{RelayCapacity: 2}})
	a, b := c.clients[0], c.clients[1]
	if err := c.net.Connect(b.Node, a.Node); err != nil {
		t.Fatal(err)
	}
	admin := newKey(t)
	q := spec(c.broker.addr, "feed", &admin)
	dial(t, a, "relayed", q, nil)
	dial(t, b, "relayed", q, nil)

	atA := getTree(t, a)
	e, ok := atA["subscriber"]
	if !ok || len(atA) != 1 || !e.Relay || *e.Depth != 1 || !slices.Equal(*e.Parents, []string{c.broker.Overlay().String()}) || *e.Children != 1 {
		t.Fatalf("A's entries %+v: want one, a relaying subscriber at depth 1 under the broker with one child", atA)
	}
	peers := []string{c.broker.Overlay().String(), b.Overlay().String()}
	slices.Sort(peers)
	if got := getBeeJSTopics(t, a)["subscriber"]; !slices.Equal(got, peers) {
		t.Fatalf("A's connections %v, want its parent and its child %v", got, peers)
	}
	atB := getTree(t, b)
	if e, ok := atB["subscriber"]; !ok || len(atB) != 1 || e.Relay || *e.Depth != 2 || !slices.Equal(*e.Parents, []string{a.Overlay().String()}) {
		t.Fatalf("B's entries %+v: want one, a subscriber at depth 2 under A", atB)
	}
	if atBroker := getTree(t, c.broker); len(atBroker) != 1 || *atBroker["broker"].Children != 1 {
		t.Fatalf("the broker's entries %+v: want the root with one child", atBroker)
	}
}
