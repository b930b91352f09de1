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
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestConcurrentAdminStreams: the admin publishing the same feed from two
// nodes at once; the cursor arbitrates, each index is delivered exactly once
// and in order, the losers count as retransmits.
func TestConcurrentAdminStreams(t *testing.T) {
	t.Parallel()
	const n = 100
	// The subscriber's queue holds every update: this test is about the
	// cursor, and a subscriber slower than two publishers is reset
	// (queue_reset), as it should be, when the signature path outpaces it.
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{QueueLen: n}}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "two-admins", admin)
	sub := subscribe(t, cl[0], broker, sp)
	// One pending stream per address at a time (Rev 8): the second
	// stream joins once the first has claimed.
	pubs := []*bps.Publisher{publish(t, cl[1], broker, sp, admin, 0)}
	broker.rec.wait(t, "the first claim", kind(bps.EventClaim))
	pubs = append(pubs, publish(t, cl[2], broker, sp, admin, 0))
	broker.rec.waitN(t, 2, "two claims", kind(bps.EventClaim))
	// Each stream signs the same updates under its own challenge (SWIP-74
	// Rev 8): the broker's cursor is per publisher, not per stream.
	msgs := make([][]*pb.Broadcast, len(pubs))
	for j, p := range pubs {
		for i := range n {
			msgs[j] = append(msgs[j], update(t, admin, sp, p.Challenge(), uint64(i), "x"))
		}
	}

	// The subscriber drains as the publishers send.
	got := make(chan []uint64, 1)
	go func() {
		var idx []uint64
		for d := range sub.C() {
			idx = append(idx, d.Index)
			if d.Index == n-1 {
				break
			}
		}
		got <- idx
	}()
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for j, p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range msgs[j] {
				if err := p.Send(t.Context(), m); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var idx []uint64
	select {
	case idx = <-got:
	case <-time.After(waitTimeout):
		t.Fatal("the subscriber did not receive the last index")
	}
	for i := 1; i < len(idx); i++ {
		if idx[i] <= idx[i-1] {
			t.Fatalf("delivered %d after %d", idx[i], idx[i-1])
		}
	}
	broker.rec.waitN(t, 2*n, "every publication handled", func(e bps.Event) bool {
		return e.Kind == bps.EventAccept || (e.Kind == bps.EventDrop && e.Counter == bps.CounterRetransmit)
	})
	c := cohortInfo(t, broker, sp)
	if c.Accepted+c.Counters["retransmit"] != 2*n || c.Cursor != n {
		t.Fatalf("accepted %d retransmit %d cursor %d", c.Accepted, c.Counters["retransmit"], c.Cursor)
	}
	if sub.Received() != c.Accepted {
		t.Fatalf("subscriber received %d, broker accepted %d (%d dropped, err %v, counters %v)", sub.Received(), c.Accepted, sub.Dropped(), sub.Err(), c.Counters)
	}
}

// TestServiceClose: Close ends every stream on both sides within its bound,
// handles report it, and later calls are refused.
func TestServiceClose(t *testing.T) {
	t.Parallel()
	net, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "close", admin)
	sub := subscribe(t, cl[0], broker, sp)
	p := publish(t, cl[1], broker, sp, admin, 0)

	start := time.Now()
	if err := broker.svc.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("close took %s", d)
	}
	<-sub.Done()
	<-p.Done()
	if sub.Err() == nil || p.Err() == nil {
		t.Fatalf("streams ended without error: sub %v pub %v", sub.Err(), p.Err())
	}
	if _, err := cl[0].svc.Subscribe(ctxT(t), broker.Overlay(), sp); err == nil {
		t.Fatal("a closed broker accepted a subscriber")
	}

	// Closing a client ends its handles.
	if err := net.Connect(cl[1].Node, cl[0].Node); err != nil {
		t.Fatal(err)
	}
	sub2 := subscribe(t, cl[1], cl[0], sp) // cl[0] brokers now
	if err := cl[1].svc.Close(); err != nil {
		t.Fatal(err)
	}
	<-sub2.Done()
	if _, err := cl[1].svc.Subscribe(ctxT(t), cl[0].Overlay(), sp); !errors.Is(err, bps.ErrClosed) {
		t.Fatalf("subscribe after close: %v", err)
	}
}

// TestPeerCheck: a failing peer check (SWIP-74 item 11's transport binding)
// refuses the stream before its Join is read and blocklists the peer.
func TestPeerCheck(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	impostor := newNode(t, net, bps.Options{})
	honest := newNode(t, net, bps.Options{})
	broker := newNode(t, net, bps.Options{
		Deps: bps.Deps{
			PeerCheck: func(_ context.Context, p p2p.Peer, _ p2p.Stream) error {
				if p.Address.Equal(impostor.Overlay()) {
					return errors.New("address record does not name the connection's peer id")
				}
				return nil
			},
		},
	})
	for _, c := range []*tnode{impostor, honest} {
		if err := net.Connect(c.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	sp := feedSpec(t, "peer-check", newKey(t))
	subscribe(t, honest, broker, sp)
	if _, err := impostor.svc.Subscribe(ctxT(t), broker.Overlay(), sp); err == nil {
		t.Fatal("the impostor joined")
	}
	waitBlocklisted(t, broker, impostor)
}
