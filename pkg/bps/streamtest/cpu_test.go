// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// flatCPU charges every write w to its writer and r to its reader; a write
// starting with "x" costs its reader nothing.
type flatCPU struct{ w, r time.Duration }

func (c flatCPU) WriteCost([]byte) time.Duration { return c.w }
func (c flatCPU) ReadCost(p []byte) time.Duration {
	if strings.HasPrefix(string(p), "x") {
		return 0
	}
	return c.r
}

// A node's processor serves one charge at a time: writes leave one write
// cost apart, and a reader takes them in one read cost apart, on top of the
// link's latency; two streams to the same reader share its processor.
func TestCPU(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const (
			latency = 10 * time.Millisecond
			w, r    = time.Millisecond, 3 * time.Millisecond
		)
		n := newNetwork(t, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: latency}),
			streamtest.WithCPU(func(swarm.Address) streamtest.CPU { return flatCPU{w: w, r: r} }))
		a, b, c := n.NewNode(), n.NewNode(), n.NewNode()
		type read struct {
			data string
			at   time.Time
		}
		got := make(chan read, 16)
		addHandler(t, c, func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			buf := make([]byte, 64)
			for {
				k, err := s.Read(buf)
				if err != nil {
					return s.Close()
				}
				got <- read{string(buf[:k]), time.Now()}
			}
		})
		connect(t, n, a, c)
		connect(t, n, b, c)
		sa, sb := newStream(t, a, c), newStream(t, b, c)
		start := time.Now()
		for _, wr := range []struct {
			s    p2p.Stream
			data string
		}{{sa, "a1"}, {sa, "a2"}, {sb, "b1"}} {
			if _, err := wr.s.Write([]byte(wr.data)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := sa.Write([]byte("x3")); err != nil {
			t.Fatal(err)
		}
		at := map[string]time.Duration{}
		for range 4 {
			rd := <-got
			at[rd.data] = rd.at.Sub(start)
		}
		// a1 leaves a at 1 ms, a2 at 2 ms, b1 leaves b at 1 ms; a1 and b1
		// reach c at 11 ms and are taken in one after the other, by 14 and
		// 17 ms (in either order), a2 behind them by 20 ms; x3 costs its
		// reader nothing: written at 20 ms, it leaves at 21 and is read at
		// 31.
		first, second := min(at["a1"], at["b1"]), max(at["a1"], at["b1"])
		if first != latency+w+r || second != latency+w+2*r || at["a2"] != latency+w+3*r || at["x3"] != 20*time.Millisecond+w+latency {
			t.Fatalf("read at %v", at)
		}
		if busy := c.Busy().Sub(start); busy != at["x3"] { // x3 went through it, at no cost
			t.Fatalf("c's processor busy until %s", busy)
		}
		_ = sa.Close()
		_ = sb.Close()
	})
}

// Jitter delays each write by up to its bound, the same for the same seed
// and bytes, and never reorders a stream.
func TestJitter(t *testing.T) {
	t.Parallel()
	run := func(seed int64) []time.Duration {
		var out []time.Duration
		synctest.Test(t, func(t *testing.T) {
			const latency, jitter = 10 * time.Millisecond, 5 * time.Millisecond
			n := newNetwork(t, streamtest.WithSeed(seed), streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: latency, Jitter: jitter}))
			a, b := n.NewNode(), n.NewNode()
			got := make(chan time.Time, 64)
			addHandler(t, b, func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
				buf := make([]byte, 1)
				for {
					if _, err := s.Read(buf); err != nil {
						return s.Close()
					}
					got <- time.Now()
				}
			})
			connect(t, n, a, b)
			s := newStream(t, a, b)
			var sent []time.Time
			for i := range 20 {
				sent = append(sent, time.Now())
				if _, err := s.Write([]byte{byte(i)}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
			var last time.Time
			for i := range 20 {
				at := <-got
				d := at.Sub(sent[i])
				if d < latency || at.Before(last) || (d >= latency+jitter && !at.Equal(last)) {
					t.Fatalf("write %d read after %s (previous at %s)", i, d, last)
				}
				last = at
				out = append(out, d)
			}
			_ = s.Close()
		})
		return out
	}
	one, two, other := run(3), run(3), run(4)
	if !slices.Equal(one, two) {
		t.Fatalf("same seed, different delays:\n%v\n%v", one, two)
	}
	if slices.Equal(one, other) || slices.Max(one) == slices.Min(one) {
		t.Fatalf("jitter does not vary: %v, %v", one, other)
	}
}
