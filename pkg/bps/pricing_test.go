// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	statestore "github.com/ethersphere/bee/v2/pkg/statestore/mock"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// ledger is a fake accounting.Interface with bee's sign convention (a
// positive balance: the peer owes this node) and bee's two limits: a debit
// that leaves a peer owing disconnect or more fails on Apply with bee's
// p2p.BlockPeerError(accounting.ErrDisconnectThresholdExceeded); a credit
// that would leave this node owing more than overdraft fails on
// PrepareCredit with accounting.ErrOverdraft. A peer in settled pays at
// once: its balance returns to 0 after every debit.
type ledger struct {
	disconnect int64 // 0: none
	overdraft  int64 // 0: none

	mu       sync.Mutex
	balances map[string]int64
	settled  map[string]bool
	gone     map[string]bool    // bee's accounting disconnected the peer: a charge fails
	deltas   map[string][]int64 // every change applied, by peer, in order
	notify   chan struct{}      // closed and replaced on every change
}

var _ accounting.Interface = (*ledger)(nil)

func newLedger() *ledger {
	return &ledger{balances: make(map[string]int64), settled: make(map[string]bool), gone: make(map[string]bool), deltas: make(map[string][]int64), notify: make(chan struct{})}
}

type ledgerAction struct {
	l     *ledger
	peer  swarm.Address
	delta int64
}

func (a *ledgerAction) Apply() error {
	l := a.l
	l.mu.Lock()
	defer l.mu.Unlock()
	k := a.peer.ByteString()
	b := l.balances[k] + a.delta
	l.balances[k] = b
	l.deltas[k] = append(l.deltas[k], a.delta)
	close(l.notify)
	l.notify = make(chan struct{})
	if a.delta > 0 && l.settled[k] {
		l.balances[k] = 0
		return nil
	}
	if a.delta > 0 && l.disconnect > 0 && b >= l.disconnect {
		return p2p.NewBlockPeerError(10*time.Second, accounting.ErrDisconnectThresholdExceeded)
	}
	return nil
}

func (*ledgerAction) Cleanup() {}

var errNotConnected = errors.New("connection not initialized yet") // bee's, for a peer it disconnected

func (l *ledger) PrepareDebit(_ context.Context, peer swarm.Address, price uint64) (accounting.Action, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone[peer.ByteString()] {
		return nil, errNotConnected
	}
	return &ledgerAction{l: l, peer: peer, delta: int64(price)}, nil
}

func (l *ledger) PrepareCredit(_ context.Context, peer swarm.Address, price uint64, _ bool) (accounting.Action, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gone[peer.ByteString()] {
		return nil, errNotConnected
	}
	if l.overdraft > 0 && -(l.balances[peer.ByteString()]-int64(price)) > l.overdraft {
		return nil, accounting.ErrOverdraft
	}
	return &ledgerAction{l: l, peer: peer, delta: -int64(price)}, nil
}

// balance is what peer owes this node (negative: what this node owes it).
func (l *ledger) balance(peer swarm.Address) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.balances[peer.ByteString()]
}

func (l *ledger) drop(peer swarm.Address) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone[peer.ByteString()] = true
}

func (l *ledger) settle(peer swarm.Address) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settled[peer.ByteString()] = true
}

// applied is every change applied with peer, in order.
func (l *ledger) applied(peer swarm.Address) []int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.deltas[peer.ByteString()])
}

// waitOwes waits until this node owes peer at least want.
func (l *ledger) waitOwes(t *testing.T, who string, peer swarm.Address, want int64) {
	t.Helper()
	if got, ok := l.waitFor(peer, func(b int64) bool { return -b >= want }); !ok {
		t.Fatalf("%s: owes %s %d, want at least %d", who, peer, -got, want)
	}
}

// waitFor waits until peer's balance satisfies ok and returns it; past
// waitTimeout, the last balance and false.
func (l *ledger) waitFor(peer swarm.Address, ok func(balance int64) bool) (int64, bool) {
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		l.mu.Lock()
		got, notify := l.balances[peer.ByteString()], l.notify
		l.mu.Unlock()
		if ok(got) {
			return got, true
		}
		select {
		case <-notify:
		case <-deadline.C:
			return got, false
		}
	}
}

// waitBalance waits until peer's balance is want.
func (l *ledger) waitBalance(t *testing.T, who string, peer swarm.Address, want int64) {
	t.Helper()
	if got, ok := l.waitFor(peer, func(b int64) bool { return b == want }); !ok {
		t.Fatalf("%s: balance of %s is %d, want %d", who, peer, got, want)
	}
}

func (*ledger) Balance(swarm.Address) (*big.Int, error)        { return nil, accounting.ErrPeerNoBalance }
func (*ledger) SurplusBalance(swarm.Address) (*big.Int, error) { return new(big.Int), nil }
func (*ledger) Balances() (map[string]*big.Int, error)         { return nil, nil }
func (l *ledger) CompensatedBalance(peer swarm.Address) (*big.Int, error) {
	return big.NewInt(l.balance(peer)), nil
}
func (*ledger) CompensatedBalances() (map[string]*big.Int, error) { return nil, nil }
func (*ledger) PeerAccounting() (map[string]accounting.PeerInfo, error) {
	return nil, nil
}

