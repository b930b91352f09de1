// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
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

// testChallenge is the challenge of the publisher stream every test update
// is signed for.
var testChallenge = bytes.Repeat([]byte{0xc7}, 32)

// msg is one update as the tests use it: b, the Broadcast live on a stream
// (SWIP-74 Rev 8: a session-feed chunk under testChallenge), and, for
// storage (SWIP-65 on Rev 8), the same payload under the channel's own id
// keccak256(topic ‖ index): Address and Data.
type msg struct {
	b       *pb.Broadcast
	live    swarm.Address // b's chunk address
	Address []byte        // the stored update's address
	Data    []byte        // the stored update: id ‖ signature ‖ span ‖ payload
}

func update(t testing.TB, k key, sp *bps.Spec, index uint64, payload string) *msg {
	t.Helper()
	m, err := feedUpdate(k, sp, index, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func feedUpdate(k key, sp *bps.Spec, index uint64, payload []byte) (*msg, error) {
	b, err := sp.Chunk(k.signer, k.addr, pb.Kind_DATA, testChallenge, index, payload)
	if err != nil {
		return nil, err
	}
	data, addr, err := bps.StorageUpdate(k.signer, k.addr, sp.Topic, index, payload)
	if err != nil {
		return nil, err
	}
	live, err := soc.CreateAddress(b.Soc[:swarm.HashSize], k.addr)
	if err != nil {
		return nil, err
	}
	return &msg{b: b, live: live, Address: addr.Bytes(), Data: data}, nil
}

// service is the admin's ROSTER naming pubs (or, with no pubs and kind
// EOS, its EOS) at index, live, and what a receiver learns of it.
func service(t testing.TB, admin key, sp *bps.Spec, kind pb.Kind, index uint64, pubs ...[]byte) (*msg, *bps.ServiceMsg) {
	t.Helper()
	var payload []byte
	if kind == pb.Kind_ROSTER {
		var err error
		if payload, err = bps.RosterPayload(pubs); err != nil {
			t.Fatal(err)
		}
	}
	b, err := sp.Chunk(admin.signer, admin.addr, kind, testChallenge, index, payload)
	if err != nil {
		t.Fatal(err)
	}
	return &msg{b: b, live: socAddress(t, b.Soc[:swarm.HashSize], admin.addr)}, &bps.ServiceMsg{Kind: kind, Index: index, Publishers: pubs}
}

func socAddress(t testing.TB, id, owner []byte) swarm.Address {
	t.Helper()
	a, err := soc.CreateAddress(id, owner)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// delivery is m delivered live on a stream, by owner.
func delivery(m *msg, owner []byte, index uint64, svc *bps.ServiceMsg) bps.Delivery {
	return bps.Delivery{Kind: m.b.Kind, Index: index, Challenge: m.b.Challenge, Address: m.live, Owner: owner, Data: m.b.Soc, Service: svc}
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
