// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// replayedBefore joins r listening over the envelope asking a replay of ms,
// has p publish update marker, and returns the indexes of the updates r
// was sent before it (its replay), in order.
func replayedBefore(t *testing.T, r *raw, sp *bps.Spec, p *bps.Publisher, admin key, ms uint32, marker uint64) []uint64 {
	t.Helper()
	if ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Listen: true, Multihop: true, ReplayMs: ms}); ack.Status != pb.Status_OK {
		t.Fatalf("ack %v", ack)
	}
	if err := p.Send(ctxT(t), update(t, admin, sp, p.Challenge(), marker, "marker")); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for {
		b := readEnvelope(t, r).GetBroadcast()
		if b == nil || b.Kind != pb.Kind_DATA {
			continue
		}
		if b.Index == marker {
			return got
		}
		got = append(got, b.Index)
	}
}

// TestHostileReplayBounded: a child may ask, at every join, for the
// deliveries its parent made lately (Join.replay_ms, a repair's), and ask
// for as much as the field holds; what it is sent is bounded all the same —
// at most the 128 deliveries a node keeps (of the 160 made), the newest,
// queued beside its stream's queue, and nothing older than 10 s whatever
// it asked — so that a child
// joining again and again costs its parent no more than the cohort's
// latest frames each time (docs/protocol.md, "Threat model").
func TestHostileReplayBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, broker, cl := cluster(t, bps.Options{Timing: bps.Timing{Inactivity: time.Hour}}, 3)
		admin := newKey(t)
		sp := feedSpec(t, "replay bounded", admin)
		sub := subscribe(t, cl[1], broker, sp)
		p := publish(t, cl[0], broker, sp, admin, 0)
		const sent, most = 160, 128 // replay.go's replayFrames
		// In batches of 32, each taken before the next is sent: the
		// subscriber's stream queues 64 (a burst past it is a queue reset).
		for from := uint64(0); from < sent; from += 32 {
			for i := from; i < from+32; i++ {
				if err := p.Send(ctxT(t), update(t, admin, sp, p.Challenge(), i, "kept")); err != nil {
					t.Fatal(err)
				}
			}
			expectUpdates(t, sub, from, from+32)
		}

		got := replayedBefore(t, openRaw(t, cl[2], broker), sp, p, admin, 10_000, sent)
		if len(got) != most || got[0] != sent-most || got[len(got)-1] != sent-1 {
			t.Fatalf("replayed %d updates (%v), want the newest %d of the %d sent", len(got), got, most, sent)
		}

		time.Sleep(11 * time.Second) // every kept delivery now older than a replay may reach
		got = replayedBefore(t, openRaw(t, cl[2], broker), sp, p, admin, 1<<32-1, sent+1)
		if len(got) != 0 {
			t.Fatalf("a replay asked for %d ms was sent %d updates older than 10 s: %v", uint32(1<<32-1), len(got), got)
		}
	})
}
