// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bufio"
	"bytes"
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protodelim"
)

// FuzzVerify feeds arbitrary Broadcasts to the validation of every
// binding, as a broker checks a stream's frame (its declared address and
// challenge) and as a receiver does (nothing to compare): whatever the
// bytes, it answers and never panics.
func FuzzVerify(f *testing.F) {
	k := newKey(f)
	feed := feedSpec(f, "fuzz", k)
	ch := keccak([]byte("fuzz challenge"))
	for _, b := range []*pb.Broadcast{
		update(f, k, feed, ch, 3, "seed"),
		auth(f, k, feed, ch),
		roster(f, k, feed, ch, 1, k.addr),
		eos(f, k, feed, ch),
	} {
		f.Add(b.Soc, int32(b.Kind), b.Challenge, b.Index, uint8(0))
	}
	f.Add([]byte{}, int32(0), []byte{}, uint64(0), uint8(2))
	f.Add(make([]byte, 105), int32(2), make([]byte, 32), ^uint64(0), uint8(3))
	f.Add(make([]byte, 105), int32(9), make([]byte, 31), uint64(1), uint8(4))

	topic := topicOf("fuzz")
	specs := []*bps.Spec{feed}
	for _, c := range []*pb.CohortSpec{
		{Topic: topic, Binding: pb.TopicBinding_ANCHOR},
		{Topic: topic, Binding: pb.TopicBinding_SOC_ID},
		{Topic: topic, Binding: pb.TopicBinding_OWNER},
		{Topic: topic, Binding: pb.TopicBinding_MNEMONIC, Admin: k.addr, Publishers: pb.PublisherRegime_ALL},
		{Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC},
		{Topic: topic, Binding: pb.TopicBinding_ANCHOR, Admin: k.addr, Closed: true},
	} {
		specs = append(specs, specOf(f, c))
	}
	f.Fuzz(func(t *testing.T, soc []byte, kind int32, challenge []byte, index uint64, which uint8) {
		sp := specs[int(which)%len(specs)]
		b := &pb.Broadcast{Soc: soc, Kind: pb.Kind(kind), Challenge: challenge, Index: index}
		_ = sp.Verify(b, k.addr, ch)
		_ = sp.Verify(b, k.addr, challenge)
	})
}

// FuzzBrokerStream writes arbitrary bytes on a fresh stream to a broker —
// a Join or garbage, then whatever follows — and closes: the broker answers
// or resets, never panics, and still serves a well-behaved subscriber.
func FuzzBrokerStream(f *testing.F) {
	k := newKey(f)
	sp := feedSpec(f, "fuzz-broker", k)
	join := bps.EncodeFrame(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress})
	declared := bps.EncodeFrame(&pb.Join{Cohort: sp.PB(), Addr: k.addr})
	ch := make([]byte, 32) // not the stream's: a frame under it is dropped, wrong_challenge
	f.Add(join)
	f.Add(bps.EncodeFrame(&pb.Join{Cohort: sp.PB()}))
	f.Add(append(append([]byte{}, declared...), bps.EncodeFrame(update(f, k, sp, ch, 0, "x"))...))
	f.Add(append(append([]byte{}, declared...), bps.EncodeFrame(&pb.Broadcast{Kind: pb.Kind_AUTH, Challenge: ch})...))
	f.Add(append(append([]byte{}, join...), bps.EncodeFrame(auth(f, k, sp, ch))...))
	f.Add(append(append([]byte{}, join...), 0x05, 0x0a, 0x03, 0x01, 0x02, 0x03))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})

	net, broker := fuzzBroker(f, bps.Options{Timing: bps.Timing{HandshakeTimeout: time.Second}})
	f.Fuzz(func(t *testing.T, b []byte) {
		writeAndLeave(t, net, broker, b)
		// Nobody else lost anything: a fresh subscriber still joins.
		subscribeAfterFuzz(t, net, broker, sp)
	})
}

// fuzzBroker is a broker with options o on an in-memory network, both
// closed when f ends.
func fuzzBroker(f *testing.F, o bps.Options) (*streamtest.Network, *streamtest.Node) {
	net := streamtest.New()
	broker := net.NewNode()
	svc, err := bps.New(broker, broker.Overlay(), o)
	if err != nil {
		f.Fatal(err)
	}
	if err := broker.AddProtocol(svc.Protocol()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() {
		_ = svc.Close()
		_ = net.Close()
	})
	return net, broker
}

