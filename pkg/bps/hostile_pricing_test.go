// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"context"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protodelim"
)

// billingParent is a hostile root that answers a Join OK, writes raw, and
// then holds the stream open until the joiner ends it.
func billingParent(t *testing.T, net *streamtest.Network, raw []byte) *streamtest.Node {
	t.Helper()
	evil := net.NewNode()
	if err := evil.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(ctx context.Context, _ p2p.Peer, s p2p.Stream) error {
			if err := protodelim.UnmarshalFrom(newByteReader(s), new(pb.Join)); err != nil {
				return err
			}
			if _, err := s.Write(append(bps.EncodeFrame(&pb.Ack{Status: pb.Status_OK}), raw...)); err != nil {
				return err
			}
			_, _ = s.Read(make([]byte, 1)) // until the joiner ends the stream
			return s.Reset()
		}}}}); err != nil {
		t.Fatal(err)
	}
	return evil
}

// TestHostileParentBillsDuplicates: a parent that sends one update, then
// 1,000 copies of it on the same stream, then a second update, is paid for
// two deliveries, not 1,002: the child charges a delivery it took, once
// per stream.
func TestHostileParentBillsDuplicates(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin := newKey(t)
	sp := feedSpec(t, "billed duplicates", admin)
	one := bps.EncodeFrame(update(t, admin, sp, 0, "zero"))
	var raw []byte
	for range 1001 {
		raw = append(raw, one...)
	}
	raw = append(raw, bps.EncodeFrame(update(t, admin, sp, 1, "one"))...)
	evil := billingParent(t, net, raw)
	acc := newLedger()
	child := pricedNode(t, net, bps.Options{}, acc, testPrices)
	if err := net.Connect(child.Node, evil); err != nil {
		t.Fatal(err)
	}
	sub, err := child.svc.Subscribe(ctxT(t), evil.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	for want := range uint64(2) {
		if d := recv(t, sub); d.Index != want {
			t.Fatalf("delivered index %d, want %d", d.Index, want)
		}
	}
	child.svc.Settle() // frames are read in order: the second update marks the copies read
	if got, want := acc.balance(evil.Overlay()), -2*int64(testPrices.Delivery); got != want {
		t.Fatalf("the child's balance with its parent is %d (%d deliveries), want %d", got, -got/int64(testPrices.Delivery), want)
	}
}

// TestHostileParentBillsGarbage: a parent that sends an invalid chunk after
// a valid one is cut — the stream reset, the parent blocklisted, the
// violation counted — and the child pays for the valid one only.
func TestHostileParentBillsGarbage(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin := newKey(t)
	sp := feedSpec(t, "billed garbage", admin)
	bad := update(t, admin, sp, 1, "tampered")
	bad.Data[len(bad.Data)-1] ^= 1
	raw := bps.EncodeFrame(update(t, admin, sp, 0, "zero"))
	for range 1000 {
		raw = append(raw, bps.EncodeFrame(bad)...)
	}
	evil := billingParent(t, net, raw)
	acc := newLedger()
	child := pricedNode(t, net, bps.Options{}, acc, testPrices)
	if err := net.Connect(child.Node, evil); err != nil {
		t.Fatal(err)
	}
	sub, err := child.svc.Subscribe(ctxT(t), evil.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	if d := recv(t, sub); d.Index != 0 {
		t.Fatalf("delivered index %d, want 0", d.Index)
	}
	if err := child.WaitBlocklisted(ctxT(t), evil.Overlay()); err != nil {
		t.Fatalf("the parent that sent an invalid chunk is not blocklisted: %v", err)
	}
	child.rec.wait(t, "the parent's violation", kind(bps.EventViolation))
	child.svc.Settle()
	if got, want := acc.balance(evil.Overlay()), -int64(testPrices.Delivery); got != want {
		t.Fatalf("the child's balance with its parent is %d (%d deliveries), want %d", got, -got/int64(testPrices.Delivery), want)
	}
}
