// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bpsnet_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"github.com/ethersphere/bps/pkg/bps/streamtest/bpsnet"
)

func newNetwork(t *testing.T, o bpsnet.Options) *bpsnet.Network {
	t.Helper()
	n := bpsnet.New(o)
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return n
}

func nodes(t *testing.T, n *bpsnet.Network, k int) []*bpsnet.Node {
	t.Helper()
	nds, err := n.NewNodes(k)
	if err != nil {
		t.Fatal(err)
	}
	return nds
}

func publish(t *testing.T, p *bps.Publisher, k bpsnet.Key, index uint64, payload string) {
	t.Helper()
	if err := p.PublishUpdate(t.Context(), index, []byte(payload)); err != nil {
		t.Fatalf("publish %d: %v", index, err)
	}
}

// A cohort over a link with latency: every subscriber receives every update
// in order, a subscriber of another cohort nothing.
func TestCohort(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, bpsnet.Options{Transport: []streamtest.Option{
			streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: 30 * time.Millisecond}),
		}})
		all := nodes(t, n, 6)
		broker, pubNode, subNodes, other := all[0], all[1], all[2:5], all[5]
		if err := n.ConnectStar(broker, all[1:]); err != nil {
			t.Fatal(err)
		}
		admin := pubNode.Key()
		sp := bpsnet.Spec("cohort", admin)
		subs := make([]*bps.Subscription, len(subNodes))
		for i, nd := range subNodes {
			sub, err := nd.Subscribe(t.Context(), broker, sp)
			if err != nil {
				t.Fatal(err)
			}
			subs[i] = sub
		}
		otherSub, err := other.Subscribe(t.Context(), broker, bpsnet.Spec("other", admin))
		if err != nil {
			t.Fatal(err)
		}
		p, err := pubNode.Publish(t.Context(), broker, sp, admin, 0)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		for i := range uint64(3) {
			publish(t, p, admin, i, fmt.Sprint("update ", i))
		}
		for i := range uint64(3) {
			bpsnet.AssertAllReceive(t, subs, i, []byte(fmt.Sprint("update ", i)))
		}
		// Publisher to broker, broker to subscriber: two hops of 30 ms.
		if d := time.Since(start); d != 60*time.Millisecond {
			t.Fatalf("deliveries took %s, want 60ms", d)
		}
		bpsnet.AssertNeverReceives(t, otherSub, time.Minute)
		for _, s := range append(subs, otherSub) {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// A Follower rejoins a broker that was killed and restarted, waiting out the
// backoff, and keeps receiving; the restarted broker is a new node with the
// same overlay.
func TestFollowerRejoins(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, bpsnet.Options{})
		all := nodes(t, n, 4)
		broker, pubNode, subNodes := all[0], all[1], all[2:]
		if err := n.ConnectStar(broker, all[1:]); err != nil {
			t.Fatal(err)
		}
		admin := pubNode.Key()
		sp := bpsnet.Spec("rejoin", admin)
		var fs []*bpsnet.Follower
		for _, nd := range subNodes {
			f, err := nd.Follow(broker.Overlay(), sp, bpsnet.FollowOptions{Buffer: 8})
			if err != nil {
				t.Fatal(err)
			}
			fs = append(fs, f)
		}
		for _, f := range fs {
			if err := f.WaitJoins(t.Context(), 1); err != nil {
				t.Fatal(err)
			}
		}
		p, err := pubNode.Publish(t.Context(), broker, sp, admin, 0)
		if err != nil {
			t.Fatal(err)
		}
		publish(t, p, admin, 0, "before")
		bpsnet.AssertAllReceive(t, fs, 0, []byte("before"))

		killed := time.Now()
		if err := n.Kill(broker); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Second)
		restarted, err := n.Restart(broker)
		if err != nil {
			t.Fatal(err)
		}
		if !restarted.Overlay().Equal(broker.Overlay()) || len(restarted.Peers()) != 3 {
			t.Fatalf("restarted broker: overlay %s, %d peers", restarted.Overlay(), len(restarted.Peers()))
		}
		if _, err := n.Restart(broker); err == nil {
			t.Fatal("restarting a stale incarnation: want an error")
		}
		for _, f := range fs {
			if err := f.WaitJoins(t.Context(), 2); err != nil {
				t.Fatal(err)
			}
			if f.Failures() == 0 {
				t.Fatal("a follower rejoined without ever failing while the broker was down")
			}
		}
		if d := time.Since(killed); d < 3*time.Second {
			t.Fatalf("rejoined after %s, before the broker was back", d)
		}
		<-p.Done()
		p, err = pubNode.Publish(t.Context(), restarted, sp, admin, 1)
		if err != nil {
			t.Fatal(err)
		}
		publish(t, p, admin, 1, "after")
		bpsnet.AssertAllReceive(t, fs, 1, []byte("after"))
	})
}

