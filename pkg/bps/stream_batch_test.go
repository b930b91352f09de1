// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// countStream is a bufStream that counts its writes.
type countStream struct {
	bufStream
	writes int
}

func (c *countStream) Write(p []byte) (int, error) {
	c.writes++
	return c.bufStream.Write(p)
}

// rawFrame is a bare frame of n payload bytes (n < 128), each byte b.
func rawFrame(n int, b byte) []byte {
	return append([]byte{byte(n)}, bytes.Repeat([]byte{b}, n)...)
}

// broadcastFrame is a Broadcast of kind DATA whose soc is n bytes b, as
// the fan-out queues it (length-delimited).
func broadcastFrame(n int, b byte) []byte {
	return encodeFrame(&pb.Broadcast{Soc: bytes.Repeat([]byte{b}, n), Kind: pb.Kind_DATA})
}

// bigFrame is a bare frame of n ≥ 128 payload bytes.
func bigFrame(n int) []byte {
	return append([]byte{byte(n&0x7f | 0x80), byte(n >> 7)}, make([]byte, n)...)
}

// TestStreamBatch: a writer that finds frames queued writes them in one
// write, in order and in the stream's codec; every frame's done, price and
// service index are told as if it had been written alone.
func TestStreamBatch(t *testing.T) {
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	for _, cd := range []codec{codecBare, codecEnvelope} {
		st := &countStream{}
		ps := newPeerStream(st, peer, cd, &Options{Bounds: Bounds{QueueLen: 8}, Timing: Timing{WriteTimeout: DefaultWriteTimeout}})
		acc := new(recAccounting)
		ps.meter.Store(meterParent(acc, peer, 3))
		var want []byte
		var dones []chan error
		for i := range 5 {
			// Five distinct Broadcasts: the meter charges a delivery once
			// per stream, by its FrameKey (ledger.go).
			f := outFrame{b: broadcastFrame(10+i, byte(i)), kind: kindBroadcast, svc: uint64(i), done: make(chan error, 1)}
			dones = append(dones, f.done)
			want = append(want, cd.out(f)...)
			if !ps.offer(f) {
				t.Fatal("queue full")
			}
		}
		if cd == codecEnvelope {
			// Past the window's slow start (receipt.go): 32 deliveries
			// written and acknowledged before these.
			ps.rin.sent.Store(32)
			ps.rin.acked.Store(32)
		}
		tm := ps.writeTimer()
		bt := new(batch)
		ps.gather(bt, ps.popQueued())
		if bt.n != 5 {
			t.Fatalf("codec %d: batch of %d frames, want 5", cd, bt.n)
		}
		last, err := ps.putBatch(tm, bt)
		tm.Stop()
		if last || err != nil {
			t.Fatalf("codec %d: putBatch: last %v, err %v", cd, last, err)
		}
		if st.writes != 1 || !bytes.Equal(st.Bytes(), want) {
			t.Fatalf("codec %d: %d writes of %x, want 1 of %x", cd, st.writes, st.Bytes(), want)
		}
		for i, d := range dones {
			if err := <-d; err != nil {
				t.Fatalf("codec %d: frame %d told %v", cd, i, err)
			}
		}
		// The batch's five Messages are held on the meter once written,
		// and applied in one charge when the stream ends (pricing.go).
		if prepared, applied, _ := acc.record(); len(prepared) != 0 || len(applied) != 0 {
			t.Fatalf("codec %d: prepared %v, applied %v before the stream ended", cd, prepared, applied)
		}
		if cd == codecEnvelope {
			// A multihop stream's deliveries are charged by the child's
			// receipts (receipt.go): the child acknowledges all five.
			if err := ps.receipt(&pb.Receipt{Taken: 32 + 5}); err != nil {
				t.Fatalf("receipt: %v", err)
			}
		}
		ps.meter.Load().done()
		if prepared, applied, cleaned := acc.record(); len(prepared) != 1 || prepared[0] != 15 || len(applied) != 1 || applied[0] != 15 || cleaned != 1 {
			t.Fatalf("codec %d: prepared %v, applied %v, released %d; want one charge of 15", cd, prepared, applied, cleaned)
		}
		if ps.told.Load() != 4 {
			t.Fatalf("codec %d: told %d, want 4", cd, ps.told.Load())
		}
		for _, f := range bt.frames {
			if f.b != nil || f.done != nil {
				t.Fatalf("codec %d: the batch holds a frame after its write", cd)
			}
		}
	}
}

