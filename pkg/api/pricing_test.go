// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	accountingmock "github.com/ethersphere/bee/v2/pkg/accounting/mock"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// TestTopicsPricing: GET /pubsub/ shows the node's prices and, per peer it
// holds priced streams with, what BPS charged it on bee's accounting — at
// the broker, n deliveries to a subscriber; at the subscriber, the same
// owed to the broker. A node that charges nothing has no "pricing".
func TestTopicsPricing(t *testing.T) {
	t.Parallel()
	prices := bps.Prices{Delivery: 11, Publish: 13}
	net := streamtest.New()
	t.Cleanup(func() { _ = net.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	type node struct {
		*streamtest.Node
		svc *bps.Service
		url string
	}
	newNode := func(p bps.Prices) node {
		nd := net.NewNode()
		svc, err := bps.New(nd, nd.Overlay(), bps.Options{
			Pricing: bps.Pricing{Prices: p},
			Deps:    bps.Deps{Accounting: accountingmock.NewAccounting()},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := nd.AddProtocol(svc.Protocol()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Close() })
		srv, err := api.New(svc, nil, nil, api.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Close() })
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		return node{Node: nd, svc: svc, url: hs.URL}
	}
	broker, sub, free := newNode(prices), newNode(prices), newNode(bps.Prices{})
	for _, n := range []node{sub, free} {
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(pk)
	admin, _ := signer.EthereumAddress()
	topic, _ := crypto.LegacyKeccak256([]byte("pricing"))
	sp, err := bps.NewFeedSpec(topic, admin.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	s, err := sub.svc.Subscribe(ctx, broker.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	// The broker's own publications reach the subscriber through its
	// cohort: a publisher stream from a free node.
	p, err := free.svc.Publish(ctx, broker.Overlay(), sp, bps.PublishOptions{Addr: admin.Bytes(), Signer: signer})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Close() }()
	const n = 3
	for i := range uint64(n) {
		if err := p.PublishUpdate(ctx, i, []byte("x")); err != nil {
			t.Fatal(err)
		}
		select {
		case <-s.C():
		case <-ctx.Done():
			t.Fatal("no delivery")
		}
	}

	type charges struct {
		Peer     string `json:"peer"`
		Balance  string `json:"balance"`
		Debited  string `json:"debited"`
		Credited string `json:"credited"`
		Streams  int    `json:"streams"`
	}
	type pricing struct {
		DeliveryPrice string    `json:"deliveryPrice"`
		PublishPrice  string    `json:"publishPrice"`
		Peers         []charges `json:"peers"`
	}
	get := func(n node) *pricing {
		t.Helper()
		resp, err := http.Get(n.url + "/pubsub/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Pricing *pricing `json:"pricing"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return body.Pricing
	}
	// The subscriber counts a delivery before it hands it on, and the
	// broker a publication before it fans it out: once the subscriber has
	// the n deliveries, both have counted them, and Settle applies what
	// their meters hold (they settle in batches).
	sub.svc.Settle()
	broker.svc.Settle()
	want := charges{Peer: broker.Overlay().String(), Balance: "-33", Debited: "0", Credited: "33", Streams: 1}
	if got := get(sub); got == nil || got.DeliveryPrice != "11" || got.PublishPrice != "13" || len(got.Peers) != 1 || got.Peers[0] != want {
		t.Fatalf("subscriber's pricing %+v, want prices 11 and 13 and %+v", got, want)
	}
	if got := get(free); got != nil {
		t.Fatalf("a node that charges nothing shows pricing %+v", got)
	}
	// The broker's view of the subscriber, once its debits are applied
	// (after each write); the publisher from the free node is charged
	// Publish too, on the broker's side alone, for every Broadcast it
	// writes up: its claiming AUTH (SWIP-74 Rev 8: our publishers' first
	// frame) and the n updates.
	at := get(broker)
	if at == nil {
		t.Fatal("the broker shows no pricing")
	}
	for _, c := range at.Peers {
		if c.Peer == sub.Overlay().String() && (c.Credited != "0" || c.Streams != 1) {
			t.Fatalf("broker's charges of the subscriber %+v", c)
		}
		if c.Peer == free.Overlay().String() && c.Debited != "52" {
			t.Fatalf("broker's charges of the free publisher %+v, want (1 + 3) × 13 debited", c)
		}
	}
}
