// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// peerStream is one BPS stream after its Join and Ack, in either direction:
// a child's stream at this node (a broker's member) or this node's stream to
// a parent (a subscription, a publisher). It owns the codec the stream
// speaks, one bounded queue of frames and the one writer that drains it;
// kill and closeOnce end it from outside, once.
//
// The writer runs on demand, in both directions: queueing a frame (push on
// a parent stream, offer on a child's) starts it on a goroutine owned by the
// Service when none is running, and it returns once the queue is empty — a
// stream writes in bursts (an update and its fan-out, a claim), and an idle
// stream costs its reader alone. A child's stream is made with its writer
// held by its handler, which writes the Ack first and then lets the queue
// start writers (serve); the handler waits for the last writer before it
// returns (stopWriter).
type peerStream struct {
	stream       p2p.Stream
	peer         swarm.Address // the other end
	codec        codec
	queue        frameQueue    // under wmu
	writeTimeout time.Duration // bounds one write; a stalled write kills the stream
	endGrace     time.Duration // how long the peer may keep its side open after the end

	quit   chan struct{} // closed by kill or closeOnce
	once   sync.Once
	reason error // why kill was called; read after quit is closed

	told     atomic.Uint64 // service index + 1 of the latest service SOC written to the stream
	toldAt   atomic.Int64  // when told was last moved (unix nanoseconds): a revocation's grace runs from it
	ending   atomic.Bool   // the writer took the cohort's end: it closes our side
	endTimer *time.Timer   // set by the writer before it returns: resets a peer that stays

	wmu     sync.Mutex // guards the on-demand writer's state below, and pushes
	writing bool       // a writer runs (or a child's handler holds the role)
	// A child's stream: start runs a writer on a goroutine owned by the
	// Service (nil on a parent stream, whose push is given one); over: the
	// writer took the stream's last frame (its end, or a failed write), or
	// the handler stopped the writers, and none starts again; werr: the
	// failed write's error; wdone: closed when the running writer returns.
	start func(func()) bool
	over  bool
	werr  error
	wdone chan struct{}

	// meter, if set, charges for depth on bee's accounting (pricing.go):
	// the writer prepares the charge of the Messages of a batch before
	// writing it and applies it after. Set once, when the stream's reader
	// starts; a parent stream's on-demand writer may already run.
	meter atomic.Pointer[meter]
	// rin: at a parent, the deliveries written and acknowledged by the
	// child's receipts (receipt.go).
	rin receiptIn
}

func newPeerStream(stream p2p.Stream, peer swarm.Address, c codec, o *Options) peerStream {
	return peerStream{stream: stream, peer: peer, codec: c, queue: frameQueue{max: o.QueueLen},
		writeTimeout: o.WriteTimeout, endGrace: o.EndGrace, quit: make(chan struct{}), rin: receiptIn{wake: make(chan struct{}, 1)}}
}

// outFrame is one frame queued to a stream. b is a bare frame, encoded
// once for every stream it is queued to; the stream's codec puts it in the
// envelope where the stream negotiated one. svc is the service index + 1 of
// a service SOC, 0 otherwise. end: the cohort ended; the writer writes b, if
// any, then closes the stream. done, if set, is told the write's outcome.
// replay: a delivery sent again to a child that asked (replay.go), queued
// beside the stream's QueueLen, not in it.
type outFrame struct {
	b      []byte
	svc    uint64
	done   chan error
	kind   frameKind
	end    bool
	replay bool
	free   bool   // never charged: the root's heartbeat (heartbeat.go)
	acks   uint32 // a receipt: the deliveries it adds, charged once it is written (receipt.go)
} // 48 bytes: a queue holds Options.QueueLen of them, and at most replayFrames replayed

// frameQueue is a stream's queue: at most max frames, oldest first, in a
// ring that grows as frames are queued and is let go when it empties (one
// of at most queueKeep slots is kept, for the next frames): a stream that
// is idle, as most of a large tree's are, holds no queue. Frames of a
// replay (replay.go) are queued beside the max, at most replayFrames of
// them (spare: how many are queued), so that a replay of a cut-off child's
// last seconds leaves the live deliveries after it their whole queue. Its
// stream's wmu guards it.
type frameQueue struct {
	ring    []outFrame
	head, n int
	max     int
	spare   int
}

// queueKeep is the largest ring an empty queue keeps: a relay's steady
// fan-out queues a frame or two to a stream at a time.
const queueKeep = 4

