// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// sessionSpec is the soak's cohort: a mnemonic topic whose publishers are
// everyone (the admin among them) — session feeds judged by their owner's
// cursor, with no reorder: an update that comes after a later one of its
// feed is stale, dropped.
func sessionSpec(t testing.TB, topic string, admin key) *bps.Spec {
	t.Helper()
	sp, err := bps.NewSpec(&pb.CohortSpec{Topic: topicOf(topic), Binding: pb.TopicBinding_MNEMONIC, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL})
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// TestLazyTakeoverKeepsTheOrder: v's eager parent E is slow (its link a
// minute long) and dies with update 1 in flight; v has read the lazy
// parent L's announcement of 1 and waits for E's frame (LazyWait is an
// hour), and L's announcement of 2 is on its way when v learns of the
// loss. v sets L eager: L must serve 1 before 2 — under session feeds an
// update that comes after a later one is stale — so the takeover names
// the oldest announcement v still waits for, not the count it read.
// Before, L served 2 at the SetPush and 1 on the ask behind it: 1 lost,
// at v and everything below it (the soak's update 14561).
func TestLazyTakeoverKeepsTheOrder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mt := newLazyTree(t, 3, 2, func(a key) *bps.Spec { return sessionSpec(t, "lazy-takeover-order", a) }, func(_ int, o *bps.Options) {
			o.LazyWait = time.Hour // only the takeover's own path delivers
		})
		mt.subscribeAll()
		v, sub := mt.nodes[2], mt.subs[2]
		eager, lazy := pushParents(sub)
		if len(sub.Parents()) != 2 || eager.IsZero() || lazy.IsZero() {
			t.Fatalf("parents %v, lazy %v: want two, one eager", sub.Parents(), sub.LazyParents())
		}
		e, l := findNode(mt.nodes, eager), findNode(mt.nodes, lazy)
		p := mt.adminPublisher()
		mt.publishN(p, 0, 1)
		expectUpdates(t, sub, 0, 1)
		if err := mt.net.SetLink(e.Node, v.Node, streamtest.LinkConfig{Latency: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if err := mt.net.SetLink(l.Node, v.Node, streamtest.LinkConfig{Latency: 30 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		mt.publishN(p, 1, 2)
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		if n := sub.LazyPending(); n != 1 {
			t.Fatalf("%d announcements waiting, want 1", n)
		}
		mt.publishN(p, 2, 3)
		time.Sleep(10 * time.Millisecond) // L took 2 and announced it: on its way
		synctest.Wait()
		mt.net.Remove(e.Node)
		mt.publishN(p, 3, 4)
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
		if !slices.Equal(got, []uint64{1, 2, 3}) {
			t.Errorf("v received %v after the loss, want [1 2 3] (%d dropped)", got, sub.Dropped())
		}
	})
}
