// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package wsclient_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"github.com/ethersphere/bps/pkg/wsclient"
)

type node struct {
	*streamtest.Node
	url string
}

// bridgeNodes builds a broker and n nodes serving the bridge over HTTP, on
// the in-memory network; sessions name the broker by overlay.
func bridgeNodes(t *testing.T, n int) (broker *streamtest.Node, nodes []node) {
	t.Helper()
	net := streamtest.New()
	t.Cleanup(func() { _ = net.Close() })
	mk := func() (*streamtest.Node, *bps.Service) {
		nd := net.NewNode()
		svc, err := bps.New(nd, nd.Overlay(), bps.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := nd.AddProtocol(svc.Protocol()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Close() })
		return nd, svc
	}
	broker, _ = mk()
	for range n {
		nd, svc := mk()
		if err := net.Connect(nd, broker); err != nil {
			t.Fatal(err)
		}
		srv, err := api.New(svc, nil, nil, api.Options{})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv)
		t.Cleanup(func() { _ = srv.Close(); hs.Close() })
		nodes = append(nodes, node{Node: nd, url: hs.URL})
	}
	return broker, nodes
}

func signer(t *testing.T) (crypto.Signer, []byte) {
	t.Helper()
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	s := crypto.NewDefaultSigner(pk)
	a, err := s.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	return s, a.Bytes()
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// next returns the next binary message, skipping text frames.
func next(t *testing.T, s *wsclient.Session) wsclient.Message {
	t.Helper()
	for {
		m, text, err := s.Next(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if text == nil {
			return m
		}
	}
}

func TestFeedRoundTrip(t *testing.T) {
	t.Parallel()
	broker, nodes := bridgeNodes(t, 2)
	sign, admin := signer(t)
	topic, _ := crypto.LegacyKeccak256([]byte("wsclient-feed"))
	o := wsclient.Options{API: nodes[1].url, Peer: broker.Overlay().String(), Mode: wsclient.Feed, Topic: topic, Admin: admin, Fields: "index,payload"}
	sub, err := wsclient.Subscribe(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	o.API, o.Fields = nodes[0].url, ""
	pub, err := wsclient.PublishFeed(ctxT(t), o, sign, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	for i := range uint64(3) {
		if err := pub.SendFeedUpdate(sign, i, []byte(fmt.Sprint("update ", i))); err != nil {
			t.Fatal(err)
		}
		m := next(t, sub)
		if m.Index != i || string(m.Payload) != fmt.Sprint("update ", i) {
			t.Fatalf("got index %d payload %q", m.Index, m.Payload)
		}
	}
}

func TestGSOCRoundTrip(t *testing.T) {
	t.Parallel()
	broker, nodes := bridgeNodes(t, 2)
	sign, owner := signer(t)
	id, _ := crypto.LegacyKeccak256([]byte("wsclient-gsoc"))
	addr, err := wsclient.GSOCAddress(id, owner)
	if err != nil {
		t.Fatal(err)
	}
	o := wsclient.Options{API: nodes[1].url, Peer: broker.Overlay().String(), Mode: wsclient.GSOC, Topic: addr}
	sub, err := wsclient.Subscribe(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	o.API = nodes[0].url
	pub, err := wsclient.PublishGSOC(ctxT(t), o, owner, id)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	if err := pub.SendGSOC(sign, id, []byte("hello gsoc")); err != nil {
		t.Fatal(err)
	}
	if m := next(t, sub); string(m.Payload) != "hello gsoc" || len(m.Raw) != 65+8+len("hello gsoc") {
		t.Fatalf("got %q (%d bytes)", m.Payload, len(m.Raw))
	}
}
