// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/ethersphere/bps/pkg/api"
)

// beeJSTopics is GET /pubsub/ as bee-js's listTopics (PR #1151) reads it,
// each field kept raw so that its JSON type can be checked exactly.
type beeJSTopics struct {
	Topics []map[string]json.RawMessage `json:"topics"`
}

// checkBeeJSTopic checks one entry against bee-js's contract: topicAddress a
// string, mode an integer, role one of broker, subscriber, publisher, and
// connections an array of strings — here hex overlays.
func checkBeeJSTopic(t *testing.T, e map[string]json.RawMessage) (role string, conns []string) {
	t.Helper()
	var topic string
	if err := json.Unmarshal(e["topicAddress"], &topic); err != nil {
		t.Fatalf("topicAddress %s: want a string: %v", e["topicAddress"], err)
	}
	if b, err := hex.DecodeString(topic); err != nil || len(b) != 32 {
		t.Fatalf("topicAddress %q: want 32 bytes in hex", topic)
	}
	var mode int
	if err := json.Unmarshal(e["mode"], &mode); err != nil {
		t.Fatalf("mode %s: want an integer: %v", e["mode"], err)
	}
	if err := json.Unmarshal(e["role"], &role); err != nil {
		t.Fatalf("role %s: want a string: %v", e["role"], err)
	}
	if !slices.Contains([]string{"broker", "subscriber", "publisher"}, role) {
		t.Fatalf("role %q: want broker, subscriber or publisher", role)
	}
	raw := e["connections"]
	if len(raw) == 0 || raw[0] != '[' {
		t.Fatalf("connections %s: want an array", raw)
	}
	if err := json.Unmarshal(raw, &conns); err != nil {
		t.Fatalf("connections %s: want an array of strings: %v", raw, err)
	}
	for _, c := range conns {
		if b, err := hex.DecodeString(c); err != nil || len(b) != 32 {
			t.Fatalf("connection %q: want an overlay in hex", c)
		}
	}
	return role, conns
}

// getBeeJSTopics fetches GET /pubsub/ and checks every entry.
func getBeeJSTopics(t *testing.T, n *tnode) map[string][]string {
	t.Helper()
	resp, err := http.Get(n.srv.URL + "/pubsub/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /pubsub/: %s", resp.Status)
	}
	var body beeJSTopics
	dec := json.NewDecoder(resp.Body)
	if err := dec.Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Topics == nil {
		t.Fatal("topics: want an array")
	}
	out := make(map[string][]string)
	for _, e := range body.Topics {
		role, conns := checkBeeJSTopic(t, e)
		out[role] = conns
	}
	return out
}

// TestTopicsBeeJSContract: every entry of GET /pubsub/ has the fields
// bee-js's listTopics reads with the types it checks, at a broker and at a
// node whose sessions share a subscriber and a publisher stream (one entry
// for the cohort); the connections are the peers of the entry's streams.
func TestTopicsBeeJSContract(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	g := newGSOC(t, "bee-js-topics")
	peer := c.broker.addr

	if got := getBeeJSTopics(t, a); len(got) != 0 {
		t.Fatalf("topics before any session: %v", got)
	}
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
	atA := getBeeJSTopics(t, a)
	if !slices.Equal(atA["publisher"], broker) || len(atA) != 1 {
		t.Fatalf("A's topics %v: want one entry for the cohort, a publisher, connected to the broker %s", atA, broker[0])
	}
	peers := []string{a.Overlay().String(), b.Overlay().String()}
	slices.Sort(peers)
	if atBroker := getBeeJSTopics(t, c.broker); !slices.Equal(atBroker["broker"], peers) || len(atBroker) != 1 {
		t.Fatalf("the broker's topics %v: want one broker entry connected to %v", atBroker, peers)
	}
}