// TestOnJoinBeforeCount: what OnJoin records is there when WaitJoins
// returns — an OnJoin that takes (virtual) time still runs before the join
// is counted.
func TestOnJoinBeforeCount(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, bpsnet.Options{})
		all := nodes(t, n, 2)
		broker, sub := all[0], all[1]
		if err := n.ConnectStar(broker, all[1:]); err != nil {
			t.Fatal(err)
		}
		sp := bpsnet.Spec("onjoin", broker.Key())
		var recorded atomic.Int32
		f, err := sub.Follow(broker.Overlay(), sp, bpsnet.FollowOptions{OnJoin: func(*bps.Subscription) {
			time.Sleep(time.Second) // the follower is blocked here while the test may run
			recorded.Add(1)
		}})
		if err != nil {
			t.Fatal(err)
		}
		if err := f.WaitJoins(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		if got := recorded.Load(); got != 1 {
			t.Fatalf("OnJoin recorded %d joins when WaitJoins(1) returned, want 1", got)
		}
	})
}

// Stop closes the node's services first: its subscribers' streams end, its
// links go down with the graceful hooks, and it can be restarted.
func TestStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, bpsnet.Options{})
		all := nodes(t, n, 3)
		broker, subNodes := all[0], all[1:]
		if err := n.ConnectStar(broker, subNodes); err != nil {
			t.Fatal(err)
		}
		sp := bpsnet.Spec("stop", subNodes[0].Key())
		sub, err := subNodes[0].Subscribe(t.Context(), broker, sp)
		if err != nil {
			t.Fatal(err)
		}
		f, err := broker.Follow(subNodes[1].Overlay(), sp, bpsnet.FollowOptions{}) // the broker follows elsewhere
		if err != nil {
			t.Fatal(err)
		}
		if err := f.WaitJoins(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if err := n.Stop(ctx, broker); err != nil {
			t.Fatalf("stop: %v", err)
		}
		<-sub.Done()
		<-f.Done()
		if broker.Alive() || len(subNodes[0].Peers()) != 0 {
			t.Fatal("stopped broker still on the network")
		}
		if _, err := n.Restart(broker); err != nil {
			t.Fatal(err)
		}
	})
}

func TestDeterministic(t *testing.T) {
	t.Parallel()
	build := func(seed int64) (overlays, addrs []string) {
		n := bpsnet.New(bpsnet.Options{Seed: seed})
		defer func() { _ = n.Close() }()
		nds, err := n.NewNodes(3)
		if err != nil {
			t.Fatal(err)
		}
		for _, nd := range nds {
			overlays = append(overlays, nd.Overlay().String())
			addrs = append(addrs, fmt.Sprintf("%x", nd.Key().Addr))
		}
		return overlays, addrs
	}
	o1, a1 := build(5)
	o2, a2 := build(5)
	o3, a3 := build(6)
	if fmt.Sprint(o1, a1) != fmt.Sprint(o2, a2) {
		t.Fatal("same seed, different nodes")
	}
	if o1[0] == o3[0] || a1[0] == a3[0] || a1[0] == a1[1] {
		t.Fatal("keys or overlays repeat")
	}
}

func TestConnectSome(t *testing.T) {
	t.Parallel()
	n := newNetwork(t, bpsnet.Options{})
	nds := nodes(t, n, 20)
	if err := n.ConnectSome(nds, 3); err != nil {
		t.Fatal(err)
	}
	for _, nd := range nds {
		if got := len(nd.Peers()); got < 3 {
			t.Fatalf("node with %d peers, want at least 3", got)
		}
	}
	if err := n.ConnectAll(nds[:5]); err != nil {
		t.Fatal(err)
	}
	if got := len(nds[0].Peers()); got < 4 {
		t.Fatalf("%d peers after ConnectAll, want at least 4", got)
	}
	var _ p2p.StreamerDisconnecter = nds[0]
}
