// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
)

// TestPeerCheckDisconnects: a peer check that answers with a
// p2p.DisconnectError (the node's answer to a record naming another peer id:
// the overlay itself is in doubt) refuses the stream and has the connection
// closed, without blocklisting the overlay.
func TestPeerCheckDisconnects(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	impostor := newNode(t, net, bps.Options{})
	honest := newNode(t, net, bps.Options{})
	broker := newNode(t, net, bps.Options{
		Deps: bps.Deps{
			PeerCheck: func(_ context.Context, p p2p.Peer, _ p2p.Stream) error {
				if p.Address.Equal(impostor.Overlay()) {
					return p2p.NewDisconnectError(errors.New("the record names another peer id"))
				}
				return nil
			},
		},
	})
	// The impostor learns of the disconnect through a protocol hook, which
	// runs after the network has dealt with the handler's error.
	gone := make(chan struct{})
	var once sync.Once
	if err := impostor.AddProtocol(p2p.ProtocolSpec{Name: "watch", Version: "1.0.0", DisconnectIn: func(p p2p.Peer) error {
		if p.Address.Equal(broker.Overlay()) {
			once.Do(func() { close(gone) })
		}
		return nil
	}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*tnode{impostor, honest} {
		if err := net.Connect(c.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	sp := feedSpec(t, "peer-check-disconnect", newKey(t))
	subscribe(t, honest, broker, sp)
	if _, err := impostor.svc.Subscribe(ctxT(t), broker.Overlay(), sp); err == nil {
		t.Fatal("the impostor joined")
	}
	select {
	case <-gone:
	case <-ctxT(t).Done():
		t.Fatal("the broker kept the impostor's connection")
	}
	if b := broker.Blocklists(); len(b) != 0 {
		t.Fatalf("broker blocklisted %v", b)
	}
	var de *p2p.DisconnectError
	if errs := broker.HandlerErrors(); len(errs) != 1 || !errors.As(errs[0].Err, &de) {
		t.Fatalf("broker's handler errors %v, want one DisconnectError", errs)
	}
}

// TestPeerCheckBeforeClaim: the client runs the peer check on a publisher
// stream before it claims against the broker's overlay (SWIP-74 item 11),
// and a failing check fails the publish with nothing sent; subscriber
// streams, which claim nothing, are not checked.
func TestPeerCheckBeforeClaim(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	broker := newNode(t, net, bps.Options{})
	unbound := errors.New("the broker's record names another peer id")
	var (
		mu      sync.Mutex
		checked []swarm.Address
		fail    = true
	)
	client := newNode(t, net, bps.Options{
		Timing: bps.Timing{
			BackoffMin: time.Millisecond,
			BackoffMax: 2 * time.Millisecond,
		},
		Deps: bps.Deps{
			PeerCheck: func(_ context.Context, p p2p.Peer, _ p2p.Stream) error {
				mu.Lock()
				defer mu.Unlock()
				checked = append(checked, p.Address)
				if fail {
					return unbound
				}
				return nil
			},
		},
	})
	if err := net.Connect(client.Node, broker.Node); err != nil {
		t.Fatal(err)
	}
	admin := newKey(t)
	sp := feedSpec(t, "peer-check-claim", admin)

	subscribe(t, client, broker, sp)
	mu.Lock()
	if len(checked) != 0 {
		t.Fatalf("a subscriber stream was checked: %v", checked)
	}
	mu.Unlock()

	_, err := client.svc.Publish(ctxT(t), broker.Overlay(), sp, bps.PublishOptions{Addr: admin.addr, Signer: admin.signer})
	if !errors.Is(err, unbound) {
		t.Fatalf("publish with a failing check: %v, want %v", err, unbound)
	}
	if c := cohortInfo(t, broker, sp); c.Publishers != 0 {
		t.Fatalf("the broker took a publisher: %+v", c)
	}

	mu.Lock()
	fail = false
	mu.Unlock()
	p := publish(t, client, broker, sp, admin, 0)
	if err := p.PublishUpdate(ctxT(t), 0, []byte("bound")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(checked) != 2 || !checked[0].Equal(broker.Overlay()) || !checked[1].Equal(broker.Overlay()) {
		t.Fatalf("checked %v, want the broker twice", checked)
	}
}
