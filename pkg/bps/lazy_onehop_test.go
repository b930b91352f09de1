// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// The one-hop recorder's helpers (newOneHop, checkBlock, checkFrames) are
// in beestreamtest_test.go.

package bps_test

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"
)

// TestOneHopLazyNegotiation, on bee's stream recorder: a parent answers a
// Join's push only on an enveloped stream and only if it speaks lazy push;
// an ask for an announcement never made and a SetPush without a mode are
// violations (BlockPeerError); an ask on a stream that did not negotiate
// it is too.
func TestOneHopLazyNegotiation(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	feed := &pb.CohortSpec{Topic: topicOf("lazy negotiation"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	frame := func(f *pb.Frame) []byte { return bps.EncodeFrame(f) }
	ask := frame(&pb.Frame{Kind: &pb.Frame_Ask{Ask: &pb.Ask{Seqs: []uint64{0}}}})
	for _, tc := range []struct {
		name  string
		off   bool // the parent does not speak lazy push
		join  *pb.Join
		more  []byte
		push  pb.PushMode
		block bool
	}{
		{name: "lazy, spoken", join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true, Push: pb.PushMode_LAZY}, push: pb.PushMode_LAZY},
		{name: "eager, spoken", join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true, Push: pb.PushMode_EAGER}, push: pb.PushMode_EAGER},
		{name: "no envelope", join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Push: pb.PushMode_LAZY}},
		{name: "the parent does not speak it", off: true, join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true, Push: pb.PushMode_LAZY}},
		{name: "an unknown mode", join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true, Push: 7}},
		{name: "an ask for an announcement never made", join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true, Push: pb.PushMode_LAZY}, more: ask, push: pb.PushMode_LAZY, block: true},
		{name: "an ask without lazy push", off: true, join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true, Push: pb.PushMode_LAZY}, more: ask, block: true},
		{name: "set push without a mode", join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true, Push: pb.PushMode_EAGER},
			more: frame(&pb.Frame{Kind: &pb.Frame_SetPush{SetPush: &pb.SetPush{}}}), push: pb.PushMode_EAGER, block: true},
		{name: "set push eager from an announcement never made", join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true, Push: pb.PushMode_LAZY},
			more: frame(&pb.Frame{Kind: &pb.Frame_SetPush{SetPush: &pb.SetPush{Mode: pb.PushMode_EAGER, From: 5}}}), push: pb.PushMode_LAZY, block: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newOneHop(t, bps.Options{Tree: bps.Tree{NoLazyPush: tc.off}})
			s, ack := h.join(tc.join)
			if ack.Status != pb.Status_OK || ack.Push != tc.push {
				t.Fatalf("ack %v, want OK with push %s", ack, tc.push)
			}
			if tc.more != nil {
				if _, err := s.Write(tc.more); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.block {
				_ = s.Close()
			}
			recs := h.records()
			checkBlock(t, recs[0].Err(), tc.block)
			checkFrames(t, "in", recs[0].In(), append([]proto.Message{tc.join}, moreFrames(t, tc.more)...)...)
		})
	}
}

// moreFrames decodes b, enveloped frames, for checkFrames.
func moreFrames(t *testing.T, b []byte) []proto.Message {
	t.Helper()
	var out []proto.Message
	r := bufio.NewReader(bytes.NewReader(b))
	for {
		f := new(pb.Frame)
		if err := protodelim.UnmarshalFrom(r, f); err != nil {
			return out
		}
		out = append(out, f)
	}
}
