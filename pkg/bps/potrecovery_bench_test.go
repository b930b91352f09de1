// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"fmt"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// BenchmarkPotRecovery is BenchmarkRecovery with the pot profile: a gap of
// RecoverMax updates recovered by descent from the update that revealed it
// (an in-memory storage, no network latency) — one retrieval and one hash
// check per recovered update, no signature recovery, the anchor check
// included.
func BenchmarkPotRecovery(b *testing.B) {
	const n = bps.DefaultRecoverMax
	net := streamtest.New()
	defer net.Close()
	nd := net.NewNode()
	svc, err := bps.New(nd, nd.Overlay(), bps.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer svc.Close()
	st := newMemStorage()
	x := bps.NewMux(svc, bps.MuxOptions{Storage: st})
	defer x.Close()
	admin := newKey(b)
	sp, err := bps.NewFeedSpec(topicOf("bench-pot-recovery"), admin.addr)
	if err != nil {
		b.Fatal(err)
	}
	r, err := x.Room(swarm.RandAddress(b), sp)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Release()
	total := (b.N + 1) * (n + 1)
	f := potUpdates(b, admin, sp, make([]string, total))
	for i := range total {
		f.store(b, st, sp, i, false)
	}
	s := newPotSession()
	r.Add(s, bps.MemberOptions{}, true)
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

// BenchmarkPotPublish is the publisher's CPU per update of the pot
// profile: PotNext and signing the update (bps.FeedUpdate), against
// signing alone, for a payload of the same size.
func BenchmarkPotPublish(b *testing.B) {
	admin := newKey(b)
	sp, err := bps.NewFeedSpec(topicOf("bench-pot-publish"), admin.addr)
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 1024)
	for _, profile := range []bool{false, true} {
		b.Run(fmt.Sprint("pot=", profile), func(b *testing.B) {
			var prev []byte
			payload := make([]byte, 1024+17+32*8) // the size of a node with 8 forks
			b.ReportAllocs()
			for i := range b.N {
				if profile {
					if prev, err = bps.PotNext(prev, uint64(1_780_000_000_000+1000*i), value); err != nil {
						b.Fatal(err)
					}
					payload = prev
				}
				if _, err := bps.FeedUpdate(admin.signer, sp.Topic, uint64(i), payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPotCheck is what the anchor check costs a pot-profile session
// per in-sequence update (bps.PotCheck against the update before it: one
// BMT hash, no retrieval), for a 1 KiB value.
func BenchmarkPotCheck(b *testing.B) {
	value := make([]byte, 1024)
	prev, err := bps.PotNext(nil, 1_780_000_000_000, value)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 { // a pot with forks
		if prev, err = bps.PotNext(prev, uint64(1_780_000_001_000+1000*i), value); err != nil {
			b.Fatal(err)
		}
	}
	next, err := bps.PotNext(prev, 1_780_002_000_000, value)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for range b.N {
		if err := bps.PotCheck(prev, next); err != nil {
			b.Fatal(err)
		}
	}
}
