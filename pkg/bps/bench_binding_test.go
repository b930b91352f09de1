// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build unix

package bps_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// bindingFixture is a publication valid in a cohort, with the stream it is
// valid on (its declared address and challenge) and the chunk bee's
// soc.Valid checks for it: the floor.
type bindingFixture struct {
	sp        *bps.Spec
	msg       *pb.Broadcast
	owner     []byte
	challenge []byte
	ch        swarm.Chunk
}

// bindingFixtures is a publication valid in a cohort of each SWIP-60
// binding under implicit authorship (the binding's own SOC), and under
// explicit authorship and ALL, where every chunk is a session-feed chunk
// under the stream's challenge whatever the binding (SWIP-74 Rev 8).
func bindingFixtures(b *testing.B) map[string]bindingFixture {
	b.Helper()
	k := newKey(b)
	payload := bytes.Repeat([]byte{7}, 1024)
	challenge := topicOf("binding-bench challenge")
	out := map[string]bindingFixture{}
	add := func(name string, c *pb.CohortSpec, m *pb.Broadcast) {
		sp, err := bps.NewSpec(c)
		if err != nil {
			b.Fatalf("%s spec: %v", name, err)
		}
		ch := challenge
		if sp.Implicit() {
			ch = nil
		}
		if err := sp.Verify(m, k.addr, ch); err != nil {
			b.Fatalf("%s fixture: %v", name, err)
		}
		addr, err := soc.FromChunk(swarm.NewChunk(swarm.ZeroAddress, m.Soc))
		if err != nil {
			b.Fatal(err)
		}
		a, err := addr.Address()
		if err != nil {
			b.Fatal(err)
		}
		out[name] = bindingFixture{sp, m, k.addr, ch, swarm.NewChunk(a, m.Soc)}
	}
	implicit := func(id []byte) *pb.Broadcast {
		data, _, err := bps.SignSOC(k.signer, k.addr, id, payload)
		if err != nil {
			b.Fatal(err)
		}
		return &pb.Broadcast{Soc: data, Kind: pb.Kind_DATA}
	}
	session := func(c *pb.CohortSpec) *pb.Broadcast {
		sp, err := bps.NewSpec(c)
		if err != nil {
			b.Fatal(err)
		}
		return chunk(b, k, sp, pb.Kind_DATA, challenge, 0, payload)
	}

	id := topicOf("binding-bench")
	anchor := implicit(id)
	anchorAddr, err := soc.CreateAddress(id, k.addr)
	if err != nil {
		b.Fatal(err)
	}
	add("anchor", &pb.CohortSpec{Topic: anchorAddr.Bytes(), Binding: pb.TopicBinding_ANCHOR}, anchor)
	add("mnemonic", &pb.CohortSpec{Topic: topicOf("m"), Binding: pb.TopicBinding_MNEMONIC}, implicit(id))
	feed := &pb.CohortSpec{Topic: id, Binding: pb.TopicBinding_FEED_TOPIC, Admin: k.addr}
	add("feed_topic (explicit: the session feed)", feed, session(feed))
	all := &pb.CohortSpec{Topic: id, Binding: pb.TopicBinding_MNEMONIC, Admin: k.addr, Publishers: pb.PublisherRegime_ALL}
	add("all (the session feed)", all, session(all))
	implicitFeed := &pb.CohortSpec{Topic: id, Binding: pb.TopicBinding_FEED_TOPIC}
	add("feed_topic (implicit)", implicitFeed, chunk(b, k, specOfB(b, implicitFeed), pb.Kind_DATA, nil, 0, payload))
	return out
}

// specOfB is c's Spec.
func specOfB(b *testing.B, c *pb.CohortSpec) *bps.Spec {
	b.Helper()
	sp, err := bps.NewSpec(c)
	if err != nil {
		b.Fatal(err)
	}
	return sp
}

// BenchmarkValidateBinding: validation per binding (Spec.Verify: the
// binding's shape, the signature, the owner) against bee's soc.Valid on the
// same chunk, paired in one loop.
func BenchmarkValidateBinding(b *testing.B) {
	for name, f := range bindingFixtures(b) {
		b.Run("binding="+name, func(b *testing.B) {
			paired(b, func() { _ = f.sp.Verify(f.msg, f.owner, f.challenge) }, func() { soc.Valid(f.ch) })
		})
	}
}

// BenchmarkDedupWindowMemory: the heap a cohort's dedup window holds at its
// bound (DefaultDedupWindow chunk identifiers), per window.
func BenchmarkDedupWindowMemory(b *testing.B) {
	const windows = 200
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		keep := make([]any, windows)
		for i := range keep {
			keep[i] = bps.FullWindow(bps.DefaultDedupWindow)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/windows, "bytes/window")
		runtime.KeepAlive(keep)
	}
}
