// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Receipts (issue 24; receipt.go): a parent charges what its child
// acknowledged, never more than it wrote, and writes no more than a
// window past the child's last receipt.

// receiptCohort is a priced broker (its ledger bl), a free publisher that
// has claimed its stream, and a raw child from a node of its own that
// joined as a multihop subscriber.
func receiptCohort(t *testing.T, o bps.Options) (broker *tnode, bl *ledger, p *bps.Publisher, child *tnode, r *raw) {
	t.Helper()
	net := newNetwork(t)
	bl = newLedger()
	broker = settledNode(t, net, o, bl, testPrices, bps.Settlement{Interval: 50 * time.Millisecond, Debt: -1})
	pubNode, child := newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})
	for _, c := range []*tnode{pubNode, child} {
		if err := net.Connect(c.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	admin := newKey(t)
	sp := feedSpec(t, "receipts", admin)
	r = openRaw(t, child, broker)
	if ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: make([]byte, bps.AddressSize), Multihop: true, Listen: true}); ack.GetStatus() != pb.Status_OK || !ack.GetMultihop() {
		t.Fatalf("ack %v", ack)
	}
	p = publish(t, pubNode, broker, sp, admin, 0)
	return broker, bl, p, child, r
}

// deliveries reads frames down r until n deliveries came; what else comes
// (a probe, the root's heartbeat) is skipped.
func (r *raw) deliveries(n int) {
	r.t.Helper()
	for got := 0; got < n; {
		f := new(pb.Frame)
		if err := r.read(f); err != nil {
			r.t.Fatalf("after %d deliveries: %v", got, err)
		}
		if isDelivery(f) {
			got++
		}
	}
}

// isDelivery reports whether f is a delivery a receipt counts: a
// Broadcast, not the root's HEARTBEAT (never charged, outside the window;
// a multihop subscriber stream is sent one every period, 2 s by default,
// so a run slowed by the machine's load reads more of them).
func isDelivery(f *pb.Frame) bool {
	b := f.GetBroadcast()
	return b != nil && b.GetKind() != pb.Kind_HEARTBEAT
}

// TestHostileParentBillsUnacknowledged: a parent charges its child for
// the deliveries the child acknowledged, not for what it wrote: a child
// that read 5 and acknowledged 2 before it left owes 2 (with the parent
// charging at its writes, as before receipts, it owed 5).
func TestHostileParentBillsUnacknowledged(t *testing.T) {
	t.Parallel()
	broker, bl, p, child, r := receiptCohort(t, bps.Options{})
	for i := range uint64(5) {
		sendUpdate(t, p, i, fmt.Sprint("update ", i))
	}
	// The slow start: 1 before a receipt, 2 more for the one acknowledged,
	// 4 more for the next two.
	r.deliveries(bps.UnackedStart)
	r.send(&pb.Frame{Kind: &pb.Frame_Receipt{Receipt: &pb.Receipt{Taken: 1}}})
	r.deliveries(2)
	r.send(&pb.Frame{Kind: &pb.Frame_Receipt{Receipt: &pb.Receipt{Taken: 2}}})
	r.deliveries(2)
	if err := r.s.Close(); err != nil {
		t.Fatal(err)
	}
	leave := broker.rec.wait(t, "the child's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(child.Overlay())
	})
	t.Logf("the child's stream ended: %v", leave.Err)
	if got, want := bl.balance(child.Overlay()), 2*int64(testPrices.Delivery); got != want {
		t.Fatalf("the child owes %d, want %d: the 2 deliveries it acknowledged", got, want)
	}
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations", n)
	}
}

// TestHostileChildOverAcknowledges: a receipt for more deliveries than the
// parent wrote, or one that does not advance, is a violation: the stream
// is reset, the child blocklisted, the violation counted.
func TestHostileChildOverAcknowledges(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		receipts []uint64
	}{{"more than written", []uint64{2}}, {"not advancing", []uint64{1, 1}}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			broker, bl, p, child, r := receiptCohort(t, bps.Options{})
			for i := range uint64(2) {
				sendUpdate(t, p, i, fmt.Sprint("update ", i))
			}
			r.deliveries(bps.UnackedStart) // the slow start's first window
			for _, n := range c.receipts {
				r.send(&pb.Frame{Kind: &pb.Frame_Receipt{Receipt: &pb.Receipt{Taken: n}}})
			}
			expectReset(t, r)
			broker.rec.wait(t, "the violation", kind(bps.EventViolation))
			waitBlocklisted(t, broker, child)
			if got := bl.balance(child.Overlay()); got > int64(testPrices.Delivery) {
				t.Fatalf("the child owes %d: charged past what was written", got)
			}
		})
	}
}

// TestHostileChildNeverAcknowledges: a child that reads and never
// acknowledges gets exactly the slow start's first window (UnackedStart
// deliveries), then nothing, and its stream ends, the child blocklisted
// (no violation); it owes nothing. Without the slow start it read the
// whole window (20 here, UnackedMax at most); without the window, every
// update.
func TestHostileChildNeverAcknowledges(t *testing.T) {
	t.Parallel()
	broker, bl, p, child, r := receiptCohort(t, bps.Options{Timing: bps.Timing{WriteTimeout: time.Second}})
	// Read as the parent writes: the stream ends a second (WriteTimeout)
	// after the window closed, and what was not read by then is gone.
	end := r.countUntilEnd()
	for i := range uint64(20) {
		sendUpdate(t, p, i, fmt.Sprint("update ", i))
	}
	res := <-end
	got, err := res.got, res.err
	if errors.Is(err, errNoFrame) || got != bps.UnackedStart {
		t.Fatalf("the child read %d deliveries, then %v; want %d and the stream's end", got, err, bps.UnackedStart)
	}
	broker.rec.wait(t, "the child's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(child.Overlay())
	})
	if got := bl.balance(child.Overlay()); got != 0 {
		t.Fatalf("the child owes %d, want 0: it acknowledged nothing", got)
	}
	// Blocklisted by bee, no violation: a squatter gets one first window
	// per parent per blocklist period, not one per stream it opens.
	waitBlocklisted(t, broker, child)
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations", n)
	}
}

