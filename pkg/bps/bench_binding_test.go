// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build unix && rev8todo

package bps_test

import (
	"bytes"
	"runtime"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// bindingFixture is a publication valid in a cohort of each SWIP-60 binding
// (implicit authorship where the binding allows it, the stream's address as
// the owner), with the chunk bee's soc.Valid checks for it: the floor.
func bindingFixtures(b *testing.B) map[string]struct {
	sp    *bps.Spec
	msg   *pb.Message
	owner []byte
	ch    swarm.Chunk
} {
	b.Helper()
	k := newKey(b)
	payload := bytes.Repeat([]byte{7}, 1024)
	mk := func(id []byte) *pb.Message {
		m, err := bps.SOCUpdate(k.signer, id, payload)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	chunk := func(m *pb.Message, id []byte) swarm.Chunk {
		data := bytes.Clone(m.Data)
		copy(data, id)
		return swarm.NewChunk(swarm.NewAddress(m.Address), data)
	}
	out := map[string]struct {
		sp    *bps.Spec
		msg   *pb.Message
		owner []byte
		ch    swarm.Chunk
	}{}
	add := func(name string, c *pb.CohortSpec, m *pb.Message, id []byte) {
		sp := specOf(b, c)
		if err := sp.Verify(m, k.addr); err != nil {
			b.Fatalf("%s fixture: %v", name, err)
		}
		out[name] = struct {
			sp    *bps.Spec
			msg   *pb.Message
			owner []byte
			ch    swarm.Chunk
		}{sp, m, k.addr, chunk(m, id)}
	}

	id := topicOf("binding-bench")
	anchor := mk(id)
	add("anchor", &pb.CohortSpec{Topic: anchor.Address, Binding: pb.TopicBinding_ANCHOR}, anchor, id)
	add("mnemonic", &pb.CohortSpec{Topic: topicOf("m"), Binding: pb.TopicBinding_MNEMONIC}, mk(id), id)
	add("soc_id (explicit)", &pb.CohortSpec{Topic: id, Binding: pb.TopicBinding_SOC_ID, Admin: k.addr}, mk(id), id)
	ownerTopic, _ := crypto.LegacyKeccak256(k.addr)
	add("owner (explicit)", &pb.CohortSpec{Topic: ownerTopic, Binding: pb.TopicBinding_OWNER, Admin: k.addr}, mk(id), id)
	feed, err := bps.FeedUpdate(k.signer, id, 0, payload)
	if err != nil {
		b.Fatal(err)
	}
	add("feed_topic", &pb.CohortSpec{Topic: id, Binding: pb.TopicBinding_FEED_TOPIC, Admin: k.addr}, feed, bps.FeedID(id, 0))
	return out
}

// BenchmarkValidateBinding: validation per binding (Spec.Verify: the
// binding's shape, the signature, the owner) against bee's soc.Valid on the
// same chunk, paired in one loop.
func BenchmarkValidateBinding(b *testing.B) {
	for name, f := range bindingFixtures(b) {
		b.Run("binding="+name, func(b *testing.B) {
			paired(b, func() { _ = f.sp.Verify(f.msg, f.owner) }, func() { soc.Valid(f.ch) })
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