// writeAndLeave opens a stream from a fresh node to broker, writes b,
// closes, resets and disconnects.
func writeAndLeave(t *testing.T, net *streamtest.Network, broker *streamtest.Node, b []byte) {
	t.Helper()
	c := net.NewNode()
	if err := net.Connect(c, broker); err != nil {
		t.Fatal(err)
	}
	s, err := c.NewStream(context.Background(), broker.Overlay(), nil, bps.ProtocolName, bps.ProtocolVersion, bps.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Write(b)
	_ = s.Close()
	_ = s.Reset()
	net.Disconnect(c, broker)
}

// FuzzEnvelopeUp: a child that joined over the multihop envelope, lazily
// fed, sends arbitrary bytes up — publications, claims, candidates, probes,
// reparents, asks, push modes or garbage, in any order: the node answers,
// drops or resets, never panics, and still serves a well-behaved
// subscriber.
func FuzzEnvelopeUp(f *testing.F) {
	k := newKey(f)
	sp := feedSpec(f, "fuzz-envelope-up", k)
	frame := func(fr *pb.Frame) []byte { return bps.EncodeFrame(fr) }
	ch := make([]byte, 32)
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: update(f, k, sp, ch, 0, "x")}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: auth(f, k, sp, ch)}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Lease{Lease: &pb.Lease{Nonce: 1, Addr: k.addr}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Route{Route: &pb.Route{Challenge: ch, Addr: k.addr}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Release{Release: &pb.Release{Challenges: [][]byte{ch}}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: 1, Candidates: []*pb.Candidate{{Overlay: make([]byte, 32)}}}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Probe{Probe: &pb.Probe{Depth: 1, Nonce: 2}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Reparent{Reparent: &pb.Reparent{To: make([]byte, 32)}}}))
	f.Add([]byte{0x02, 0x2a, 0x00})
	f.Add(append(frame(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: update(f, k, sp, ch, 0, "x")}}),
		frame(&pb.Frame{Kind: &pb.Frame_Ask{Ask: &pb.Ask{Seqs: []uint64{0, 0}}}})...))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Ask{Ask: &pb.Ask{Seqs: []uint64{1 << 40}}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_SetPush{SetPush: &pb.SetPush{Mode: pb.PushMode_EAGER}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_SetPush{SetPush: &pb.SetPush{Mode: 9}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Announce{Announce: &pb.Announce{Key: make([]byte, 32)}}}))

	net, broker := fuzzBroker(f, bps.Options{Timing: bps.Timing{HandshakeTimeout: time.Second}, Tree: bps.Tree{ProbeWait: 50 * time.Millisecond}})
	join := bps.EncodeFrame(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true, Push: pb.PushMode_LAZY})
	f.Fuzz(func(t *testing.T, b []byte) {
		writeAndLeave(t, net, broker, append(bytes.Clone(join), b...))
		subscribeAfterFuzz(t, net, broker, sp)
	})
}

// FuzzEnvelopeDown: a parent that accepted the node over the envelope,
// speaking lazy push, sends arbitrary bytes down — deliveries, probes,
// reparents, candidates, announcements or garbage: the node's subscription
// ends or goes on, the node never panics, and its Service still closes
// with every goroutine ended.
func FuzzEnvelopeDown(f *testing.F) {
	k := newKey(f)
	sp := feedSpec(f, "fuzz-envelope-down", k)
	frame := func(fr *pb.Frame) []byte { return bps.EncodeFrame(fr) }
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: update(f, k, sp, make([]byte, 32), 0, "x")}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: roster(f, k, sp, make([]byte, 32), 0)}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Leased{Leased: &pb.Leased{Nonce: 1, Challenge: make([]byte, 32)}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Probe{Probe: &pb.Probe{Depth: 1, Nonce: 2, Joiner: make([]byte, 32)}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Reparent{Reparent: &pb.Reparent{To: bytes.Repeat([]byte{1}, 32), Underlays: [][]byte{{1}}}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: 3}}}))
	f.Add([]byte{0x81, 0x40})
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Announce{Announce: &pb.Announce{Key: make([]byte, 32)}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Announce{Announce: &pb.Announce{Key: make([]byte, 31)}}}))
	f.Add(frame(&pb.Frame{Kind: &pb.Frame_Ask{Ask: &pb.Ask{Seqs: []uint64{0}}}}))

	var current atomic.Pointer[[]byte]
	net := streamtest.New()
	evil := net.NewNode()
	if err := evil.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			join := new(pb.Join)
			if err := protodelim.UnmarshalFrom(bufio.NewReader(s), join); err != nil {
				return err
			}
			out := bps.EncodeFrame(&pb.Ack{Status: pb.Status_OK, Multihop: true, Depth: 1, Push: join.Push})
			if b := current.Load(); b != nil {
				out = append(out, *b...)
			}
			_, _ = s.Write(out)
			return s.FullClose()
		}}}}); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = net.Close() })
	f.Fuzz(func(t *testing.T, b []byte) {
		current.Store(&b)
		node := net.NewNode()
		svc, err := bps.New(node, node.Overlay(), bps.Options{Timing: bps.Timing{HandshakeTimeout: time.Second}, Tree: bps.Tree{RelayCapacity: 2, ProbeWait: 50 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		if err := node.AddProtocol(svc.Protocol()); err != nil {
			t.Fatal(err)
		}
		if err := net.Connect(node, evil); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if sub, err := svc.Subscribe(ctx, evil.Overlay(), sp); err == nil {
			_ = sub.Close()
		}
		if err := svc.Close(); err != nil {
			t.Fatalf("close after the fuzzed parent: %v", err)
		}
		net.Disconnect(node, evil)
	})
}

// subscribeAfterFuzz checks that broker still takes a well-behaved
// subscriber of sp.
func subscribeAfterFuzz(t *testing.T, net *streamtest.Network, broker *streamtest.Node, sp *bps.Spec) {
	t.Helper()
	good := net.NewNode()
	if err := net.Connect(good, broker); err != nil {
		t.Fatal(err)
	}
	defer net.Disconnect(good, broker)
	gs, err := good.NewStream(context.Background(), broker.Overlay(), nil, bps.ProtocolName, bps.ProtocolVersion, bps.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gs.Reset() }()
	if _, err := gs.Write(bps.EncodeFrame(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress})); err != nil {
		t.Fatal(err)
	}
	ack := new(pb.Ack)
	if err := protodelim.UnmarshalFrom(bufio.NewReader(gs), ack); err != nil || ack.Status != pb.Status_OK {
		t.Fatalf("a subscriber after the fuzzed stream: %v %s", err, ack.Status)
	}
}
