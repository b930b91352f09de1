// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestProbePoolWakesWhatItCanServe: a round's close wakes the oldest joins
// held, one per candidate it pooled and one for its probe slot, not the
// whole crowd; a join that stopped waiting is skipped, and the queue sheds
// the entries of those that left.
func TestProbePoolWakesWhatItCanServe(t *testing.T) {
	t.Parallel()
	var p probePool
	ws := make([]*poolWaiter, 10)
	for i := range ws {
		ws[i] = p.wait()
	}
	woken := func() (n []int) {
		for i, w := range ws {
			select {
			case <-w.woken:
				n = append(n, i)
			default:
			}
		}
		return n
	}
	p.leave(ws[1]) // stopped waiting: skipped
	until := time.Now().Add(time.Minute)
	p.add([]found{{from: &member{}, c: &pb.Candidate{Overlay: bytes.Repeat([]byte{1}, 32), Depth: 2}},
		{from: &member{}, c: &pb.Candidate{Overlay: bytes.Repeat([]byte{2}, 32), Depth: 2}}}, until)
	if got := woken(); len(got) != 3 || got[0] != 0 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("woken %v, want the three oldest still waiting: [0 2 3]", got)
	}
	p.add(nil, until) // two still pooled, and the slot: three more
	if got := woken(); len(got) != 6 || got[5] != 6 {
		t.Fatalf("woken %v, want [0 2 3 4 5 6]", got)
	}
	for _, w := range ws {
		p.leave(w)
	}
	if len(p.waiting) > 3 {
		t.Fatalf("%d entries queued after every join left, want at most 3", len(p.waiting))
	}
	p.wake(5)
	if len(p.waiting) != 0 || p.gone != 0 {
		t.Fatalf("queue %d, gone %d after waking past its end; want empty", len(p.waiting), p.gone)
	}
}