// push queues f; false if the queue holds max frames besides the replayed
// ones, or f is replayed and replayFrames replayed ones are queued.
func (q *frameQueue) push(f outFrame) bool {
	if f.replay {
		if q.spare >= replayFrames {
			return false
		}
		q.spare++
	} else if q.n >= q.max+q.spare {
		return false
	}
	if q.n == len(q.ring) {
		ring := make([]outFrame, min(q.max+q.spare, max(2, 2*len(q.ring))))
		k := copy(ring, q.ring[q.head:])
		copy(ring[k:], q.ring[:q.head])
		q.ring, q.head = ring, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = f
	q.n++
	return true
}

// pop takes the oldest frame; false if there is none.
func (q *frameQueue) pop() (outFrame, bool) {
	if q.n == 0 {
		return outFrame{}, false
	}
	f := q.ring[q.head]
	q.ring[q.head] = outFrame{} // the queue holds no frame it gave
	if f.replay {
		q.spare--
	}
	q.head = (q.head + 1) % len(q.ring)
	if q.n--; q.n == 0 {
		q.head = 0
		if len(q.ring) > queueKeep {
			q.ring = nil
		}
	}
	return f, true
}

// written reports whether the writer has told f's outcome, and the outcome.
func (f outFrame) written() (done bool, err error) {
	select {
	case err := <-f.done:
		return true, err
	default:
		return false, nil
	}
}

// kill ends the stream from outside its handler or reader: the reset
// unblocks its reader and writer, and its owner learns reason. It reports
// whether this call ended the stream (false: it was already over), so that
// what ends a stream is counted once however often it is found.
func (ps *peerStream) kill(reason error) bool {
	ended := false
	ps.once.Do(func() {
		ended = true
		ps.reason = reason
		close(ps.quit)
		_ = ps.stream.Reset()
	})
	return ended
}

// closeOnce closes our side of the stream cleanly, unless it was already
// ended; the peer reads EOF after what was written.
func (ps *peerStream) closeOnce() {
	ps.once.Do(func() {
		close(ps.quit)
		_ = ps.stream.Close()
	})
}

// watchdog bounds each write of one writer to the stream's writeTimeout
// without a timer operation per write: a write records when it started,
// and the one timer, armed by the first write that finds it disarmed, fires
// at the latest writeTimeout after the write in progress began. Finding a
// write that has run writeTimeout, it kills the stream; finding a younger
// one, it re-arms for when that one is due; finding none, it disarms, so an
// idle stream holds no timer.
//
// The timer is made by the first write and only ever re-armed after it
// fired: a timer moved while it is pending costs a Go runtime a pass over
// every timer of its heap when the old time comes (in a synctest bubble,
// every timer of the bubble), so a watchdog never moves one.
type watchdog struct {
	ps       *peerStream
	tmu      sync.Mutex  // guards t: fire may run before AfterFunc has returned
	t        *time.Timer // nil until the first write arms it
	epoch    time.Time   // makes now monotonic and never 0
	armed    atomic.Bool
	start    atomic.Int64 // when the write in progress began (now); 0: none
	timedOut atomic.Bool  // the watchdog killed the stream
}

// writeTimer is the watchdog of one writer; Stop it when the writer returns.
func (ps *peerStream) writeTimer() *watchdog {
	return &watchdog{ps: ps, epoch: time.Now()}
}

func (w *watchdog) now() int64 { return int64(time.Since(w.epoch)) + 1 }

// fire runs on the timer's goroutine.
func (w *watchdog) fire() {
	timeout := int64(w.ps.writeTimeout)
	for {
		start := w.start.Load()
		if start == 0 {
			w.armed.Store(false)
			// A write that began before the store may have seen the
			// timer armed: look again, and re-arm if no write did.
			if w.start.Load() == 0 || !w.armed.CompareAndSwap(false, true) {
				return
			}
			continue
		}
		if left := start + timeout - w.now(); left > 0 {
			w.tmu.Lock()
			w.t.Reset(time.Duration(left)) // it fired: not pending
			w.tmu.Unlock()
			return
		}
		w.timedOut.Store(true)
		w.ps.kill(errWriteTimeout)
		return
	}
}

// Stop disarms the watchdog for good: its writer has returned.
func (w *watchdog) Stop() {
	w.tmu.Lock()
	defer w.tmu.Unlock()
	if w.t != nil {
		w.t.Stop()
	}
}

// write writes b, the write bounded by w.
func (ps *peerStream) write(w *watchdog, b []byte) error {
	w.start.Store(w.now())
	if !w.armed.Load() && w.armed.CompareAndSwap(false, true) {
		// Disarmed: the timer is new, or it fired and is not pending.
		w.tmu.Lock()
		if w.t != nil {
			w.t.Reset(ps.writeTimeout)
		} else {
			w.t = time.AfterFunc(ps.writeTimeout, w.fire)
		}
		w.tmu.Unlock()
	}
	_, err := ps.stream.Write(b)
	w.start.Store(0)
	if err != nil && w.timedOut.Load() {
		return fmt.Errorf("%w after %s: %w", context.DeadlineExceeded, ps.writeTimeout, err)
	}
	return err
}

// Batches: a writer that wakes to a frame takes, without waiting, the
// frames queued behind it too, and writes them all in one write — one
// syscall (and one yamux frame) instead of one each when a backlog builds,
// as at a broker whose fan-out lags its publishers. A batch is bounded in
// frames and in bytes; one frame alone is written as it is, uncopied.
const (
	maxBatchFrames = 32
	maxBatchBytes  = 32 << 10 // one frame more at most
)

// batchBufs are the buffers batches are copied into, held only for a write:
// an idle stream holds none.
var batchBufs = sync.Pool{New: func() any {
	b := make([]byte, 0, maxBatchBytes+MaxFrameSize)
	return &b
}}

// batch is the frames one write carries.
type batch struct {
	frames [maxBatchFrames]outFrame
	n      int
}

// gather takes first, and after it what is queued, until the batch is full
// or holds the cohort's end; it never waits.
func (ps *peerStream) gather(bt *batch, first outFrame) {
	bt.frames[0], bt.n = first, 1
	size := len(first.b)
	// A priced stream's batch holds at most what its ledger may hold
	// unapplied (ledger.go, meter.batchFrames): a debtor is cut at the
	// delivery that passed bee's limit, however the writer batched.
	m := ps.meter.Load()
	most, priced := m.batchFrames(), 0
	if ps.receipted(m) {
		// No more than the window and the child's debt leave room for
		// (receipt.go), as far as the ledger knows without asking bee:
		// a debtor gets exactly what its bound allows however the writer
		// batched.
		most = max(1, min(most, ps.room(m)))
	}
	if pricedOut(&first) {
		priced++
	}
	for !bt.frames[bt.n-1].end && bt.n < maxBatchFrames && size < maxBatchBytes && priced < most {
		f, ok := ps.queue.pop()
		if !ok {
			return
		}
		bt.frames[bt.n] = f
		bt.n++
		size += len(f.b)
		if pricedOut(&f) {
			priced++
		}
	}
}

// put writes one frame as putBatch writes a batch.
func (ps *peerStream) put(t *watchdog, f outFrame) (last bool, err error) {
	bt := batch{n: 1}
	bt.frames[0] = f
	return ps.putBatch(t, &bt)
}

// putBatch writes a batch of queued frames in the stream's codec, in one write.
// It reports whether the stream is over for the writer: the write failed
// (the stream is killed), or the batch ended with the cohort's end (our
// side is closed).
func (ps *peerStream) putBatch(t *watchdog, bt *batch) (last bool, err error) {
	frames := bt.frames[:bt.n]
	end := frames[len(frames)-1].end
	if end {
		ps.ending.Store(true)
	}
	m := ps.meter.Load()
	var charge accounting.Action
	var price uint64
	switch {
	case ps.receipted(m):
		// Deliveries are charged by the child's receipts (receipt.go):
		// the writer waits for room in the window and the child's debt.
		if n := pricedIn(m, frames); n > 0 {
			if err = ps.awaitRoom(m, n); err != nil {
				return ps.failBatch(frames, err)
			}
		}
	case m != nil:
		if charge, price, err = m.prepareWrite(pricedIn(m, frames)); err != nil {
			return ps.failBatch(frames, err)
		}
		fallthrough
	case ps.codec == codecEnvelope:
		// What a receipt may acknowledge at most: every delivery written.
		ps.rin.sent.Add(uint64(broadcasts(frames)))
	}
	err = ps.writeFrames(t, frames)
	if charge != nil {
		if err != nil {
			charge.Cleanup()
		} else if err = m.apply(charge, price); err != nil {
			return ps.failBatch(frames, err)
		}
	}
	if err == nil && m != nil && !m.l.parent {
		if err = m.receipted(receiptsIn(frames)); err != nil {
			return ps.failBatch(frames, err)
		}
	}
	ps.written(frames, err)
	if err != nil {
		ps.kill(err)
		return true, fmt.Errorf("write delivery: %w", err)
	}
	if end {
		ps.endTimer = time.AfterFunc(ps.endGrace, func() { ps.kill(errEndGrace) })
		if _, err := closeWrite(ps.stream); err != nil {
			ps.kill(err)
			return true, fmt.Errorf("close at the end: %w", err)
		}
		return true, nil
	}
	return false, nil
}

// receiptsIn is what the receipts of a batch add (receipt.go).
func receiptsIn(frames []outFrame) (n uint64) {
	for i := range frames {
		n += uint64(frames[i].acks)
	}
	return n
}

// broadcasts counts the deliveries (Broadcasts) of a batch.
func broadcasts(frames []outFrame) (n int) {
	for i := range frames {
		if pricedOut(&frames[i]) {
			n++
		}
	}
	return n
}

// pricedIn counts the frames of a batch that m charges for (ledger.go,
// meter.pricedWrite: a delivery once per stream).
func pricedIn(m *meter, frames []outFrame) (priced int) {
	for i := range frames {
		if m.pricedWrite(&frames[i]) {
			priced++
		}
	}
	return priced
}

// writeFrames encodes frames in the stream's codec and writes them in one
// write; a batch of more than one frame is assembled in a pooled buffer.
func (ps *peerStream) writeFrames(t *watchdog, frames []outFrame) error {
	var b []byte
	var buf *[]byte
	for _, f := range frames {
		switch {
		case f.b == nil:
		case b == nil && buf == nil:
			b = ps.codec.out(f)
		default:
			if buf == nil {
				buf = batchBufs.Get().(*[]byte)
				b = append((*buf)[:0], b...)
			}
			b = append(b, ps.codec.out(f)...)
		}
	}
	var err error
	if b != nil {
		err = ps.write(t, b)
	}
	if buf != nil {
		*buf = b[:0]
		batchBufs.Put(buf)
	}
	return err
}

// written tells each frame of a written batch how its write went (err),
// records the service update the peer was told, and lets the frames go:
// the batch holds no frame past its write.
func (ps *peerStream) written(frames []outFrame, err error) {
	for i := range frames {
		f := &frames[i]
		if f.b != nil && f.done != nil {
			f.done <- err
		}
		if err == nil && f.svc > 0 {
			ps.toldAt.Store(time.Now().UnixNano())
			ps.told.Store(f.svc)
		}
		*f = outFrame{}
	}
}

// failBatch ends the stream with err, which bee's accounting gave for the
// batch's charge: every frame of the batch is told err, as a failed write.
func (ps *peerStream) failBatch(frames []outFrame, err error) (bool, error) {
	for i := range frames {
		if f := &frames[i]; f.b != nil && f.done != nil {
			f.done <- err
		}
		frames[i] = outFrame{}
	}
	ps.kill(err)
	return true, err
}

// enqueue queues f without blocking; false if the queue is full. The
// caller holds wmu.
func (ps *peerStream) enqueue(f outFrame) bool {
	return ps.queue.push(f)
}

// offer queues f without blocking, for a fan-out that must never wait on
// one stream, and on a child's stream starts its writer if none is running;
// false if the queue is full (the caller resets the stream).
func (ps *peerStream) offer(f outFrame) bool {
	ps.wmu.Lock()
	defer ps.wmu.Unlock()
	if !ps.enqueue(f) {
		return false
	}
	if ps.start != nil {
		ps.wakeLocked(ps.start)
	}
	return true
}

// push queues f on a parent stream and starts its on-demand writer if none
// is running; false if the queue is full or the service is closed.
func (ps *peerStream) push(s *Service, f outFrame) bool {
	ps.wmu.Lock()
	defer ps.wmu.Unlock()
	if !ps.enqueue(f) {
		return false
	}
	return ps.wakeLocked(s.goOwned)
}

// wakeLocked starts a writer with start unless one runs or the stream is
// over; false if start could not (the service is closing). The caller holds
// wmu.
func (ps *peerStream) wakeLocked(start func(func()) bool) bool {
	if ps.writing || ps.over {
		return true
	}
	ps.writing = true
	if ps.start != nil {
		ps.wdone = make(chan struct{})
	}
	if !start(ps.drain) {
		ps.idleLocked()
		return false
	}
	return true
}

// idleLocked records that no writer runs. The caller holds wmu.
func (ps *peerStream) idleLocked() {
	ps.writing = false
	if ps.wdone != nil {
		close(ps.wdone)
		ps.wdone = nil
	}
}

// drain is the on-demand writer: it writes what is queued, in batches, and
// returns when the queue is empty or the stream is over. The cohort's end
// is a child's stream's last frame: the writer writes END_OF_STREAM, if the
// stream receives it, and closes our side.
func (ps *peerStream) drain() {
	t := ps.writeTimer()
	defer t.Stop()
	bt := new(batch)
	for {
		ps.wmu.Lock()
		select {
		case <-ps.quit:
			if ps.start != nil { // a child's stream ended: its queue is dropped
				ps.over = true
				ps.idleLocked()
				ps.wmu.Unlock()
				return
			}
		default:
		}
		f, ok := ps.queue.pop()
		if !ok {
			ps.idleLocked()
			ps.wmu.Unlock()
			return
		}
		ps.gather(bt, f)
		ps.wmu.Unlock()
		if last, err := ps.putBatch(t, bt); last {
			ps.wmu.Lock()
			ps.over, ps.werr = true, err // the stream is over: nothing is written again
			ps.idleLocked()
			ps.wmu.Unlock()
			return
		}
	}
}

// heldWriter makes ps a child's stream whose writers start takes, the
// writer role held by its handler until it lets go (releaseWriter).
func (ps *peerStream) heldWriter(start func(func()) bool) {
	ps.start, ps.writing = start, true
}

// releaseWriter is the handler letting go of the writer role once it has
// written the Ack: what was queued meanwhile starts a writer. False if
// none could start (the service is closing).
func (ps *peerStream) releaseWriter() bool {
	ps.wmu.Lock()
	defer ps.wmu.Unlock()
	ps.writing = false
	if ps.queue.n == 0 {
		return true
	}
	return ps.wakeLocked(ps.start)
}

// stopWriter stops writers from starting on a child's stream and waits for
// the one running, if any; it returns that writer's error, if its write
// failed.
func (ps *peerStream) stopWriter() error {
	ps.wmu.Lock()
	ps.over = true
	done := ps.wdone
	ps.wmu.Unlock()
	if done != nil {
		<-done
	}
	ps.wmu.Lock()
	defer ps.wmu.Unlock()
	return ps.werr
}

// send writes f on a parent stream and waits until it is written: it
// returns the write's outcome, ErrClosed if the stream ends first, and
// ctx's error (resetting the stream, which ends a write in progress) if ctx
// ends first.
func (ps *peerStream) send(ctx context.Context, s *Service, f outFrame) error {
	f.done = make(chan error, 1)
	if !ps.push(s, f) {
		return fmt.Errorf("bps: stream to %s: outbound queue full or service closed", ps.peer)
	}
	select {
	case err := <-f.done:
		return err
	case <-ps.quit:
		if done, err := f.written(); done {
			return err
		}
		return ErrClosed
	case <-ctx.Done():
		if done, err := f.written(); done {
			return err
		}
		ps.kill(context.Cause(ctx))
		return ctx.Err()
	case <-s.ctx.Done():
		ps.kill(errServiceClosed)
		return ErrClosed
	}
}

// clientStream is a stream from this node to a parent — the broker a
// subscription or a publisher joined — with its reader goroutine and its
// end-of-life signalling.
type clientStream struct {
	peerStream
	s       *Service
	spec    *Spec
	started time.Time

	stated  uint32 // the parent's depth, as its Ack stated it; never written after creation
	attests bool   // the parent takes forwarded claims (attest.go); never written after creation

	done  chan struct{} // closed when the reader has ended
	ended chan struct{} // closed once err is final: before onEnd, so that what onEnd closes (C) tells Err is valid
	err   error         // why it ended; read after ended

	rout receiptOut // on a multihop stream: what this node took, and its receipts (receipt.go)

	leaving atomic.Bool                // this node ended the stream gracefully (closeOnce): the reader drops what it reads
	leaveT  atomic.Pointer[time.Timer] // resets a stream whose parent has not ended it leaveWait after closeOnce
}

func newClientStream(s *Service, broker swarm.Address, sp *Spec, stream p2p.Stream, stated uint32) clientStream {
	if s.pricing != nil {
		s.pricing.await(broker) // before the stream is anyone's: pricing.go
	}
	return clientStream{peerStream: newPeerStream(stream, broker, codecBare, &s.opts),
		s: s, spec: sp, started: time.Now(), stated: stated, done: make(chan struct{}), ended: make(chan struct{})}
}

func (cs *clientStream) abort() { cs.kill(nil) }

// leaveWait bounds a graceful end at the node that ends it (closeOnce):
// how long the parent has to read the final receipt and end its side
// before the stream is reset.
const leaveWait = 2 * time.Second

// closeOnce ends the stream gracefully from this side — the node leaves
// its parent: a subscription's Close or move, a publisher's Close — unless
// it was already ended (docs/protocol.md, "Prices", the end of a stream).
// The writer writes what is queued, then a receipt of every delivery taken
// and untold, then closes our side; the reader reads on, and drops what
// the parent still sends, until the parent, which reads every receipt
// before our EOF, ends its own side. Reading on is what keeps the parent's
// writes from failing, and the parent from resetting the stream, with the
// last receipt unread. At most leaveWait, then the stream is reset. It
// never blocks: a subscription calls it under its lock.
func (cs *clientStream) closeOnce() {
	cs.once.Do(func() {
		cs.leaving.Store(true)
		close(cs.quit)
		cs.leaveT.Store(time.AfterFunc(leaveWait, func() { _ = cs.stream.Reset() }))
		if !cs.push(cs.s, cs.rout.final()) { // the queue is full, or the service closing
			_ = cs.stream.Close()
		}
	})
}

// kill ends the stream as peerStream.kill does, and resets a stream this
// node is leaving (closeOnce), which is already over for it.
func (cs *clientStream) kill(reason error) bool {
	if cs.peerStream.kill(reason) {
		return true
	}
	if cs.leaving.Load() {
		_ = cs.stream.Reset()
	}
	return false
}

// endReceipt writes, on a stream whose parent ended it (END_OF_STREAM), a
// receipt of every delivery taken and untold, END_OF_STREAM included, and
// waits until it is written, at most leaveWait, before the reader closes
// the stream: the parent reads it before our EOF. When nothing is untold
// — the END_OF_STREAM delivery made a receipt due, queued as the reader
// took it — it waits for that receipt, the last queued, all the same: a
// close before the writer wrote it lost it, the child and its parent
// charging neither the deliveries it told (TestPricingEndOfStream, about
// 1 run in 100 under -race).
func (cs *clientStream) endReceipt() {
	f := cs.rout.final()
	done := cs.rout.lastSent()
	if f.b != nil {
		f.end, f.done = false, make(chan error, 1)
		if !cs.push(cs.s, f) {
			return
		}
		done = f.done
	}
	if done == nil {
		return
	}
	t := time.NewTimer(leaveWait)
	defer t.Stop()
	select {
	case <-done:
	case <-cs.quit:
	case <-t.C:
	}
}

// closeWait bounds how long a clean close waits for the broker's side.
const closeWait = 5 * time.Second

// closeClean ends the stream cleanly: our side closes, the broker sees EOF
// and closes its own. It waits for the reader to end, at most closeWait,
// then resets.
func (cs *clientStream) closeClean() error {
	cs.closeOnce()
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-cs.done:
		return nil
	case <-t.C:
		_ = cs.stream.Reset()
		<-cs.done
		return fmt.Errorf("bps: close: broker did not end the stream within %s", closeWait)
	}
}