// TestHostileChildAcknowledgesOnce: the window grows with what the
// receipts acknowledge, not with receipts or time: a child that
// acknowledges its first delivery and then nothing gets UnackedStart +
// UnackedGrow deliveries past it (4 of 20), then its stream ends. With a
// window that opens whole at the first receipt it read all 20; with no
// growth, 2.
func TestHostileChildAcknowledgesOnce(t *testing.T) {
	t.Parallel()
	broker, bl, p, child, r := receiptCohort(t, bps.Options{Timing: bps.Timing{WriteTimeout: time.Second}})
	sendUpdate(t, p, 0, "update 0")
	r.deliveries(1)
	r.send(&pb.Frame{Kind: &pb.Frame_Receipt{Receipt: &pb.Receipt{Taken: 1}}})
	end := r.countUntilEnd() // read as the parent writes (above)
	for i := range uint64(19) {
		sendUpdate(t, p, 1+i, fmt.Sprint("update ", 1+i))
	}
	res := <-end
	got, err := res.got, res.err
	want := bps.UnackedStart + bps.UnackedGrow // past the one acknowledged
	if errors.Is(err, errNoFrame) || got != want {
		t.Fatalf("the child read %d more deliveries, then %v; want %d and the stream's end", got, err, want)
	}
	broker.rec.wait(t, "the child's stream ended", func(e bps.Event) bool {
		return e.Kind == bps.EventLeave && e.Peer.Equal(child.Overlay())
	})
	if got, want := bl.balance(child.Overlay()), int64(testPrices.Delivery); got != want {
		t.Fatalf("the child owes %d, want %d: the one delivery it acknowledged", got, want)
	}
	waitBlocklisted(t, broker, child)
}

// counted is what deliveriesUntilEnd returned.
type counted struct {
	got int
	err error
}

// countUntilEnd runs deliveriesUntilEnd on a goroutine of its own, which
// ends within readTimeout; its result comes on the channel.
func (r *raw) countUntilEnd() <-chan counted {
	c := make(chan counted, 1)
	go func() {
		got, err := r.deliveriesUntilEnd()
		c <- counted{got, err}
	}()
	return c
}

// deliveriesUntilEnd reads r until the stream ends (the error its read
// ends with) and counts the deliveries it read; other frames (a probe,
// the root's heartbeat: free, never a delivery) are skipped. A stream that
// has not ended within readTimeout — a parent that goes on writing
// heartbeats — is reset, and errNoFrame returned.
func (r *raw) deliveriesUntilEnd() (got int, err error) {
	deadline := time.Now().Add(readTimeout)
	for time.Now().Before(deadline) {
		f := new(pb.Frame)
		if err = r.read(f); err != nil {
			return got, err
		}
		if b := f.GetBroadcast(); b != nil && b.GetKind() != pb.Kind_HEARTBEAT {
			got++
		}
	}
	_ = r.s.Reset()
	return got, fmt.Errorf("the stream did not end: %w", errNoFrame)
}

// TestSlowStartKeepsUpWithAnHonestChild: the slow start costs an honest
// child nothing. In virtual time (links of no latency), a burst of 48
// updates written at a new stream's start reaches a priced parent's
// honest child without the clock moving by a receipt's delay: the child
// acknowledges its first delivery at once and then at half its parent's
// window (receiptDue), so the parent's writer never waits out a timer;
// and the child owes exactly what it took. With the child acknowledging
// every 16 deliveries or 100 ms, as before the slow start, the burst
// waits out the 100 ms timer at each of the window's first doublings.
func TestSlowStartKeepsUpWithAnHonestChild(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		net := newNetwork(t)
		bl, sl := newLedger(), newLedger()
		st := bps.Settlement{Frames: 1, Interval: time.Hour, Debt: -1}
		broker := settledNode(t, net, bps.Options{}, bl, testPrices, st)
		sub := settledNode(t, net, bps.Options{}, sl, testPrices, st)
		pubNode := newNode(t, net, bps.Options{})
		for _, c := range []*tnode{sub, pubNode} {
			if err := net.Connect(c.Node, broker.Node); err != nil {
				t.Fatal(err)
			}
		}
		admin := newKey(t)
		sp := feedSpec(t, "slow start", admin)
		s := subscribe(t, sub, broker, sp)
		p := publish(t, pubNode, broker, sp, admin, 0)
		const n = 48 // within the stream's queue (64): a burst, not a flood
		start := time.Now()
		for i := range uint64(n) {
			if err := p.Send(ctxT(t), update(t, admin, sp, p.Challenge(), i, "burst")); err != nil {
				t.Fatal(err)
			}
		}
		expectUpdates(t, s, 0, n)
		if took := time.Since(start); took >= 100*time.Millisecond {
			t.Fatalf("the burst of %d took %s of virtual time: the parent waited on its child's receipts", n, took)
		}
		sub.svc.TellReceipts()
		synctest.Wait()
		if got, want := bl.balance(sub.Overlay()), n*int64(testPrices.Delivery); got != want {
			t.Fatalf("the child owes %d, want %d: the %d deliveries it took", got, want, n)
		}
	})
}