// pricedNode is newNode whose service charges prices on acc, settling
// every 50 ms, or every 64 frames; a child keeps no margin, so that both
// ends' ledgers move alike (the margin: pricing_refresh_test.go).
func pricedNode(t testing.TB, net *streamtest.Network, o bps.Options, acc accounting.Interface, p bps.Prices) *tnode {
	t.Helper()
	return settledNode(t, net, o, acc, p, bps.Settlement{Interval: 50 * time.Millisecond, Margin: -1})
}

// settledNode is pricedNode settling as st says.
func settledNode(t testing.TB, net *streamtest.Network, o bps.Options, acc accounting.Interface, p bps.Prices, st bps.Settlement) *tnode {
	t.Helper()
	nd := net.NewNode()
	rec := newRecorder()
	o.Tracer = rec
	o.Accounting, o.Prices, o.Settlement = acc, p, st
	svc, err := bps.New(nd, nd.Overlay(), o)
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.AddProtocol(svc.Protocol()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Errorf("close service: %v", err)
		}
	})
	return &tnode{Node: nd, svc: svc, rec: rec}
}

// TestPricingDeliveriesAndPublications: after n publications through a
// broker, each subscriber owes the broker n × Delivery and the publisher
// (at depth 1) n × Publish more than its own deliveries; both ends' ledgers
// agree, and Charges shows the same per peer.
func TestPricingDeliveriesAndPublications(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	ledgers := make(map[*tnode]*ledger)
	node := func() *tnode {
		l := newLedger()
		n := pricedNode(t, net, bps.Options{}, l, testPrices)
		ledgers[n] = l
		return n
	}
	broker, pubNode := node(), node()
	subs := []*tnode{node(), node()}
	for _, c := range append([]*tnode{pubNode}, subs...) {
		if err := net.Connect(c.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	admin := newKey(t)
	sp := feedSpec(t, "priced", admin)
	var ss []*bps.Subscription
	for _, c := range subs {
		ss = append(ss, subscribe(t, c, broker, sp))
	}
	p := publish(t, pubNode, broker, sp, admin, 0)
	const n = 5
	for i := range uint64(n) {
		if err := p.PublishUpdate(ctxT(t), i, fmt.Appendf(nil, "update %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range ss {
		for range n {
			recv(t, s)
		}
	}

	// Both ends count every frame as it passes and settle in batches (every
	// 50 ms here): the balances reach exactly the prices, the same at both
	// ends. A publisher stream receives the cohort's deliveries too:
	// whatever it got, both ends agree once it closed.
	for _, c := range subs {
		want := int64(n * testPrices.Delivery)
		ledgers[c].waitBalance(t, "subscriber", broker.Overlay(), -want)
		ledgers[broker].waitBalance(t, "broker", c.Overlay(), want)
	}
	pubOwes := int64((n + 1) * testPrices.Publish) // the updates and the AUTH that claimed the stream, a Broadcast up
	ledgers[broker].waitBalanceAtLeast(t, "broker", pubNode.Overlay(), pubOwes)
	for _, c := range subs {
		waitCharges(t, broker.svc, c.Overlay(), bps.PeerCharges{Debited: n * testPrices.Delivery, Streams: 1})
		waitCharges(t, c.svc, broker.Overlay(), bps.PeerCharges{Credited: n * testPrices.Delivery, Streams: 1})
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	got := ledgers[pubNode].balance(broker.Overlay()) // settled as its stream ended
	if got > -pubOwes || (-got-pubOwes)%int64(testPrices.Delivery) != 0 {
		t.Fatalf("publisher owes the broker %d, want %d for its publications and a whole number of deliveries", -got, pubOwes)
	}
	ledgers[broker].waitBalance(t, "broker", pubNode.Overlay(), -got)
	if got := broker.svc.Prices(); got != testPrices {
		t.Errorf("Prices() = %+v, want %+v", got, testPrices)
	}
}

// fakeParent answers every Join at nd as a parent at depth stated and then
// writes deliveries down the stream; it hands a publisher stream's reader
// to read, if not nil.
func fakeParent(t *testing.T, nd *streamtest.Node, stated uint32, deliveries []*pb.Broadcast, read func(r *raw)) {
	t.Helper()
	spec := p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion, StreamSpecs: []p2p.StreamSpec{{
		Name: bps.StreamName,
		Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			r := &raw{t: t, s: s, r: newByteReader(s)}
			join := new(pb.Join)
			if err := r.read(join); err != nil {
				return err
			}
			// Every stream gets a challenge (Rev 8): the zero one here.
			r.send(&pb.Ack{Status: pb.Status_OK, Depth: stated, Challenge: make([]byte, 32)})
			for _, m := range deliveries {
				r.send(m)
			}
			if read != nil && !join.Listen && !bytes.Equal(join.Addr, bps.ZeroAddress) {
				read(r)
			}
			_ = r.expectEnd()
			return s.FullClose()
		},
	}}}
	if err := nd.AddProtocol(spec); err != nil {
		t.Fatal(err)
	}
}

// waitBalanceAtLeast waits until peer owes at least want.
func (l *ledger) waitBalanceAtLeast(t *testing.T, who string, peer swarm.Address, want int64) {
	t.Helper()
	if got, ok := l.waitFor(peer, func(b int64) bool { return b >= want }); !ok {
		t.Fatalf("%s: balance of %s is %d, want at least %d", who, peer, got, want)
	}
}

// waitCharges waits until svc's charges with peer are want. A meter
// counts a charge in Charges just after bee's accounting applied it, with
// no event between the two: this polls, within waitTimeout.
func waitCharges(t *testing.T, svc *bps.Service, peer swarm.Address, want bps.PeerCharges) {
	t.Helper()
	want.Peer = peer
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var got bps.PeerCharges
		for _, c := range svc.Charges() {
			if c.Peer.Equal(peer) {
				got = c
			}
		}
		if got.Peer.Equal(peer) && got.Debited == want.Debited && got.Credited == want.Credited && got.Streams == want.Streams {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("charges with %s: %+v, want %+v", peer, got, want)
		}
		<-tick.C
	}
}

// TestPricingDepth: a child owes a delivery's price whatever the depth its
// parent stated, and Publish × (stated + 1) for each Broadcast it sends
// up — its updates and, on Rev 8, the AUTH that claims its stream (rev 3's
// free Claim frame is gone; docs/protocol.md, "Prices").
func TestPricingDepth(t *testing.T) {
	t.Parallel()
	for _, stated := range []uint32{0, 2} {
		t.Run(fmt.Sprint("stated ", stated), func(t *testing.T) {
			t.Parallel()
			net := newNetwork(t)
			k := newKey(t)
			sp := feedSpec(t, "depth", k)
			parent := net.NewNode()
			zero := make([]byte, 32) // the fake parent's challenge; a subscriber compares it with nothing
			msgs := []*pb.Broadcast{update(t, k, sp, zero, 0, "a"), update(t, k, sp, zero, 1, "b"), update(t, k, sp, zero, 2, "c")}
			read := make(chan int, 1)
			fakeParent(t, parent, stated, msgs, func(r *raw) {
				n := 0
				for {
					if err := r.read(new(pb.Broadcast)); err != nil {
						break
					}
					n++
				}
				read <- n
			})
			l := newLedger()
			// One parent: under a referring root the fake parent is not the
			// root, and a second parent's repair would Join it again.
			child := pricedNode(t, net, bps.Options{Tree: bps.Tree{SingleParent: true}}, l, testPrices)
			if err := net.Connect(child.Node, parent); err != nil {
				t.Fatal(err)
			}
			at := parent
			if stated > 0 {
				// Below the root, a parent is reached through a candidate.
				at = referringRoot(t, net, parent.Overlay(), stated)
				if err := net.Connect(child.Node, at); err != nil {
					t.Fatal(err)
				}
			}
			sub, err := child.svc.Subscribe(ctxT(t), at.Overlay(), sp)
			if err != nil {
				t.Fatal(err)
			}
			for range msgs {
				recv(t, sub)
			}
			l.waitBalance(t, "child", parent.Overlay(), -int64(len(msgs))*int64(testPrices.Delivery))
			_ = sub.Close()

			l2 := newLedger()
			pub := pricedNode(t, net, bps.Options{}, l2, testPrices)
			if err := net.Connect(pub.Node, parent); err != nil {
				t.Fatal(err)
			}
			if at != parent {
				// A publisher, too, is below the root only through a
				// candidate (TestHostilePublisherStatedDepth).
				if err := net.Connect(pub.Node, at); err != nil {
					t.Fatal(err)
				}
			}
			p, err := pub.svc.Publish(ctxT(t), at.Overlay(), sp, bps.PublishOptions{Addr: k.addr, Signer: k.signer})
			if err != nil {
				t.Fatal(err)
			}
			sent := []*pb.Broadcast{update(t, k, sp, p.Challenge(), 3, "x"), update(t, k, sp, p.Challenge(), 4, "y")}
			for _, m := range sent {
				if err := p.Send(ctxT(t), m); err != nil {
					t.Fatal(err)
				}
			}
			// The parent's deliveries, and the publications at depth stated+1.
			want := int64(len(msgs))*int64(testPrices.Delivery) + int64(len(sent)+1)*int64(testPrices.Publish)*int64(stated+1)
			l2.waitBalance(t, "publisher", parent.Overlay(), -want)
			_ = p.Close()
			if n := <-read; n != len(sent)+1 {
				t.Fatalf("parent read %d frames, want the AUTH and %d publications", n, len(sent))
			}
		})
	}
}

// TestPricingCutAtThreshold: a subscriber that acknowledges its deliveries
// and never pays gets exactly what the broker's debt bound allows
// (Settlement.Debt, here 3 deliveries: receipt.go), then nothing until it
// pays, and its stream ends unpaid (ErrUnpaid, no violation) after five
// settlement intervals; it is charged for every delivery it got. A
// subscriber that pays keeps receiving every update. With no bound
// (Debt < 0) it is cut by the broker's accounting at its disconnect
// threshold, as bee's accounting ends any exchange — the handler returns
// bee's own BlockPeerError, which the node blocklists.
func TestPricingCutAtThreshold(t *testing.T) {
	t.Parallel()
	for _, bound := range []bool{true, false} {
		t.Run(fmt.Sprint("debt bound ", bound), func(t *testing.T) {
			t.Parallel()
			cutAtThreshold(t, bound)
		})
	}
}

func cutAtThreshold(t *testing.T, bound bool) {
	net := newNetwork(t)
	bl := newLedger()
	price := int64(testPrices.Delivery)
	bl.disconnect = 3 * price
	st := bps.Settlement{Frames: 4, Interval: 50 * time.Millisecond, Debt: 3 * price}
	if !bound {
		st.Debt = -1
	} else {
		// The debtor is cut unpaid debtWaits (5) intervals after the
		// broker's writer began to wait; its receipts for the deliveries it
		// took come within receiptDelay (100 ms) of them. At 50 ms a
		// loaded machine cut it before its last receipts came (got 3,
		// charged 1, 2 of 20 runs under -race at load 35): 1 s intervals
		// leave the receipts 5 s.
		st.Interval = time.Second
	}
	broker := settledNode(t, net, bps.Options{}, bl, testPrices, st)
	debtor, payer := newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})
	pubNode := newNode(t, net, bps.Options{})
	for _, c := range []*tnode{debtor, payer, pubNode} {
		if err := net.Connect(c.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	bl.settle(payer.Overlay())
	bl.settle(pubNode.Overlay())
	admin := newKey(t)
	sp := feedSpec(t, "threshold", admin)
	dsub, psub := subscribe(t, debtor, broker, sp), subscribe(t, payer, broker, sp)
	p := publish(t, pubNode, broker, sp, admin, 0)
	const n = 10
	for i := range uint64(n) {
		if err := p.PublishUpdate(ctxT(t), i, fmt.Appendf(nil, "update %d", i)); err != nil {
			t.Fatal(err)
		}
		if d := recv(t, psub); d.Index != i {
			t.Fatalf("payer got index %d, want %d", d.Index, i)
		}
	}
	leave := broker.rec.wait(t, "the debtor's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(debtor.Overlay())
	})
	got := 0
	for range dsub.C() {
		got++
	}
	if err := dsub.Err(); err == nil {
		t.Fatal("debtor's subscription ended without an error")
	}
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations counted", n)
	}
	owed := bl.balance(debtor.Overlay())
	if bound {
		if !errors.Is(leave.Err, bps.ErrUnpaid) {
			t.Fatalf("debtor's stream ended with %v, want unpaid", leave.Err)
		}
		if got != 3 || owed != 3*price {
			t.Fatalf("debtor received %d deliveries and owes %d, want 3 and %d", got, owed, 3*price)
		}
	} else {
		if !errors.Is(leave.Err, accounting.ErrDisconnectThresholdExceeded) || !errors.Is(leave.Err, bps.ErrUnpaid) {
			t.Fatalf("debtor's stream ended with %v, want the disconnect threshold", leave.Err)
		}
		var bpe *p2p.BlockPeerError
		if !errors.As(leave.Err, &bpe) {
			t.Fatalf("debtor's stream ended with %v, not bee's BlockPeerError", leave.Err)
		}
		waitBlocklisted(t, broker, debtor)
		if owed < bl.disconnect || int64(got)*price < owed {
			t.Fatalf("debtor received %d deliveries and owes %d, want at least %d, and charged for no more than it got", got, owed, bl.disconnect)
		}
	}
	if c := broker.svc.Charges(); len(c) != 2 {
		t.Fatalf("broker holds charges of %d peers after the debtor left, want 2: %+v", len(c), c)
	}
}