// TestStreamBatchBounds: a batch ends at maxBatchFrames, past maxBatchBytes
// (by one frame at most) and at the cohort's end, which closes our side.
func TestStreamBatchBounds(t *testing.T) {
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	fill := func(frames ...outFrame) *peerStream {
		ps := newPeerStream(&countStream{}, peer, codecBare, &Options{Bounds: Bounds{QueueLen: len(frames)}, Timing: Timing{WriteTimeout: DefaultWriteTimeout, EndGrace: DefaultEndGrace}})
		for _, f := range frames {
			if !ps.offer(f) {
				t.Fatal("queue full")
			}
		}
		return &ps
	}
	var small, large []outFrame
	for i := range maxBatchFrames + 8 {
		small = append(small, outFrame{b: rawFrame(20, byte(i))})
	}
	for range 8 {
		large = append(large, outFrame{b: bigFrame(10 << 10)})
	}
	end := []outFrame{{b: rawFrame(1, 1)}, {b: rawFrame(1, 2), end: true}, {b: rawFrame(1, 3)}}

	bt := new(batch)
	ps := fill(small...)
	if ps.gather(bt, ps.popQueued()); bt.n != maxBatchFrames {
		t.Fatalf("small frames: batch of %d, want %d", bt.n, maxBatchFrames)
	}
	ps = fill(large...)
	if ps.gather(bt, ps.popQueued()); bt.n != 4 { // 3 × 10 KiB < 32 KiB ≤ 4 × 10 KiB
		t.Fatalf("10 KiB frames: batch of %d, want 4", bt.n)
	}
	ps = fill(end...)
	if ps.gather(bt, ps.popQueued()); bt.n != 2 {
		t.Fatalf("end: batch of %d, want 2", bt.n)
	}
	tm := ps.writeTimer()
	defer tm.Stop()
	last, err := ps.putBatch(tm, bt)
	if !last || err != nil || !ps.ending.Load() {
		t.Fatalf("end: last %v, err %v, ending %v", last, err, ps.ending.Load())
	}
	ps.endTimer.Stop()
	if st := ps.stream.(*countStream); st.writes != 1 || !bytes.Equal(st.Bytes(), append(rawFrame(1, 1), rawFrame(1, 2)...)) {
		t.Fatalf("end: %d writes of %x", st.writes, st.Bytes())
	}
}

// TestStreamBatchFails: a batch whose write fails tells every frame the
// error, charges none and kills the stream.
func TestStreamBatchFails(t *testing.T) {
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	ps := newPeerStream(&bufStream{fail: true}, peer, codecBare, &Options{Bounds: Bounds{QueueLen: 3}, Timing: Timing{WriteTimeout: DefaultWriteTimeout}})
	acc := new(recAccounting)
	ps.meter.Store(meterParent(acc, peer, 1))
	var dones []chan error
	for i := range 3 {
		f := outFrame{b: rawFrame(5, byte(i)), svc: 7, done: make(chan error, 1)}
		dones = append(dones, f.done)
		ps.offer(f)
	}
	tm := ps.writeTimer()
	defer tm.Stop()
	bt := new(batch)
	ps.gather(bt, ps.popQueued())
	last, err := ps.putBatch(tm, bt)
	if !last || err == nil {
		t.Fatalf("putBatch: last %v, err %v", last, err)
	}
	for i, d := range dones {
		if err := <-d; err == nil {
			t.Fatalf("frame %d told no error", i)
		}
	}
	if ps.told.Load() != 0 {
		t.Fatalf("told %d after a failed write", ps.told.Load())
	}
	select {
	case <-ps.quit:
	default:
		t.Fatal("stream not killed")
	}
	if ps.reason == nil {
		t.Fatal("killed without a reason")
	}
	ps.meter.Load().done()
	if prepared, applied, cleaned := acc.record(); len(prepared) != 0 || len(applied) != 0 || cleaned != 0 {
		t.Fatalf("prepared %v, applied %v, released %d; want nothing charged", prepared, applied, cleaned)
	}
}

// blockStream is a stream whose writes block until it is reset.
type blockStream struct {
	bufStream
	reset chan struct{}
	once  sync.Once
}

func (b *blockStream) Write([]byte) (int, error) {
	<-b.reset
	return 0, errors.New("stream reset")
}

func (b *blockStream) Reset() error {
	b.once.Do(func() { close(b.reset) })
	return nil
}

