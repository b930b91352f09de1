// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// waitTimeout bounds every wait for an event; it is a deadline for a test
// that has already failed, never a synchronisation.
const waitTimeout = 20 * time.Second

// tnode is a streamtest node running a BPS service.
type tnode struct {
	*streamtest.Node
	svc *bps.Service
}

func newNetwork(t *testing.T) *streamtest.Network {
	t.Helper()
	n := streamtest.New()
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close network: %v", err)
		}
	})
	return n
}

func newNode(t *testing.T, net *streamtest.Network, o bps.Options) *tnode {
	t.Helper()
	nd := net.NewNode()
	svc, err := bps.New(nd, nd.Overlay(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.AddProtocol(svc.Protocol()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Errorf("close service: %v", err)
		}
	})
	return &tnode{Node: nd, svc: svc}
}

// cluster is a broker and n client nodes connected to it.
func cluster(t *testing.T, o bps.Options, n int) (*streamtest.Network, *tnode, []*tnode) {
	t.Helper()
	net := newNetwork(t)
	broker := newNode(t, net, o)
	clients := make([]*tnode, n)
	for i := range clients {
		clients[i] = newNode(t, net, bps.Options{Timing: bps.Timing{BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond}})
		if err := net.Connect(clients[i].Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	return net, broker, clients
}

// key is a publisher identity.
type key struct {
	signer crypto.Signer
	addr   []byte
}

func newKey(t testing.TB) key {
	t.Helper()
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(pk)
	addr, err := signer.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	return key{signer: signer, addr: addr.Bytes()}
}

func topicOf(name string) []byte {
	h, _ := crypto.LegacyKeccak256([]byte(name))
	return h
}

func feedSpec(t testing.TB, topic string, admin key) *bps.Spec {
	t.Helper()
	sp, err := bps.NewFeedSpec(topicOf(topic), admin.addr)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func update(t testing.TB, k key, sp *bps.Spec, index uint64, payload string) *pb.Message {
	t.Helper()
	m, err := bps.FeedUpdate(k.signer, sp.Topic, index, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func cohortInfo(t *testing.T, broker *tnode, sp *bps.Spec) bps.CohortInfo {
	t.Helper()
	for _, c := range broker.svc.Cohorts() {
		if string(c.Spec.Canonical()) == string(sp.Canonical()) {
			return c
		}
	}
	t.Fatalf("no cohort %s at broker", sp)
	return bps.CohortInfo{}
}
