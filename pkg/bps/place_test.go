// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestPlaceStress runs a relay's graceful leave (Reparent to its
// children), a leaf's close, the admin's END_OF_STREAM and readers of
// every node's tree view at once, under -race, in a tree of eight relaying
// nodes. Every subscription ends — none deadlocks — and once each node's
// Service has closed, no node holds a place in the cohort any more: every
// parent, child and relay it recorded was released.
func TestPlaceStress(t *testing.T) {
	t.Parallel()
	for round := range 3 {
		mt := newMTree(t, 8, 2, 2, func(a key) *bps.Spec { return feedSpec(t, "place-stress", a) })
		mt.subscribeAll()
		pubNode := newNode(t, mt.net, bps.Options{})
		if err := mt.net.Connect(pubNode.Node, mt.broker.Node); err != nil {
			t.Fatal(err)
		}
		p := publish(t, pubNode, mt.broker, mt.sp, mt.admin, 0)
		mt.publishN(p, 0, 3)
		relay, _ := mt.relayWithChildren()
		ri := slices.Index(mt.nodes, relay)
		leaf := -1
		for i, nd := range mt.nodes {
			if len(mt.position(nd).Children) == 0 {
				leaf = i
				break
			}
		}
		if leaf < 0 {
			t.Fatalf("round %d: no leaf", round)
		}

		var wg sync.WaitGroup
		stop := make(chan struct{})
		// Readers of every node's place while it changes.
		for _, nd := range append([]*tnode{mt.broker}, mt.nodes...) {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						_ = nd.svc.Tree()
						_ = nd.svc.Cohorts()
					}
				}
			})
		}
		// Every subscription drains until it ends.
		var drained sync.WaitGroup
		for _, sub := range mt.subs {
			drained.Go(func() {
				for range sub.C() {
				}
			})
		}
		wg.Go(func() { _ = mt.subs[ri].Close() })
		wg.Go(func() { _ = mt.subs[leaf].Close() })
		ch := p.Challenge()
		msgs := []*pb.Broadcast{update(t, mt.admin, mt.sp, ch, 3, "m3"), update(t, mt.admin, mt.sp, ch, 4, "m4"), endMsg(t, mt.admin, mt.sp, ch)}
		ctx := ctxT(t)
		wg.Go(func() {
			for _, m := range msgs {
				if err := p.Send(ctx, m); err != nil {
					t.Errorf("round %d: publish: %v", round, err)
					return
				}
			}
		})
		for i, sub := range mt.subs {
			select {
			case <-sub.Done():
			case <-ctx.Done():
				t.Fatalf("round %d: subscription %d did not end", round, i)
			}
		}
		drained.Wait()
		close(stop)
		wg.Wait()

		<-p.Done()
		for i, nd := range append([]*tnode{mt.broker, pubNode}, mt.nodes...) {
			if err := nd.svc.Close(); err != nil {
				t.Fatalf("round %d: close node %d: %v", round, i, err)
			}
			for _, pos := range nd.svc.Tree() {
				if slices.Equal(pos.Spec.Canonical(), mt.sp.Canonical()) {
					t.Fatalf("round %d: node %d still holds a place after close: %+v", round, i, pos)
				}
			}
			if n := len(nd.svc.Cohorts()); n != 0 {
				t.Fatalf("round %d: node %d still brokers %d cohorts after close", round, i, n)
			}
			if n := nd.svc.Places(); n != 0 {
				t.Fatalf("round %d: node %d still holds %d places after close", round, i, n)
			}
		}
	}
}
