// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"context"
	"testing"
	"time"

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
			if _, err := s.Write(append(bps.EncodeFrame(&pb.Ack{Status: pb.Status_OK, Challenge: make([]byte, 32)}), raw...)); err != nil {
				return err
			}
			_, _ = s.Read(make([]byte, 1)) // until the joiner ends the stream
			return s.Reset()
		}}}}); err != nil {
		t.Fatal(err)
	}
	return evil
}

// subscribeBilled is a priced child subscribed to sp at a billingParent
// that writes raw; the subscription is closed when the test ends.
func subscribeBilled(t *testing.T, net *streamtest.Network, sp *bps.Spec, raw []byte) (child *tnode, evil *streamtest.Node, acc *ledger, sub *bps.Subscription) {
	t.Helper()
	evil = billingParent(t, net, raw)
	acc = newLedger()
	child = pricedNode(t, net, bps.Options{}, acc, testPrices)
	if err := net.Connect(child.Node, evil); err != nil {
		t.Fatal(err)
	}
	sub, err := child.svc.Subscribe(ctxT(t), evil.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return child, evil, acc, sub
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
	ch := make([]byte, 32) // the parent's stream's: a receiver compares it with nothing (Rev 8)
	one := bps.EncodeFrame(update(t, admin, sp, ch, 0, "zero"))
	var raw []byte
	for range 1001 {
		raw = append(raw, one...)
	}
	raw = append(raw, bps.EncodeFrame(update(t, admin, sp, ch, 1, "one"))...)
	child, evil, acc, sub := subscribeBilled(t, net, sp, raw)
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
// a valid one is cut (a delivery that does not validate ends the parent
// stream; docs/protocol.md, "Receivers") — the stream reset, the parent blocklisted, the
// violation counted — and the child pays for the valid one only.
func TestHostileParentBillsGarbage(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin := newKey(t)
	sp := feedSpec(t, "billed garbage", admin)
	ch := make([]byte, 32)
	// Invalid on Rev 8: its id is not the one the frame's kind, challenge
	// and index derive. (A tampered payload is not invalid at a receiver,
	// which recovers the owner: it reads as another key's chunk, an owner
	// not admitted — docs/protocol.md, "Receivers".)
	bad := update(t, admin, sp, ch, 1, "tampered")
	bad.Soc[0] ^= 1
	raw := bps.EncodeFrame(update(t, admin, sp, ch, 0, "zero"))
	for range 1000 {
		raw = append(raw, bps.EncodeFrame(bad)...)
	}
	child, evil, acc, sub := subscribeBilled(t, net, sp, raw)
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

// TestPricingCutAtTheDeliveryPastTheLimit: a child that cannot pay is cut
// at the delivery that took its debt past the limit, however the parent's
// writer batched: a lagging child whose stream queued 20 deliveries is
// charged 5 at a limit of 5, not the batch it was written in.
func TestPricingCutAtTheDeliveryPastTheLimit(t *testing.T) {
	t.Parallel()
	net := newNetwork(t, streamtest.WithBufferSize(64))
	acc := newLedger()
	const limit = 5
	acc.disconnect = limit * 7
	prices := bps.Prices{Delivery: 7}
	broker := settledNode(t, net, bps.Options{}, acc, prices, bps.Settlement{Credit: 7, Interval: time.Hour, Margin: -1})
	kid, pubNode := newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})
	for _, n := range []*tnode{kid, pubNode} {
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	admin := newKey(t)
	sp := feedSpec(t, "cut at the limit", admin)
	child := openRaw(t, kid, broker)
	if a := child.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress}); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	p := publish(t, pubNode, broker, sp, admin, 0)
	const n = 20
	for i := range uint64(n) {
		if err := p.PublishUpdate(ctxT(t), i, []byte("update")); err != nil {
			t.Fatal(err)
		}
	}
	broker.rec.waitN(t, n, "the updates accepted", kind(bps.EventAccept))
	got := 0
	for ; got < n; got++ { // the child reads only now: its stream's queue holds what its writer could not write
		if child.read(new(pb.Broadcast)) != nil {
			break
		}
	}
	_ = child.s.Reset()
	acc.waitBalance(t, "broker", kid.Overlay(), limit*7)
	if got > limit {
		t.Fatalf("the child read %d deliveries, charged %d", got, limit)
	}
}
