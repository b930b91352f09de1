// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// TestMultihopFlashCrowd: a crowd joins a tree at once, on the node's
// default probe wait and backoffs, over 10 ms links. A broker admitting 4
// and relays admitting 4 take 120 joiners that all Subscribe in the same
// instant: the broker's probes pool what they find beyond the two
// candidates each joiner is told, a join that finds every probe open waits
// for them instead of being told a bare FULL, and a relay offers each free
// slot to one probe at a time. Every joiner is attached within 8 s of
// virtual time (2–5 s measured; 12 s before the pool), and the median
// joiner's first OK is its second answer (FULL with candidates, then OK;
// 7 answers before).
func TestMultihopFlashCrowd(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const crowd = 120
		net := newNetwork(t, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: 10 * time.Millisecond}))
		admin := newKey(t)
		sp := feedSpec(t, "flash-crowd", admin)
		broker := newNode(t, net, bps.Options{MaxStreamsPerCohort: 4})
		all := []*tnode{broker}
		for range crowd {
			nd := newNode(t, net, bps.Options{RelayCapacity: 4})
			for _, o := range all {
				if err := net.Connect(nd.Node, o.Node); err != nil {
					t.Fatal(err)
				}
			}
			all = append(all, nd)
		}

		start := time.Now()
		took := make([]time.Duration, crowd)
		subs := make([]*bps.Subscription, crowd)
		var wg sync.WaitGroup
		for i, nd := range all[1:] {
			wg.Go(func() {
				for {
					sub, err := nd.svc.Subscribe(t.Context(), broker.Overlay(), sp)
					if err == nil {
						took[i], subs[i] = time.Since(start), sub
						return
					}
					if !errors.Is(err, bps.ErrFull) {
						t.Errorf("joiner %d: %v", i, err)
						return
					}
					time.Sleep(time.Until(nd.svc.BackoffUntil(broker.Overlay(), sp)))
				}
			})
		}
		wg.Wait()
		defer func() {
			for _, sub := range subs {
				if sub != nil {
					_ = sub.Close()
				}
			}
		}()

		answers := make([]int, crowd)
		for i, nd := range all[1:] {
			nd.rec.mu.Lock()
			for _, e := range nd.rec.events {
				if e.Kind != bps.EventParent {
					continue
				}
				answers[i]++
				if e.Status == pb.Status_OK.String() {
					break
				}
			}
			nd.rec.mu.Unlock()
		}
		slices.Sort(answers)
		slowest := slices.Max(took)
		t.Logf("slowest join %s; answers to the first OK: %v", slowest, answers)
		if slowest > 8*time.Second || answers[crowd/2] > 2 {
			t.Fatalf("slowest join %s (want ≤ 8 s), median %d answers to the first OK (want ≤ 2)", slowest, answers[crowd/2])
		}
	})
}