// TestPricingChildCannotPay: a subscriber whose own accounting refuses a
// delivery's charge (bee's ErrOverdraft: it cannot settle) ends its
// stream, and its subscription says why.
func TestPricingChildCannotPay(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	broker := pricedNode(t, net, bps.Options{}, newLedger(), testPrices)
	l := newLedger()
	l.overdraft = 2 * int64(testPrices.Delivery)
	// The child sends a receipt a delivery and settles every 2: the flush
	// of the first two fits its overdraft, that of the third and fourth
	// does not.
	child := settledNode(t, net, bps.Options{}, l, testPrices, bps.Settlement{Frames: 2, Interval: time.Hour, Margin: -1, Receipt: 1})
	pubNode := newNode(t, net, bps.Options{})
	for _, c := range []*tnode{child, pubNode} {
		if err := net.Connect(c.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	admin := newKey(t)
	sp := feedSpec(t, "overdraft", admin)
	sub := subscribe(t, child, broker, sp)
	p := publish(t, pubNode, broker, sp, admin, 0)
	for i := range uint64(4) {
		if err := p.PublishUpdate(ctxT(t), i, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for range sub.C() {
		got++
	}
	err := sub.Err()
	// It charges a delivery as its receipt is written, after it handed
	// the delivery on: the fourth may have come before the refusal.
	if got < 3 || got > 4 || !errors.Is(err, bps.ErrUnpaid) || !errors.Is(err, accounting.ErrOverdraft) {
		t.Fatalf("received %d, ended with %v; want 3 or 4 and the overdraft", got, err)
	}
	t.Logf("the subscription says: %v", err)
}

// settledCohort is a priced broker, a priced subscriber and a free
// publisher, both priced nodes settling as st says; the subscriber has
// received n updates.
func settledCohort(t *testing.T, st bps.Settlement, n int) (broker, sub *tnode, bl, sl *ledger, s *bps.Subscription) {
	t.Helper()
	net := newNetwork(t)
	bl, sl = newLedger(), newLedger()
	broker = settledNode(t, net, bps.Options{}, bl, testPrices, st)
	sub = settledNode(t, net, bps.Options{}, sl, testPrices, st)
	pubNode := newNode(t, net, bps.Options{})
	for _, c := range []*tnode{sub, pubNode} {
		if err := net.Connect(c.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	admin := newKey(t)
	sp := feedSpec(t, "settlement", admin)
	s = subscribe(t, sub, broker, sp)
	p := publish(t, pubNode, broker, sp, admin, 0)
	for i := range uint64(n) {
		if err := p.PublishUpdate(ctxT(t), i, []byte("x")); err != nil {
			t.Fatal(err)
		}
		recv(t, s)
	}
	return broker, sub, bl, sl, s
}

// TestPricingSettlement: a meter applies what it holds every Frames
// frames, Interval after its first held charge, and when its stream ends —
// and the totals are exactly the prices, the same at both ends.
func TestPricingSettlement(t *testing.T) {
	t.Parallel()
	d := int64(testPrices.Delivery)
	t.Run("frames", func(t *testing.T) {
		t.Parallel()
		// A subscriber holds a delivery once it has read it, before it is
		// handed on, and applies what it holds once that is at least 3:
		// after 7 it holds fewer than 3. It charges a delivery as its
		// receipt is written (one receipt a delivery here; two receipts
		// written in one batch are one count of 2, so the batches are 3
		// or more, not exactly 3): Settle sends the last and applies what
		// is held.
		broker, sub, bl, sl, s := settledCohort(t, bps.Settlement{Frames: 3, Interval: time.Hour, Margin: -1, Receipt: 1}, 7)
		sl.waitOwes(t, "subscriber", broker.Overlay(), 5*d)
		for _, delta := range sl.applied(broker.Overlay()) {
			if delta > -3*d {
				t.Fatalf("the subscriber applied %v before Settle: a charge of fewer than 3 deliveries", sl.applied(broker.Overlay()))
			}
		}
		sub.svc.Settle()
		if got := sl.balance(broker.Overlay()); got != -7*d {
			t.Fatalf("the subscriber's balance after Settle is %d, want %d", got, -7*d)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		sl.waitBalance(t, "subscriber", broker.Overlay(), -7*d)
		bl.waitBalance(t, "broker", sub.Overlay(), 7*d)
	})
	t.Run("interval", func(t *testing.T) {
		t.Parallel()
		broker, sub, bl, sl, _ := settledCohort(t, bps.Settlement{Frames: 1000, Interval: 20 * time.Millisecond, Margin: -1}, 2)
		sl.waitBalance(t, "subscriber", broker.Overlay(), -2*d)
		bl.waitBalance(t, "broker", sub.Overlay(), 2*d)
		waitCharges(t, broker.svc, sub.Overlay(), bps.PeerCharges{Debited: 2 * uint64(d), Streams: 1})
	})
	t.Run("margin", func(t *testing.T) {
		t.Parallel()
		// With its default margin a subscriber applies nothing of 7
		// deliveries while its stream lives; the broker applies its
		// batches of 3. Once the stream ends the subscriber applies what
		// it kept after the broker has applied the rest: at no time does
		// the subscriber's ledger say it owes more than the broker's.
		// The broker charges by the receipts (one a delivery here); the
		// last is read before the subscriber's close (closeOnce).
		broker, sub, bl, sl, s := settledCohort(t, bps.Settlement{Frames: 3, Interval: time.Hour, Receipt: 1}, 7)
		bl.waitBalance(t, "broker", sub.Overlay(), 6*d)
		if got := sl.balance(broker.Overlay()); got != 0 {
			t.Fatalf("the subscriber's balance after 7 deliveries is %d, want 0: within its margin", got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(waitTimeout)
		for {
			owes, owed := -sl.balance(broker.Overlay()), bl.balance(sub.Overlay())
			if owes > owed {
				t.Fatalf("the subscriber's ledger says it owes %d, the broker's %d", owes, owed)
			}
			if owes == owed && owed == 7*d {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the subscriber owes %d, the broker is owed %d; want both %d", owes, owed, 7*d)
			}
			time.Sleep(time.Millisecond)
		}
	})
	t.Run("stream end", func(t *testing.T) {
		t.Parallel()
		broker, sub, bl, sl, s := settledCohort(t, bps.Settlement{Frames: 1000, Interval: time.Hour}, 5)
		if got := sl.balance(broker.Overlay()); got != 0 {
			t.Fatalf("the subscriber's balance before its stream ended is %d, want 0: it holds what it owes", got)
		}
		sub.svc.Settle()
		if got := sl.balance(broker.Overlay()); got != -5*d {
			t.Fatalf("the subscriber's balance after Settle is %d, want %d", got, -5*d)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		bl.waitBalance(t, "broker", sub.Overlay(), 5*d)
		if got := sl.balance(broker.Overlay()); got != -5*d {
			t.Fatalf("the subscriber's balance after its stream ended is %d, want %d", got, -5*d)
		}
	})
}

// TestPricingChildLeaves: a child that leaves its parent gracefully —
// its subscription closed, with deliveries untold — writes a receipt of
// everything it took before it closes its side, and reads on until its
// parent, which reads that receipt before the child's EOF, ends the
// stream: both ledgers charge every delivery taken, and agree exactly
// even while the parent writes more as the child leaves
// (docs/protocol.md, "Prices", the end of a stream).
func TestPricingChildLeaves(t *testing.T) {
	t.Parallel()
	d := int64(testPrices.Delivery)
	left := func(t *testing.T, broker, sub *tnode, s *bps.Subscription) {
		t.Helper()
		if err := s.Close(); err != nil {
			t.Fatalf("close: %v", err)
		}
		broker.rec.wait(t, "the subscriber's stream ended", func(e bps.Event) bool {
			return e.Kind == bps.EventLeave && e.Peer.Equal(sub.Overlay())
		})
	}
	t.Run("untold", func(t *testing.T) {
		t.Parallel()
		// Receipts every 1,000 deliveries: the 5 are untold (unless the
		// 100 ms timer's receipt came) when the subscription closes.
		broker, sub, bl, sl, s := settledCohort(t, bps.Settlement{Frames: 1000, Interval: time.Hour, Margin: -1, Receipt: 1000}, 5)
		left(t, broker, sub, s)
		if got := bl.balance(sub.Overlay()); got != 5*d {
			t.Fatalf("the broker charged %d, want %d: every delivery taken", got, 5*d)
		}
		if got := -sl.balance(broker.Overlay()); got != 5*d {
			t.Fatalf("the subscriber was charged %d, want %d: every delivery taken", got, 5*d)
		}
	})
	t.Run("while the parent writes", func(t *testing.T) {
		t.Parallel()
		c := newPricedFeed(t, bps.Settlement{Frames: 1000, Interval: time.Hour, Margin: -1, Receipt: 1}, 5)
		broker, sub, bl, sl, s, p := c.broker, c.sub, c.bl, c.sl, c.s, c.p
		// The publisher goes on as the subscriber leaves: the broker
		// writes to a child that is closing its side.
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := uint64(5); i < 40; i++ {
				if err := p.PublishUpdate(ctxT(t), i, []byte("x")); err != nil {
					t.Errorf("publish %d: %v", i, err)
					return
				}
			}
		}()
		left(t, broker, sub, s)
		wg.Wait()
		owed, owes := bl.balance(sub.Overlay()), -sl.balance(broker.Overlay())
		if owed != owes || owed < 5*d {
			t.Fatalf("the broker charged %d, the subscriber %d: want the same, at least %d", owed, owes, 5*d)
		}
	})
}

// TestPricingEndOfStream: a child whose parent ends the stream
// (END_OF_STREAM) writes a receipt of everything it took, the end
// included, before it closes: both ledgers charge every delivery.
func TestPricingEndOfStream(t *testing.T) {
	t.Parallel()
	d := int64(testPrices.Delivery)
	// Receipts every 1,000 deliveries: the 5 are untold (unless the
	// 100 ms timer's receipt came) when the end comes.
	c := newPricedFeed(t, bps.Settlement{Frames: 1000, Interval: time.Hour, Margin: -1, Receipt: 1000}, 5)
	if err := c.p.Send(ctxT(t), endMsg(t, c.admin, c.sp, c.p.Challenge())); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, c.s); got.Kind != pb.Kind_EOS {
		t.Fatalf("the subscriber got %v, want the end", got.Kind)
	}
	<-c.s.Done()
	if !errors.Is(c.s.Err(), bps.ErrEndOfStream) {
		t.Fatalf("the subscription ended with %v, want the end", c.s.Err())
	}
	c.broker.rec.wait(t, "the subscriber's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(c.sub.Overlay())
	})
	if got := c.bl.balance(c.sub.Overlay()); got != 6*d {
		t.Fatalf("the broker charged %d, want %d: 5 deliveries and the end", got, 6*d)
	}
	c.sl.waitBalance(t, "subscriber", c.broker.Overlay(), -6*d)
}

// pricedFeed is settledCohort's cohort, with its publisher (the admin)
// and spec.
type pricedFeed struct {
	broker, sub *tnode
	bl, sl      *ledger
	s           *bps.Subscription
	p           *bps.Publisher
	admin       key
	sp          *bps.Spec
}

// newPricedFeed is settledCohort, returning the publisher too.
func newPricedFeed(t *testing.T, st bps.Settlement, n int) *pricedFeed {
	t.Helper()
	net := newNetwork(t)
	c := &pricedFeed{bl: newLedger(), sl: newLedger(), admin: newKey(t)}
	c.broker = settledNode(t, net, bps.Options{}, c.bl, testPrices, st)
	c.sub = settledNode(t, net, bps.Options{}, c.sl, testPrices, st)
	pubNode := newNode(t, net, bps.Options{})
	for _, nd := range []*tnode{c.sub, pubNode} {
		if err := net.Connect(nd.Node, c.broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	c.sp = feedSpec(t, "priced feed", c.admin)
	c.s = subscribe(t, c.sub, c.broker, c.sp)
	c.p = publish(t, pubNode, c.broker, c.sp, c.admin, 0)
	for i := range uint64(n) {
		if err := c.p.PublishUpdate(ctxT(t), i, []byte("x")); err != nil {
			t.Fatal(err)
		}
		recv(t, c.s)
	}
	return c
}

// TestPricingDisconnectMidBatch: a subscriber that leaves while its
// parent holds deliveries it has not applied is charged for them as its
// stream ends; if bee's accounting has disconnected it already (a charge
// fails), it gains at most the credit bound: what one meter holds.
func TestPricingDisconnectMidBatch(t *testing.T) {
	t.Parallel()
	const frames, n = 8, 5
	for _, gone := range []bool{false, true} {
		t.Run(fmt.Sprint("accounting disconnected ", gone), func(t *testing.T) {
			t.Parallel()
			broker, sub, bl, _, s := settledCohort(t, bps.Settlement{Frames: frames, Interval: time.Hour}, n)
			sub.svc.Settle() // every delivery acknowledged: the receipts are written
			if got := bl.balance(sub.Overlay()); got != 0 {
				t.Fatalf("the broker applied %d before the stream ended, want 0", got)
			}
			if gone {
				bl.drop(sub.Overlay())
			}
			_ = s.Close()
			// The broker's Leave is traced once its writer has ended and
			// applied what the meter held.
			broker.rec.wait(t, "the subscriber's stream ended", func(e bps.Event) bool {
				return e.Kind == bps.EventLeave && e.Peer.Equal(sub.Overlay())
			})
			want := int64(n * testPrices.Delivery)
			if gone {
				want = 0 // lost: n frames, within the 8 the meter may hold
			}
			if got := bl.balance(sub.Overlay()); got != want {
				t.Fatalf("the broker's balance with the leaver is %d, want %d", got, want)
			}
		})
	}
}

// benchPeer is a node of a pricing benchmark, on a transport.
type benchPeer struct {
	overlay swarm.Address
	svc     *bps.Service
}

// benchTransport makes the nodes of a pricing benchmark: node starts one
// whose service charges on acc (nil: nothing), connect connects a to b.
type benchTransport struct {
	node    func(b *testing.B, acc accounting.Interface) benchPeer
	connect func(b *testing.B, a, c benchPeer)
}

// streamtestTransport is the in-memory network.
func streamtestTransport(b *testing.B) benchTransport {
	net := streamtest.New()
	b.Cleanup(func() { _ = net.Close() })
	nodes := make(map[string]*tnode)
	return benchTransport{
		node: func(b *testing.B, acc accounting.Interface) benchPeer {
			n := pricingBenchNode(b, net, acc)
			nodes[n.Overlay().ByteString()] = n
			return benchPeer{overlay: n.Overlay(), svc: n.svc}
		},
		connect: func(b *testing.B, a, c benchPeer) {
			if err := net.Connect(nodes[a.overlay.ByteString()].Node, nodes[c.overlay.ByteString()].Node); err != nil {
				b.Fatal(err)
			}
		},
	}
}

// benchPricing publishes b.N updates through a broker to subscribers,
// without accounting, or priced: with bee's own accounting (over an
// in-memory state store) at every node, or with the test's ledger.
func benchPricing(b *testing.B, tr benchTransport, priced, bee bool) {
	const subscribers = 16
	accs := make(map[string]*accounting.Accounting)
	node := func() benchPeer {
		if !priced {
			return tr.node(b, nil)
		}
		if !bee {
			return tr.node(b, newLedger())
		}
		acc, err := accounting.NewAccounting(new(big.Int).Lsh(big.NewInt(1), 100), 25, 50, log.Noop, statestore.NewStateStore(), nil, big.NewInt(4_500_000), 10, nil)
		if err != nil {
			b.Fatal(err)
		}
		n := tr.node(b, acc)
		accs[n.overlay.ByteString()] = acc
		return n
	}
	broker, pubNode := node(), node()
	subs := make([]benchPeer, subscribers)
	for i := range subs {
		subs[i] = node()
	}
	for _, c := range append([]benchPeer{pubNode}, subs...) {
		tr.connect(b, c, broker)
		if priced && bee {
			accs[broker.overlay.ByteString()].Connect(c.overlay, true)
			accs[c.overlay.ByteString()].Connect(broker.overlay, true)
		}
	}
	ctx := context.Background()
	k := newKey(b)
	sp := feedSpec(b, "bench pricing", k)
	ss := make([]*bps.Subscription, subscribers)
	for i, c := range subs {
		s, err := c.svc.Subscribe(ctx, broker.overlay, sp)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		ss[i] = s
	}
	p, err := pubNode.svc.Publish(ctx, broker.overlay, sp, bps.PublishOptions{Addr: k.addr, Signer: k.signer})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	msgs := make([]*pb.Broadcast, b.N)
	for i := range msgs {
		msgs[i] = update(b, k, sp, p.Challenge(), uint64(i), "benchmark payload of a modest size")
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime(b)
	for i, m := range msgs {
		if err := p.Send(ctx, m); err != nil {
			b.Fatal(err)
		}
		for _, s := range ss {
			if d := <-s.C(); d.Index != uint64(i) {
				b.Fatalf("index %d, want %d", d.Index, i)
			}
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	if priced && bee {
		// The broker holds what its last writes charged until it settles;
		// its writer may count the last delivery just after the
		// subscriber read it.
		want := uint64(b.N) * bps.DefaultPrices().Delivery
		deadline := time.Now().Add(10 * time.Second)
		for {
			broker.svc.Settle()
			bal, err := accs[broker.overlay.ByteString()].Balance(subs[0].overlay)
			if err == nil && bal.Uint64() == want {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("a subscriber owes %v (%v), want %d", bal, err, want)
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// pricingCohort is one cohort of a pricing benchmark: a broker, a
// publisher and subscribers, priced with bee's accounting at every node
// (over an in-memory state store) or free.
type pricingCohort struct {
	pub  *bps.Publisher
	subs []*bps.Subscription
	msgs []*pb.Broadcast
}

func newPricingCohort(b *testing.B, tr benchTransport, priced bool, subscribers, n int) *pricingCohort {
	accs := make(map[string]*accounting.Accounting)
	node := func() benchPeer {
		if !priced {
			return tr.node(b, nil)
		}
		acc, err := accounting.NewAccounting(new(big.Int).Lsh(big.NewInt(1), 100), 25, 50, log.Noop, statestore.NewStateStore(), nil, big.NewInt(4_500_000), 10, nil)
		if err != nil {
			b.Fatal(err)
		}
		nd := tr.node(b, acc)
		accs[nd.overlay.ByteString()] = acc
		return nd
	}
	broker, pubNode := node(), node()
	subs := make([]benchPeer, subscribers)
	for i := range subs {
		subs[i] = node()
	}
	for _, c := range append([]benchPeer{pubNode}, subs...) {
		tr.connect(b, c, broker)
		if priced {
			accs[broker.overlay.ByteString()].Connect(c.overlay, true)
			accs[c.overlay.ByteString()].Connect(broker.overlay, true)
		}
	}
	ctx := context.Background()
	k := newKey(b)
	sp := feedSpec(b, fmt.Sprint("bench pricing paired ", priced), k)
	pc := &pricingCohort{}
	for _, c := range subs {
		s, err := c.svc.Subscribe(ctx, broker.overlay, sp)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		pc.subs = append(pc.subs, s)
	}
	p, err := pubNode.svc.Publish(ctx, broker.overlay, sp, bps.PublishOptions{Addr: k.addr, Signer: k.signer})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	pc.pub = p
	for i := range n {
		pc.msgs = append(pc.msgs, update(b, k, sp, p.Challenge(), uint64(i), "benchmark payload of a modest size"))
	}
	return pc
}

// publish publishes update i and waits until every subscriber has it.
func (pc *pricingCohort) publish(b *testing.B, i int) {
	if err := pc.pub.Send(context.Background(), pc.msgs[i]); err != nil {
		b.Fatal(err)
	}
	for _, s := range pc.subs {
		if d := <-s.C(); d.Index != uint64(i) {
			b.Fatalf("index %d, want %d", d.Index, i)
		}
	}
}

// benchPricingPaired publishes on a free cohort and on one priced with
// bee's accounting alternately, in one process, and reports the process's
// CPU time over each publication (until its 16 deliveries arrived) and
// their ratio: a shared machine's load weighs on both alike.
func benchPricingPaired(b *testing.B, tr benchTransport) {
	const subscribers = 16
	free := newPricingCohort(b, tr, false, subscribers, b.N)
	priced := newPricingCohort(b, tr, true, subscribers, b.N)
	var cf, cp time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		first, second, c1, c2 := free, priced, &cf, &cp
		if i%2 == 1 {
			first, second, c1, c2 = priced, free, &cp, &cf
		}
		t0 := cpuTime(b)
		first.publish(b, i)
		t1 := cpuTime(b)
		second.publish(b, i)
		t2 := cpuTime(b)
		*c1 += t1 - t0
		*c2 += t2 - t1
	}
	b.StopTimer()
	b.ReportMetric(float64(cf.Nanoseconds())/float64(b.N), "free-cpu-ns/op")
	b.ReportMetric(float64(cp.Nanoseconds())/float64(b.N), "priced-cpu-ns/op")
	b.ReportMetric(float64(cp)/float64(cf), "priced/free")
}

// BenchmarkPricingPaired is BenchmarkPricing's free and priced/bee
// alternately in one run (benchPricingPaired):
//
//	go test -run '^$' -bench 'PricingPaired' -benchtime 2000x -cpu 2 ./pkg/bps/
func BenchmarkPricingPaired(b *testing.B) {
	benchPricingPaired(b, streamtestTransport(b))
}

func pricingBenchNode(b *testing.B, net *streamtest.Network, acc accounting.Interface) *tnode {
	nd := net.NewNode()
	o := bps.Options{Bounds: bps.Bounds{QueueLen: 1024}}
	if acc != nil {
		o.Accounting, o.Prices = acc, bps.DefaultPrices()
	}
	svc, err := bps.New(nd, nd.Overlay(), o)
	if err != nil {
		b.Fatal(err)
	}
	if err := nd.AddProtocol(svc.Protocol()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = svc.Close() })
	return &tnode{Node: nd, svc: svc}
}

// BenchmarkPricing: CPU per published update (one publisher, 16
// subscribers, all in one process: cpu-ns/op is the process's user and
// system time) without accounting and with bee's accounting charging every
// delivery and publication at both ends — or with a ledger that only sums
// (this package's cost alone). The ratio to free is the cost of charging
// for depth (docs/benchmarks.md).
func BenchmarkPricing(b *testing.B) {
	b.Run("free", func(b *testing.B) { benchPricing(b, streamtestTransport(b), false, false) })
	b.Run("priced/ledger", func(b *testing.B) { benchPricing(b, streamtestTransport(b), true, false) })
	b.Run("priced/bee", func(b *testing.B) { benchPricing(b, streamtestTransport(b), true, true) })
}
