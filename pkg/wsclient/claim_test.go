// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package wsclient_test

import (
	"bytes"
	"crypto/ecdsa"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/wsclient"
	"github.com/gorilla/websocket"
)

// TestClaimSignsOnlyWhatItDerives: a node that hands the client the digest
// of a SOC of its choosing in a claim-request — a forged message as the
// admin — gets no signature over it: the client signs the claim digest it
// derives from the request's fields, and nothing else.
func TestClaimSignsOnlyWhatItDerives(t *testing.T) {
	t.Parallel()
	signer, addr := signer(t)
	socDigest, _ := crypto.LegacyKeccak256([]byte("the digest of a SOC the node chose"))
	challenge, broker := bytes.Repeat([]byte{1}, 32), swarm.RandAddress(t)
	got := make(chan []byte, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		_ = ws.WriteJSON(map[string]any{"type": "claim-request", "topic": hex.EncodeToString(make([]byte, 32)),
			"addr": hex.EncodeToString(addr), "broker": broker.String(), "challenge": hex.EncodeToString(challenge),
			"index": "18446744073709551615", "digest": hex.EncodeToString(socDigest)})
		var claim struct{ Signature string }
		if err := ws.ReadJSON(&claim); err != nil {
			got <- nil
			return
		}
		sig, _ := hex.DecodeString(claim.Signature)
		got <- sig
		_ = ws.WriteJSON(map[string]any{"type": "error", "reason": "done"})
	}))
	t.Cleanup(srv.Close)

	o := wsclient.Options{API: srv.URL, Peer: broker.String(), Topic: make([]byte, 32), Binding: "feed", Admin: addr}
	if s, err := wsclient.Publish(ctxT(t), o, signer); err == nil {
		_ = s.Close()
	}
	sig := <-got
	if sig == nil {
		t.Fatal("the client sent no claim")
	}
	want := bps.ClaimDigest(challenge, broker, 1<<64-1)
	if pub, err := crypto.Recover(sig, want); err != nil || !bytes.Equal(ethAddr(t, pub), addr) {
		t.Fatalf("the claim does not recover to the signer over the digest derived from the fields: %v", err)
	}
	if pub, err := crypto.Recover(sig, socDigest); err == nil && bytes.Equal(ethAddr(t, pub), addr) {
		t.Fatal("the client signed the digest the node handed it")
	}
}

// ethAddr is the Ethereum address of pub.
func ethAddr(t *testing.T, pub *ecdsa.PublicKey) []byte {
	t.Helper()
	a, err := crypto.NewEthereumAddress(*pub)
	if err != nil {
		t.Fatal(err)
	}
	return a
}
