// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// TestLazyTakeoverKeepsTheOrder: v hangs on E (eager) and L (lazy), w
// below it on v (eager) and L (lazy); LazyWait is an hour, so only the
// takeover's own path delivers. E's link to v is slow (a minute) and E
// dies with update 1 in flight: v has read L's announcement of 1 and waits
// for E's frame, and L's announcement of 2 is on its way when v learns of
// the loss. v sets L eager: L must serve 1 before 2 — under session feeds
// (the soak's cohort) an update that comes after a later one of its feed
// is stale — so the takeover names the oldest announcement v still waits
// for, not the count it read. Before, L served 2 at the SetPush and 1 on
// the ask behind it: 1 dropped at v; v passed 2 on to w, whose ask to L
// for 1 then came too late as well — the one update the long soak lost at
// ten nodes, not all below the node killed.
func TestLazyTakeoverKeepsTheOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		hour := func(_ int, o *bps.Options) { o.LazyWait = time.Hour }
		mt := newLazyTree(t, 2, 2, func(a key) *bps.Spec { return mnemonicAll(t, "lazy-takeover-order", a) }, hour)
		mt.subscribeAll()
		e, l := mt.nodes[0], mt.nodes[1]
		o := relayOptions(2)
		hour(0, &o)
		v, vsub := mt.joinFirstAt(e.Node, l.Node, o)
		_, wsub := joinReferred(mt, o, []*tnode{v, l}, []uint32{2, 1})
		for _, sub := range []*bps.Subscription{vsub, wsub} {
			if lz := sub.LazyParents(); !slices.Equal(lz, []bool{false, true}) {
				t.Fatalf("lazy parents %v, want the first eager, the second lazy", lz)
			}
		}
		p := mt.adminPublisher()
		mt.publishN(p, 0, 1)
		expectUpdates(t, vsub, 0, 1)
		expectUpdates(t, wsub, 0, 1)
		if err := mt.net.SetLink(e.Node, v.Node, streamtest.LinkConfig{Latency: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := mt.net.SetLink(l.Node, v.Node, streamtest.LinkConfig{Latency: 30 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		mt.publishN(p, 1, 2)
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if n := vsub.LazyPending(); n != 1 {
			t.Fatalf("%d announcements waiting at v, want 1", n)
		}
		mt.publishN(p, 2, 3)
		time.Sleep(10 * time.Millisecond) // L took 2 and announced it to v: on its way
		synctest.Wait()
		mt.net.Remove(e.Node)
		mt.publishN(p, 3, 4)
		for name, sub := range map[string]*bps.Subscription{"v": vsub, "w": wsub} {
			var got []uint64
			for len(got) < 3 {
				d := recv(t, sub)
				if d.Service == nil {
					got = append(got, d.Index)
				}
				if d.Index == 3 {
					break
				}
			}
			time.Sleep(5 * time.Second) // a late copy of 1 would come by then
			synctest.Wait()
			for len(sub.C()) > 0 {
				if d := <-sub.C(); d.Service == nil {
					got = append(got, d.Index)
				}
			}
			if !slices.Equal(got, []uint64{1, 2, 3}) {
				t.Errorf("%s received %v after the loss, want [1 2 3]", name, got)
			}
		}
	})
}

// joinReferred is a new node of mt's tree with options o whose parents are
// to[0] and then to[1], at the depths given: a fake origin refers it to
// both, in that order.
func joinReferred(mt *mtree, o bps.Options, to []*tnode, depths []uint32) (*tnode, *bps.Subscription) {
	t := mt.t
	t.Helper()
	var cands []*pb.Candidate
	for i, nd := range to {
		cands = append(cands, &pb.Candidate{Overlay: nd.Overlay().Bytes(), Depth: depths[i]})
	}
	origin := listingRoot(t, mt.net, cands...)
	joiner := newNode(t, mt.net, o)
	for _, nd := range append([]*streamtest.Node{origin, mt.broker.Node}, to[0].Node, to[1].Node) {
		if err := mt.net.Connect(joiner.Node, nd); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := joiner.svc.Subscribe(ctxT(t), origin.Overlay(), mt.sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	if ps := sub.Parents(); len(ps) != 2 || !ps[0].Equal(to[0].Overlay()) || !ps[1].Equal(to[1].Overlay()) {
		t.Fatalf("parents %v, want %v", mt.names(ps), mt.names([]swarm.Address{to[0].Overlay(), to[1].Overlay()}))
	}
	return joiner, sub
}
