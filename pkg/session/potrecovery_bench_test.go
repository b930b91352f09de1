// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session_test

import (
	"testing"

	"github.com/ethersphere/bps/pkg/session"
)

// BenchmarkPotRecovery is BenchmarkRecovery with the pot profile: a gap of
// RecoverMax updates recovered by descent from the update that revealed it
// (an in-memory storage, no network latency) — one retrieval and one hash
// check per recovered update, no signature recovery, the anchor check
// included.
func BenchmarkPotRecovery(b *testing.B) {
	const n = session.DefaultRecoverMax
	r, st, admin, sp := benchRoom(b, "bench-pot-recovery")
	total := (b.N + 1) * (n + 1)
	f := potUpdates(b, admin, sp, make([]string, total))
	for i := range total {
		f.store(b, st, sp, i, false)
	}
	s := newPotSession()
	r.Add(s, session.MemberOptions{}, true)
	deliverPot(r, admin, f, 0)
	<-s.moved
	b.ResetTimer()
	for i := range b.N {
		live := (i + 1) * (n + 1) // n missed before it
		deliverPot(r, admin, f, live)
		for range n + 2 { // the recovered frame, n updates, the live one
			<-s.moved
		}
	}
	b.StopTimer()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.equivs) > 0 {
		b.Fatal(s.equivs[0])
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "updates/s")
	b.ReportMetric(float64(st.fetched())/float64(b.N*n), "retrievals/update")
}
