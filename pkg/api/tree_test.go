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

	"github.com/ethersphere/bps/pkg/api"
)

// treeEntry is the tree part of a GET /pubsub/ entry, the JSON types held
// exactly (a missing field fails to decode into its pointer).
type treeEntry struct {
	Role     string    `json:"role"`
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
// children counted once per node); a node's subscriber and publisher
// entries sit at depth 1 under the broker, with no children.
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
	for _, role := range []string{"subscriber", "publisher"} {
		e, ok := atA[role]
		if !ok || *e.Depth != 1 || !slices.Equal(*e.Parents, broker) || *e.Children != 0 {
			t.Fatalf("A's %s entry %+v: want depth 1 under %v, no children", role, e, broker)
		}
	}
	atBroker := getTree(t, c.broker)
	if e, ok := atBroker["broker"]; !ok || len(atBroker) != 1 || *e.Depth != 0 || len(*e.Parents) != 0 || *e.Children != 2 {
		t.Fatalf("the broker's entries %+v: want the root at depth 0, no parent, 2 children", atBroker)
	}
}