// Done is closed when the stream has ended.
func (cs *clientStream) Done() <-chan struct{} { return cs.done }

// Err is why the stream ended: nil if it was closed by us or ended cleanly by
// the broker. Valid once C is closed, and after Done is closed.
func (cs *clientStream) Err() error {
	select {
	case <-cs.ended:
		return cs.err
	default:
		return nil
	}
}

// Broker is the overlay of the broker this stream is attached to.
func (cs *clientStream) Broker() swarm.Address { return cs.peer }

// Spec is the cohort this stream joined.
func (cs *clientStream) Spec() *Spec { return cs.spec }

// run records the stream as a parent of this node in its cohort (the tree)
// and starts the reader on a goroutine owned by the Service; read handles
// one frame, and an error ends the stream.
func (cs *clientStream) run(read func(fr *frameReader) error, fr *frameReader, onEnd func()) error {
	s := cs.s
	s.priceParent(cs, fr)
	s.reg.addParent(cs)
	ok := s.goOwned(func() {
		defer close(cs.done)
		// The tree forgets the parent before its loss is handled: onEnd may
		// end the subscription, whose Close has then returned, and the
		// node's position must not outlive it — nor a charge it held:
		// the meter applies what it holds before onEnd.
		defer onEnd()
		defer func() { cs.meter.Load().done() }()
		defer cs.rout.stop()
		defer func() {
			if t := cs.leaveT.Load(); t != nil {
				t.Stop()
			}
		}()
		defer close(cs.ended)
		defer s.reg.removeParent(cs)
		var err error
		for err == nil {
			if cs.leaving.Load() {
				_, err = fr.readRaw() // we ended it: dropped until the parent's end
				continue
			}
			if err = read(fr); err != nil && cs.leaving.Load() {
				// A frame read as we left failed (the subscription
				// closed): read on all the same; a stream's failure is
				// read again.
				err = nil
			}
		}
		select {
		case <-cs.quit:
			if cs.reason == nil {
				cs.err = nil // we ended it
				_ = cs.stream.Close()
				break
			}
			cs.err = err // a write failed, or a send's context ended
			if errors.Is(cs.reason, ErrUnpaid) {
				cs.err = cs.reason // bee's accounting refused a charge (pricing.go)
			}
			_ = cs.stream.Reset()
		default:
			if errors.Is(err, ErrEndOfStream) {
				cs.err = err
				cs.endReceipt()
				_ = cs.stream.Close()
				return
			}
			if errors.Is(err, io.EOF) {
				cs.err = nil
				_ = cs.stream.FullClose()
			} else {
				cs.err = s.blameParent(cs.peer, err)
				_ = cs.stream.Reset()
			}
		}
		s.streamEnded(cs.peer, cs.spec, cs.started, cs.err)
	})
	if !ok {
		cs.meter.Load().done()
		s.reg.removeParent(cs)
		_ = cs.stream.Reset()
		close(cs.ended)
		close(cs.done)
		return ErrClosed
	}
	return nil
}