// TestStreamWriteTimeout: the watchdog kills a write that has run
// WriteTimeout, to the instant, whether the timer was armed by it or by an
// earlier write; writes that each finish in time are never killed, however
// long the writer runs; an idle writer holds no armed timer.
func TestStreamWriteTimeout(t *testing.T) {
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	const timeout = time.Second
	o := &Options{Bounds: Bounds{QueueLen: 1}, Timing: Timing{WriteTimeout: timeout}}
	synctest.Test(t, func(t *testing.T) {
		quick := newPeerStream(&countStream{}, peer, codecBare, o)
		w := quick.writeTimer()
		defer w.Stop()
		for range 10 { // 3 timeouts' worth of writes, each in time
			if err := quick.write(w, []byte{1}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(timeout * 3 / 10)
		}
		time.Sleep(2 * timeout)
		synctest.Wait()
		if w.armed.Load() {
			t.Fatal("an idle writer's watchdog is armed")
		}
		select {
		case <-quick.quit:
			t.Fatalf("killed: %v", quick.reason)
		default:
		}

		for _, lead := range []time.Duration{0, timeout * 9 / 10} {
			st := &blockStream{reset: make(chan struct{})}
			ps := newPeerStream(st, peer, codecBare, o)
			w := ps.writeTimer()
			if lead > 0 { // an earlier write armed the timer
				w.start.Store(w.now())
				w.armed.Store(true)
				w.t = time.AfterFunc(timeout, w.fire)
				w.start.Store(0)
				time.Sleep(lead)
			}
			began := time.Now()
			err := ps.write(w, []byte{1})
			w.Stop()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("lead %s: write: %v, want a deadline", lead, err)
			}
			if d := time.Since(began); d != timeout {
				t.Fatalf("lead %s: killed after %s, want %s", lead, d, timeout)
			}
			if !errors.Is(ps.reason, errWriteTimeout) {
				t.Fatalf("lead %s: reason %v", lead, ps.reason)
			}
		}
	})
}

// popQueued takes the oldest frame queued to ps, as a writer does.
func (ps *peerStream) popQueued() outFrame {
	ps.wmu.Lock()
	defer ps.wmu.Unlock()
	f, _ := ps.queue.pop()
	return f
}

// queued is how many frames wait in ps's queue.
func (ps *peerStream) queued() int {
	ps.wmu.Lock()
	defer ps.wmu.Unlock()
	return ps.queue.n
}

// TestFrameQueue: a stream's queue takes at most its bound, gives frames
// back oldest first across its ring's growth and wrap, holds none it gave,
// and lets a ring larger than queueKeep go once empty.
func TestFrameQueue(t *testing.T) {
	q := frameQueue{max: 16}
	next, want := 0, 0
	push := func(k int) {
		for range k {
			if !q.push(outFrame{b: []byte{1}, svc: uint64(next)}) {
				t.Fatalf("push %d refused with %d queued", next, q.n)
			}
			next++
		}
	}
	pop := func(k int) {
		for range k {
			f, ok := q.pop()
			if !ok || f.svc != uint64(want) {
				t.Fatalf("pop: %d, %v; want %d", f.svc, ok, want)
			}
			want++
		}
	}
	push(1)
	pop(1)
	if q.ring == nil || len(q.ring) > queueKeep {
		t.Fatalf("a small ring is kept empty: %d slots", len(q.ring))
	}
	push(3)
	pop(2)
	push(9) // grows while wrapped
	pop(5)
	for i := range q.ring {
		if held := (i-q.head+len(q.ring))%len(q.ring) < q.n; !held && q.ring[i].b != nil {
			t.Fatalf("slot %d holds a frame given", i)
		}
	}
	push(11) // to the bound
	if q.n != 16 || q.push(outFrame{}) {
		t.Fatalf("%d queued; a push past the bound was taken", q.n)
	}
	if len(q.ring) != 16 {
		t.Fatalf("ring of %d slots at the bound", len(q.ring))
	}
	pop(16)
	if _, ok := q.pop(); ok || q.ring != nil {
		t.Fatalf("empty: pop %v, ring of %d slots", ok, len(q.ring))
	}
	push(2)
	pop(2)
	if none := (frameQueue{max: 0}); none.push(outFrame{}) {
		t.Fatal("a queue of 0 took a frame")
	}
}

// TestFrameQueueReplayBeside: a replay is queued beside the queue's max —
// at most replayFrames of it — and the live frames queued after it find
// the whole max; as the replay drains, the room it took goes with it.
func TestFrameQueueReplayBeside(t *testing.T) {
	const max = 16
	q := frameQueue{max: max}
	for i := range replayFrames {
		if !q.push(outFrame{svc: uint64(i), replay: true}) {
			t.Fatalf("replayed frame %d refused", i)
		}
	}
	if q.push(outFrame{replay: true}) {
		t.Fatalf("a replayed frame past %d taken", replayFrames)
	}
	for i := range max {
		if !q.push(outFrame{svc: uint64(replayFrames + i)}) {
			t.Fatalf("live frame %d refused behind a replay", i)
		}
	}
	if q.push(outFrame{}) {
		t.Fatalf("a live frame past the max taken")
	}
	for i := range replayFrames + max {
		f, ok := q.pop()
		if !ok || f.svc != uint64(i) || f.replay != (i < replayFrames) {
			t.Fatalf("pop %d: %+v, %v", i, f, ok)
		}
	}
	if q.spare != 0 || q.n != 0 {
		t.Fatalf("drained: %d spare, %d queued", q.spare, q.n)
	}
	for i := range max {
		if !q.push(outFrame{svc: uint64(i)}) {
			t.Fatalf("live frame %d refused", i)
		}
	}
	if q.push(outFrame{}) {
		t.Fatal("the replay's room outlived it")
	}
}
