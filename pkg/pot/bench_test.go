// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package pot_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/storage"
	"github.com/ethersphere/bee/v2/pkg/swarm"

	"github.com/ethersphere/bps/pkg/pot"
)

// BenchmarkInsert is the publisher's cost of the pot profile per update:
// the whirl (from the previous top alone) and the hash of the new node's
// chunk, its reference — for a 1 KiB value with timestamp keys.
func BenchmarkInsert(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	v := make([]byte, 1024)
	top, err := pot.New(1_780_000_000_000, v)
	if err != nil {
		b.Fatal(err)
	}
	ch, _ := top.Chunk()
	ref, key := ch.Address(), top.Key()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		key += 1500 + uint64(r.IntN(1000))
		n, err := pot.Insert(top, ref, key, v)
		if err != nil {
			b.Fatal(err)
		}
		c, err := n.Chunk()
		if err != nil {
			b.Fatal(err)
		}
		top, ref = n, c.Address()
	}
	b.ReportMetric(float64(top.Forks()), "forks/node")
}

// BenchmarkRecover is a follower's recovery of a gap of 64 by descent over
// bee's in-memory chunk store, with the anchor check: retrievals per
// recovered update and updates recovered per second (hash checks only).
func BenchmarkRecover(b *testing.B) {
	for _, missed := range []int{1, 8, 64} {
		b.Run(fmt.Sprint("missed=", missed), func(b *testing.B) {
			const n = 4096
			f := build(b, n, timestamps, 2)
			g := count(f.store)
			ctx := context.Background()
			b.ResetTimer()
			for i := range b.N {
				top := n - 1 - i%(n-missed-1)
				w := top - missed - 1
				rec, err := pot.Recover(ctx, g, pot.Gap{Top: f.nodes[top], TopRef: f.refs[top], Missed: missed,
					Anchor: &pot.Anchor{Key: f.keys[w], Ref: f.refs[w]}}, 64)
				if err != nil || len(rec.Elements) != missed {
					b.Fatal(len(rec.Elements), err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(g.n)/float64(b.N*missed), "retrievals/update")
			b.ReportMetric(float64(b.N*missed)/b.Elapsed().Seconds(), "updates/s")
		})
	}
}

// BenchmarkHistory is a late joiner reading the whole history from the
// latest update: every node retrieved once, (n−1)/n retrievals per element.
func BenchmarkHistory(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			f := build(b, n, timestamps, 3)
			g := count(f.store)
			ctx := context.Background()
			top, ref := f.top(n - 1)
			b.ResetTimer()
			for range b.N {
				c := pot.Ascend(g, top, ref, 0)
				k := 0
				for {
					_, err := c.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					k++
				}
				if k != n {
					b.Fatal(k)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(g.n)/float64(b.N*n), "retrievals/element")
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "elements/s")
		})
	}
}

// BenchmarkSeek is a seek to a random time: retrievals per seek against
// log₂ n.
func BenchmarkSeek(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprint("n=", n), func(b *testing.B) {
			f := build(b, n, timestamps, 4)
			r := rand.New(rand.NewPCG(5, 5))
			ctx := context.Background()
			top, ref := f.top(n - 1)
			total := 0
			b.ResetTimer()
			for range b.N {
				k := f.keys[0] + uint64(r.Int64N(int64(f.keys[n-1]-f.keys[0])))
				_, got, err := pot.Seek(ctx, f.store, top, ref, k)
				if err != nil {
					b.Fatal(err)
				}
				total += got
			}
			b.ReportMetric(float64(total)/float64(b.N), "retrievals/seek")
		})
	}
}

// BenchmarkRecoverLatency is a recovery of 64 missed updates over a
// storage that answers each retrieval after a simulated round trip of 2 ms
// (a network's latency, not synchronisation): retrieved ahead (the anchor
// known) against one node at a time (no anchor, not from the start), in
// round trips per recovery.
func BenchmarkRecoverLatency(b *testing.B) {
	const rtt = 2 * time.Millisecond
	const missed = 64
	f := build(b, 4096, timestamps, 6)
	slow := storage.GetterFunc(func(ctx context.Context, a swarm.Address) (swarm.Chunk, error) {
		t := time.NewTimer(rtt)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return f.store.Get(ctx, a)
	})
	for _, ahead := range []bool{true, false} {
		b.Run(fmt.Sprint("ahead=", ahead), func(b *testing.B) {
			ctx := context.Background()
			for i := range b.N {
				top := 4095 - i%(4096-missed-1)
				w := top - missed - 1
				gap := pot.Gap{Top: f.nodes[top], TopRef: f.refs[top], Missed: missed}
				if ahead {
					gap.Anchor = &pot.Anchor{Key: f.keys[w], Ref: f.refs[w]}
				}
				rec, err := pot.Recover(ctx, slow, gap, 64)
				if err != nil || len(rec.Elements) != missed {
					b.Fatal(len(rec.Elements), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(rtt), "rtts/recovery")
		})
	}
}