// blameParent is the error that ends a parent stream whose reader failed
// with err: a violation — what the parent sent is provably wrong, as an
// invalid chunk — is counted and the parent blocklisted, through the
// streamer if it blocklists (bee's does), and becomes
// p2p.NewBlockPeerError as at a broker (unwind); any other err is itself.
func (s *Service) blameParent(peer swarm.Address, err error) error {
	var v *violation
	if !errors.As(err, &v) {
		return err
	}
	s.metrics.Violations.Inc()
	s.trace(Event{Kind: EventViolation, Peer: peer, Err: err})
	s.logger.Debug("bps: parent violated the protocol", "peer_address", peer, "error", err)
	if bl, ok := s.streamer.(p2p.Blocklister); ok {
		_ = bl.Blocklist(peer, s.opts.BlocklistDuration, err.Error())
	}
	return p2p.NewBlockPeerError(s.opts.BlocklistDuration, err)
}

// closeWrite closes stream for writing, the peer reading EOF after what was
// written, if the stream can half-close (bee's libp2p streams can); else it
// closes the stream whole. It reports whether it half-closed.
func closeWrite(stream p2p.Stream) (half bool, err error) {
	if cw, ok := stream.(interface{ CloseWrite() error }); ok {
		return true, cw.CloseWrite()
	}
	return false, stream.FullClose()
}

// withDeadline runs f, resetting stream if f has not returned within d or
// when ctx or the service ends first. p2p.Stream has no deadlines; a reset is
// how a blocked read or write is ended.
func (s *Service) withDeadline(ctx context.Context, stream p2p.Stream, d time.Duration, f func() error) error {
	t := time.AfterFunc(d, func() { _ = stream.Reset() })
	stopCtx := context.AfterFunc(ctx, func() { _ = stream.Reset() })
	stopSvc := context.AfterFunc(s.ctx, func() { _ = stream.Reset() })
	err := f()
	timedOut := !t.Stop()
	stopCtx()
	stopSvc()
	if err != nil && timedOut {
		return fmt.Errorf("%w after %s: %w", context.DeadlineExceeded, d, err)
	}
	return err
}
