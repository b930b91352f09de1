// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package wsclient_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/wsclient"
	"github.com/gorilla/websocket"
)

// fakeNode is a node that hands a publishing session a challenge, then
// ready, and reports every binary frame the client sends; stale, if set,
// is sent after the first DATA frame, with a second challenge.
func fakeNode(t *testing.T, addr []byte, challenge, second []byte) (*httptest.Server, <-chan []byte) {
	t.Helper()
	got := make(chan []byte, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		ch := func(c []byte, seq int) {
			_ = ws.WriteJSON(map[string]any{"type": "challenge", "challenge": hex.EncodeToString(c), "seq": seq,
				"topic": hex.EncodeToString(make([]byte, 32)), "addr": hex.EncodeToString(addr), "broker": swarm.ZeroAddress.String()})
		}
		ch(challenge, 1)
		sentStale := false
		for {
			typ, b, err := ws.ReadMessage()
			if err != nil {
				close(got)
				return
			}
			if typ != websocket.BinaryMessage {
				continue
			}
			got <- b
			switch {
			case pb.Kind(b[0]) == pb.Kind_AUTH:
				_ = ws.WriteJSON(map[string]any{"type": "ready", "role": "publisher"})
			case second != nil && !sentStale:
				sentStale = true
				ch(second, 2)
				_ = ws.WriteJSON(map[string]any{"type": "stale", "kind": "DATA", "index": binary.BigEndian.Uint64(b[1:9]), "seq": 2})
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// TestClientSignsWithinItsCursor: the client derives every id itself from
// the challenge and the topic, claims with an AUTH at index 0, and refuses
// to sign what a node could abuse (docs/protocol.md "Publishers"): an index
// 1,024 or more past its own cursor (index 2^64−2 would end its feed at
// every broker), an index below it it never signed, and a second payload
// at an index.
func TestClientSignsWithinItsCursor(t *testing.T) {
	t.Parallel()
	signer, addr := signer(t)
	challenge := bytes.Repeat([]byte{1}, 32)
	srv, got := fakeNode(t, addr, challenge, nil)
	o := wsclient.Options{API: srv.URL, Peer: swarm.ZeroAddress.String(), Topic: make([]byte, 32), Binding: "feed", Admin: addr, Index: 5}
	s, err := wsclient.PublishFeed(ctxT(t), o, signer, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	auth := <-got
	id := bps.SessionID(pb.Kind_AUTH, o.Topic, challenge, 0)
	if pb.Kind(auth[0]) != pb.Kind_AUTH || binary.BigEndian.Uint64(auth[1:9]) != 0 || !bytes.Equal(auth[9:41], id) {
		t.Fatalf("the claim %x is not an AUTH at index 0 under the challenge", auth)
	}
	verify(t, auth[9:], id, addr)

	for _, tc := range []struct {
		index   uint64
		payload string
	}{{5 + 1024, "too far"}, {1<<64 - 2, "the end of the feed"}, {4, "below the cursor"}} {
		if err := s.SendUpdate(signer, tc.index, []byte(tc.payload)); err == nil {
			t.Fatalf("signed index %d (%s)", tc.index, tc.payload)
		}
	}
	if err := s.SendUpdate(signer, 5+1023, []byte("far, within")); err != nil {
		t.Fatal(err)
	}
	if err := s.SendUpdate(signer, 5+1023, []byte("another content")); err == nil {
		t.Fatal("signed a second payload at an index")
	}
	if err := s.SendUpdate(signer, 7, []byte("below, never signed")); err == nil {
		t.Fatal("signed an index below its cursor it never signed")
	}
}

// TestClientResignsStale: a frame the node answers stale — signed under a
// challenge its stream no longer has — is re-signed under the new
// challenge at the same index with the same payload, and the session
// claims the new stream with an AUTH first.
func TestClientResignsStale(t *testing.T) {
	t.Parallel()
	signer, addr := signer(t)
	first, second := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	srv, got := fakeNode(t, addr, first, second)
	o := wsclient.Options{API: srv.URL, Peer: swarm.ZeroAddress.String(), Topic: make([]byte, 32), Binding: "feed", Admin: addr}
	s, err := wsclient.PublishFeed(ctxT(t), o, signer, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-got // the first AUTH
	if err := s.SendUpdate(signer, 0, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b[9:41], bps.SessionID(pb.Kind_DATA, o.Topic, first, 0)) {
		t.Fatal("the update is not under the first challenge")
	}
	// The reader takes the new challenge and the stale answer.
	if _, err := s.Await(ctxT(t), "stale"); err != nil {
		t.Fatal(err)
	}
	auth, again := <-got, <-got
	if pb.Kind(auth[0]) != pb.Kind_AUTH || !bytes.Equal(auth[9:41], bps.SessionID(pb.Kind_AUTH, o.Topic, second, 0)) {
		t.Fatalf("no AUTH under the new challenge first: %x", auth[:41])
	}
	id := bps.SessionID(pb.Kind_DATA, o.Topic, second, 0)
	if !bytes.Equal(again[9:41], id) || !bytes.Equal(again[9+32+65+8:], []byte("hello")) {
		t.Fatalf("the stale update was not re-signed at index 0 with its payload under the new challenge: %x", again)
	}
	verify(t, again[9:], id, addr)
}

// verify checks data is a valid SOC of owner under id.
func verify(t *testing.T, data, id, owner []byte) {
	t.Helper()
	a, err := soc.CreateAddress(id, owner)
	if err != nil {
		t.Fatal(err)
	}
	s, err := soc.FromChunk(swarm.NewChunk(a, data))
	if err != nil || !bytes.Equal(s.OwnerAddress(), owner) {
		t.Fatalf("not a valid SOC of %x: %v", owner, err)
	}
}
