// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session/mock"
	"github.com/gorilla/websocket"
)

// sentKinds waits until the mock stream st holds n frames and returns
// their kinds.
func sentKinds(t *testing.T, st *mock.Stream, n int) []pb.Kind {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sent, err := st.AwaitSent(ctx, n)
	if err != nil {
		t.Fatalf("%d frames sent, want %d: %v", len(sent), n, err)
	}
	var kinds []pb.Kind
	for _, b := range sent {
		kinds = append(kinds, b.Kind)
	}
	return kinds
}

// TestRejoinStale: when the broker loses a publishing session's stream the
// node joins again, and the session gets the new stream's challenge (seq
// 2); a frame signed under the old challenge is not sent — the node
// answers stale, and the dApp re-signs the same payload at the same index
// under the new challenge, after its new AUTH (docs/api.md, bridge
// "Reconnect"; SWIP-74 Rev 8: re-sign, never reuse an index for another
// payload).
func TestRejoinStale(t *testing.T) {
	t.Parallel()
	svc := mock.New()
	c := newMockCluster(t, api.Options{}, svc)
	admin := newKey(t)
	q := as(feedQuery(c.broker.addr, admin), admin)
	pub := dial(t, c.clients[0], "rejoin", q, nil)
	if m := pub.takeChallenge(admin); m["seq"] != float64(1) {
		t.Fatalf("challenge %v", m)
	}
	pub.auth()
	pub.control("ready")
	pub.data(0, "zero")
	first := svc.Opened()[0]
	if k := sentKinds(t, first, 2); k[0] != pb.Kind_AUTH || k[1] != pb.Kind_DATA {
		t.Fatalf("sent %v, want AUTH then DATA", k)
	}
	old := pub.challenge

	first.End(errors.New("stream reset by the broker"))
	if m := pub.takeChallenge(admin); m["seq"] != float64(2) || bytes.Equal(pub.challenge, old) {
		t.Fatalf("challenge after the rejoin %v", m)
	}
	// A frame the dApp signed under the old challenge.
	stale := pub.challenge
	pub.challenge = old
	pub.data(1, "one")
	pub.challenge = stale
	if s := pub.control("stale"); s["kind"] != "DATA" || s["index"] != float64(1) || s["seq"] != float64(2) {
		t.Fatalf("stale %v", s)
	}
	pub.auth()
	if r := pub.control("ready"); r["seq"] != float64(2) || r["challenge"] != hexOf(pub.challenge) {
		t.Fatalf("ready %v", r)
	}
	pub.data(1, "one")
	second := svc.Opened()[1]
	if k := sentKinds(t, second, 2); len(k) != 2 || k[0] != pb.Kind_AUTH || k[1] != pb.Kind_DATA {
		t.Fatalf("the new stream got %v, want AUTH then the re-signed DATA", k)
	}
	if len(first.Sent()) != 2 {
		t.Fatalf("the lost stream got %d frames, want 2", len(first.Sent()))
	}
}

// TestServiceFrames: the admin's publishing session may send ROSTER and EOS
// as frames of their kind (signed under its stream's challenge); the node
// takes the roster as the one in force, and a session of a granted address
// on the node is told (its cue: its AUTH claims, then ready). Any other
// session sending one is closed (1007) and nothing is sent. A text frame
// from a dApp is an unknown type (1008): the claim frames of rev 3 are gone.
func TestServiceFrames(t *testing.T) {
	t.Parallel()
	svc := mock.New()
	c := newMockCluster(t, api.Options{}, svc)
	alice, bob := newKey(t), newKey(t)
	q := feedQuery(c.broker.addr, alice)
	sa := dial(t, c.clients[0], "service-frames", as(q, alice), nil)
	sa.takeChallenge(alice)
	sa.auth()
	sa.control("ready")
	sb := dial(t, c.clients[0], "service-frames", as(q, bob), nil)
	sb.takeChallenge(bob)
	sb.control("waiting")

	sa.send(websocket.BinaryMessage, sa.frame(pb.Kind_ROSTER, 0, rosterPayload(t, bob)))
	sa.service("ROSTER", 0, bob) // the node's sessions get what the admin's sent
	sb.service("ROSTER", 0, bob)
	sb.auth()
	sb.control("ready")

	// bob's ROSTER: only the admin's session sends one.
	sb.send(websocket.BinaryMessage, sb.frame(pb.Kind_ROSTER, 1, rosterPayload(t)))
	if e := sb.control("error"); !strings.Contains(e["reason"].(string), "only the admin") {
		t.Fatalf("error %v", e)
	}
	sb.expectClose(websocket.CloseInvalidFramePayloadData, "invalid frame")

	sa.send(websocket.TextMessage, []byte(`{"type":"claim","signature":"00"}`))
	if e := sa.control("error"); !strings.Contains(e["reason"].(string), "unknown control frame") {
		t.Fatalf("error %v", e)
	}
	sa.expectClose(websocket.ClosePolicyViolation, "unknown control frame")
	for _, st := range svc.Opened() {
		for _, b := range st.Sent() {
			if b.Kind == pb.Kind_ROSTER && b.Index != 0 {
				t.Fatalf("a refused ROSTER was sent: %v", b)
			}
		}
	}
}

// TestAllAnyBinding: publishers=all is accepted with any binding (SWIP-60
// rev 14 via docs/protocol.md "Implicit authorship and ALL"): the session
// gets its challenge and is ready at once, no AUTH needed.
func TestAllAnyBinding(t *testing.T) {
	t.Parallel()
	svc := mock.New()
	c := newMockCluster(t, api.Options{}, svc)
	alice, bob := newKey(t), newKey(t)
	q := spec(c.broker.addr, "feed", &alice, "publishers", "all")
	s := dial(t, c.clients[0], "all-feed", as(q, bob), nil)
	s.takeChallenge(bob)
	if r := s.control("ready"); r["role"] != "publisher" || r["seq"] != float64(1) {
		t.Fatalf("ready %v", r)
	}
	s.data(0, "no claim needed")
	if k := sentKinds(t, svc.Opened()[0], 1); k[0] != pb.Kind_DATA {
		t.Fatalf("sent %v", k)
	}
}

func rosterPayload(t *testing.T, pubs ...key) []byte {
	t.Helper()
	var addrs [][]byte
	for _, p := range pubs {
		addrs = append(addrs, p.addr)
	}
	b, err := bps.RosterPayload(addrs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }
