// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
)

// TestStressLeaveReparentEscapeClose runs a relay's graceful leave (its
// children reparent), the gap escapes a skipping publisher sets off, a
// leaf's close and then the close of every subscription, a service and
// the publisher all at once, on a tree of relays with two parents each,
// for the race detector (run it with -race -count=20). It asserts what no
// interleaving may break: every Close returns, every subscription ends
// with its channel closed, and the nodes that stay keep receiving until
// they are closed.
func TestStressLeaveReparentEscapeClose(t *testing.T) {
	t.Parallel()
	mt := newMTree(t, 7, 2, 2, func(a key) *bps.Spec { return feedSpec(t, "stress", a) })
	mt.subscribeAll()
	p := mt.adminPublisher()
	relay, kids := mt.relayWithChildren()
	ri := slices.Index(mt.nodes, relay)
	leaf := -1
	for j, nd := range mt.nodes {
		if j != ri && !slices.Contains(kids, j) && len(mt.position(nd).Children) == 0 {
			leaf = j
		}
	}
	var stay []int
	for j := range mt.subs {
		if j != ri && j != leaf {
			stay = append(stay, j)
		}
	}

	// The publisher skips every third index: each node below two relays
	// sees gaps both its parents passed over, and escapes (escape.go).
	// It publishes one update a round until what a phase waits for came.
	next := uint64(0)
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	pump := func(what string, until <-chan struct{}) {
		t.Helper()
		for {
			if next%3 == 1 {
				next++ // skipped on purpose
			}
			if err := p.Send(ctxT(t), update(t, mt.admin, mt.sp, p.Challenge(), next, fmt.Sprintf("m%d", next))); err != nil {
				t.Fatalf("publish %d: %v", next, err)
			}
			next++
			round := time.NewTimer(50 * time.Millisecond) // the publisher's pace, not a synchronisation
			select {
			case <-until:
				round.Stop()
				return
			case <-round.C:
			case <-deadline.C:
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	stop := make(chan struct{})
	var owned sync.WaitGroup // every goroutine the test starts
	defer owned.Wait()
	defer close(stop)

	// Once the first escape is traced, the relay leaves (its children
	// reparent) and the leaf closes while the other nodes' escapes are
	// armed or running.
	pump("an escape", traced(&owned, mt.nodes, kind(bps.EventEscape), stop))
	left := make(chan struct{})
	var leaving sync.WaitGroup
	leaving.Go(func() {
		if err := mt.subs[ri].Close(); err != nil {
			t.Errorf("the relay's close: %v", err)
		}
	})
	if leaf >= 0 {
		leaving.Go(func() {
			if err := mt.subs[leaf].Close(); err != nil {
				t.Errorf("the leaf's close: %v", err)
			}
		})
	}
	owned.Go(func() { leaving.Wait(); close(left) })
	pump("the relay and the leaf to leave", left)

	// The nodes that stay keep receiving: each takes an update published
	// after the churn.
	from := next
	got := make(chan struct{}, len(stay))
	var readers sync.WaitGroup // each reads its subscription until it ends
	for _, j := range stay {
		sub := mt.subs[j]
		readers.Go(func() {
			for d := range sub.C() {
				if d.Service == nil && d.Index >= from {
					got <- struct{}{}
					break
				}
			}
			for range sub.C() {
			}
		})
	}
	all := make(chan struct{})
	owned.Go(func() {
		for range stay {
			select {
			case <-got:
			case <-stop:
				return
			}
		}
		close(all)
	})
	pump("every node that stays to take an update past the churn", all)

	// Close everything at once: every subscription, a node's service and
	// the publisher, while escapes may still be armed or running.
	var closing sync.WaitGroup
	for _, j := range stay {
		closing.Go(func() { _ = mt.subs[j].Close() })
	}
	closing.Go(func() {
		if err := mt.nodes[stay[0]].svc.Close(); err != nil {
			t.Errorf("close service: %v", err)
		}
	})
	closing.Go(func() { _ = p.Close() })
	closing.Wait()
	ended := make(chan struct{})
	owned.Go(func() { readers.Wait(); close(ended) })
	select {
	case <-ended: // every subscription's channel closed
	case <-deadline.C:
		t.Fatal("a subscription's channel was not closed")
	}
	for _, j := range append(stay, ri) {
		if !isClosed(mt.subs[j].Done()) {
			t.Fatalf("subscription %d's channel closed, Done not", j)
		}
	}
	escapes, reparents := 0, 0
	for _, nd := range mt.nodes {
		escapes += nd.rec.count(kind(bps.EventEscape))
		reparents += nd.rec.count(kind(bps.EventReparent))
	}
	t.Logf("%d escapes, %d reparents, %d updates", escapes, reparents, next)
}

// traced returns a channel closed once an event that matches has been
// traced at any of nodes; the goroutine that waits for it, which owned
// waits for, gives up when stop is closed.
func traced(owned *sync.WaitGroup, nodes []*tnode, match func(bps.Event) bool, stop <-chan struct{}) <-chan struct{} {
	found := make(chan struct{})
	owned.Go(func() {
		for {
			cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(stop)}}
			for _, nd := range nodes {
				nd.rec.mu.Lock()
				hit := slices.ContainsFunc(nd.rec.events, match)
				notify := nd.rec.notify
				nd.rec.mu.Unlock()
				if hit {
					close(found)
					return
				}
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(notify)})
			}
			if chosen, _, _ := reflect.Select(cases); chosen == 0 {
				return
			}
		}
	})
	return found
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
