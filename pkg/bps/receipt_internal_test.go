// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"testing"
	"testing/synctest"

	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/encoding/protowire"
)

// TestReceiptQueueFullKeepsUntold: a receipt the child's queue has no
// room for (Options.QueueLen frames, a writer still writing) leaves its
// deliveries untold, so that the next receipt the queue takes adds them
// (what the child charges when it is written) as its cumulative count
// does (what the parent charges). Counted told and dropped, the next
// receipt added only its own: the parent charged 5 deliveries and the
// child 4 (TestPricingLostWithTheConnection, about 1 run in 60 under
// -race), or, with no next receipt, the parent never heard of it.
func TestReceiptQueueFullKeepsUntold(t *testing.T) {
	cs := &clientStream{s: &Service{}}
	cs.queue.max = 1
	cs.writing = true // a writer runs: push only queues
	defer cs.rout.stop()
	if !cs.push(cs.s, outFrame{b: []byte{0}}) {
		t.Fatal("the first frame was not queued")
	}
	// The first delivery is due at once (receiptDue): the queue is full.
	if fresh, err := cs.rout.took(cs, [32]byte{1}); !fresh || err != nil {
		t.Fatalf("took: %v, %v", fresh, err)
	}
	if told := cs.rout.told; told != 0 {
		t.Fatalf("a receipt the queue refused counted %d deliveries told", told)
	}
	cs.rout.mu.Lock()
	armed := cs.rout.timer != nil
	cs.rout.mu.Unlock()
	if !armed {
		t.Fatal("no retry armed for the receipt the queue refused")
	}
	if _, ok := cs.queue.pop(); !ok { // the writer wrote the frame
		t.Fatal("nothing queued")
	}
	if _, err := cs.rout.took(cs, [32]byte{2}); err != nil {
		t.Fatal(err)
	}
	f, ok := cs.queue.pop()
	if !ok || f.kind != kindReceipt {
		t.Fatalf("no receipt queued (%v, kind %d)", ok, f.kind)
	}
	_, n := protowire.ConsumeVarint(f.b)
	r := new(pb.Receipt)
	if err := decodeFrame(f.b[n:], r); err != nil {
		t.Fatal(err)
	}
	if r.Taken != 2 || f.acks != 2 {
		t.Fatalf("the receipt tells %d taken and adds %d to the child's charge: want 2 and 2", r.Taken, f.acks)
	}
}

// TestEndReceiptWaitsForTheLastReceipt: a child whose parent ended the
// stream (END_OF_STREAM) and whose last delivery made a receipt due —
// queued as the reader took it, nothing left untold for the final one —
// closes the stream only once that receipt is written. Closed at once, the
// close raced the writer and lost the receipt: the parent charged 3 of 6
// deliveries (TestPricingEndOfStream, about 1 run in 100 under -race).
func TestEndReceiptWaitsForTheLastReceipt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := &clientStream{s: &Service{}}
		cs.queue.max = 8
		cs.writing = true // a writer runs: push only queues
		defer cs.rout.stop()
		if _, err := cs.rout.took(cs, [32]byte{1}); err != nil { // due at once
			t.Fatal(err)
		}
		returned := make(chan struct{})
		go func() {
			cs.endReceipt()
			close(returned)
		}()
		synctest.Wait()
		select {
		case <-returned:
			t.Fatal("endReceipt returned with the last receipt queued, unwritten")
		default:
		}
		f, ok := cs.queue.pop()
		if !ok || f.kind != kindReceipt || f.done == nil {
			t.Fatalf("no receipt queued (%v, kind %d)", ok, f.kind)
		}
		if _, ok := cs.queue.pop(); ok {
			t.Fatal("a final receipt with nothing untold was queued")
		}
		f.done <- nil // the writer wrote it
		synctest.Wait()
		select {
		case <-returned:
		default:
			t.Fatal("endReceipt did not return once the receipt was written")
		}
	})
}
