// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
)

var errExpectedEOF = errors.New("streamtest: full close: expected EOF")

// Sides of a conn: the caller's end and the handler's end.
const (
	dialer   = 0
	listener = 1
)

// direction is one way of a conn: the bytes one end wrote and the other end
// has not read yet. buf[off:] is pending.
//
// On a link that delays (LinkConfig, partitions, an uplink) every write also
// leaves a mark: the link time at which its bytes become readable. Marks are
// in write order and their times never decrease, so the readable bytes are
// those before the first mark that is not due. On an ideal link no mark is
// made and every pending byte is readable.
type direction struct {
	buf         []byte
	off         int
	writeClosed bool      // the writer closed its side: EOF once drained
	eofAt       time.Time // link time the close reaches the reader; zero: at once
	readClosed  bool      // the reader stopped reading: writes fail

	marks    []mark
	head     int       // marks[head:] are not due yet
	lastAt   time.Time // the latest mark's time: later writes never overtake it
	consumed uint64    // bytes read so far

	bytes, writes, lost uint64
}

// minCompact is how many due marks may pile up before they are dropped.
const minCompact = 32

// mark says that the bytes from start (counted from the first byte ever
// written in the direction) become readable at link time at. charge: they
// arrive at at, and the reader's processor (CPU) has yet to take them in;
// at moves to when it has.
type mark struct {
	start  uint64
	at     time.Time
	charge bool
}

func (d *direction) pending() int { return len(d.buf) - d.off }

func (d *direction) discard() {
	d.release()
	d.marks, d.head = nil, 0
}

// bufs holds the buffers of drained directions (*[]byte, empty): a
// direction holds one only while bytes are pending in it, so that the
// streams of a large network that are idle hold none.
var bufs sync.Pool

// release gives d's buffer, drained or dropped, back to bufs.
func (d *direction) release() {
	if cap(d.buf) > 0 {
		b := d.buf[:0]
		bufs.Put(&b)
	}
	d.buf, d.off = nil, 0
}

// grow gives d, holding no buffer, one from bufs if there is one.
func (d *direction) grow() {
	if b, ok := bufs.Get().(*[]byte); ok {
		d.buf = *b
	}
}

// readable returns how many pending bytes may be read at link time now, and
// if none, the link time at which the next ones become readable. A write
// that arrived and is still to be charged to the reader's processor is
// charged now (take returns the link time it is taken in by); the writes
// behind it wait for it.
func (d *direction) readable(now time.Time, take func(p []byte) time.Time) (int, time.Time) {
	for d.head < len(d.marks) && !d.marks[d.head].at.After(now) {
		if m := &d.marks[d.head]; m.charge {
			m.charge = false
			end := d.bytes
			if d.head+1 < len(d.marks) {
				end = d.marks[d.head+1].start
			}
			lo := d.off + int(m.start-d.consumed)
			hi := d.off + int(end-d.consumed)
			if at := take(d.buf[lo:hi]); at.After(now) {
				m.at = at
				break
			}
		}
		d.head++
	}
	switch {
	case d.head == len(d.marks):
		d.marks, d.head = d.marks[:0], 0
		return d.pending(), time.Time{}
	case d.head >= minCompact && 2*d.head >= len(d.marks):
		// A steady stream always has marks in flight: drop the due ones
		// so that marks stays bounded by the bytes in flight.
		d.marks = d.marks[:copy(d.marks, d.marks[d.head:])]
		d.head = 0
	}
	m := d.marks[d.head]
	return int(m.start - d.consumed), m.at
}

// conn is one stream between two nodes. One mutex and one condition guard
// both directions; every state change broadcasts, and at most four
// goroutines (a reader and a writer per end) wait on it.
type conn struct {
	net   *Network
	link  *link
	max   int      // capacity of each direction
	nodes [2]*Node // nodes[s] is the node on side s
	flow  [2]int   // flow[s] is the link direction side s writes on

	mu       sync.Mutex
	cond     sync.Cond
	dirs     [2]direction // dirs[s] carries what side s writes
	closed   [2]bool      // side s called Close (or FullClose succeeded)
	isReset  bool
	released bool // reset, or closed by both ends: off the link

	// timer[s] wakes side s's reader waiting for a mark, made on first use;
	// timerAt[s] is when it fires, zero when it is not armed. One per side:
	// each side's marks come in order, so its timer is only ever armed
	// again after it fired, never moved while pending (which would cost
	// the runtime a pass over its whole timer heap: in a synctest bubble,
	// every timer of the bubble).
	timer   [2]*time.Timer
	timerAt [2]time.Time
}

func newConn(n *Network, l *link, dialer *Node) *conn {
	c := &conn{net: n, link: l, max: n.opts.bufferSize}
	c.nodes = [2]*Node{dialer, l.other(dialer)}
	c.flow = [2]int{l.flowFrom(dialer), 1 - l.flowFrom(dialer)}
	c.cond.L = &c.mu
	return c
}

// wake makes every waiter look at the stream again (a partition healed).
func (c *conn) wake() {
	c.mu.Lock()
	c.cond.Broadcast()
	c.mu.Unlock()
}

// wakeAtLocked arranges for side s's reader to be woken at link time at,
// which the link's offset turns into real time. One timer serves each side:
// it is moved earlier when needed, and whoever it wakes re-arms it for what
// is still ahead. The caller holds c.mu.
func (c *conn) wakeAtLocked(s int, at time.Time, offset time.Duration) {
	real := at.Add(offset)
	if !c.timerAt[s].IsZero() && !real.Before(c.timerAt[s]) {
		return
	}
	c.timerAt[s] = real
	d := time.Until(real)
	if c.timer[s] == nil {
		c.timer[s] = time.AfterFunc(d, func() { c.fire(s) })
		return
	}
	c.timer[s].Reset(d)
}

func (c *conn) fire(s int) {
	c.mu.Lock()
	c.timerAt[s] = time.Time{}
	c.cond.Broadcast()
	c.mu.Unlock()
}

// stopTimerLocked stops the timers of a stream that was released.
func (c *conn) stopTimerLocked() {
	for s, t := range c.timer {
		if t != nil {
			t.Stop()
			c.timerAt[s] = time.Time{}
		}
	}
}

// reset fails both directions on both ends. It is safe to call more than
// once and after the stream was released.
func (c *conn) reset() {
	c.mu.Lock()
	if c.released {
		c.mu.Unlock()
		return
	}
	c.isReset = true
	c.released = true
	c.dirs[dialer].discard()
	c.dirs[listener].discard()
	c.stopTimerLocked()
	c.cond.Broadcast()
	c.mu.Unlock()

	c.net.resets.Add(1)
	c.link.remove(c)
}

// releaseLocked takes a stream that both ends closed off its link. It must be
// called with c.mu held; it reports whether the caller has to remove c from
// the link after unlocking.
func (c *conn) releaseLocked() bool {
	if c.released || !c.closed[dialer] || !c.closed[listener] {
		return false
	}
	c.released = true
	c.stopTimerLocked()
	return true
}

// closeLocked closes side s: its writes end (the remote reads EOF once it
// drained them) and it stops reading (the remote's writes fail).
func (c *conn) closeLocked(s int) bool {
	c.closed[s] = true
	c.shutWriteLocked(s)
	c.dirs[1-s].readClosed = true
	c.dirs[1-s].discard()
	c.cond.Broadcast()
	return c.releaseLocked()
}

// shutWriteLocked closes side s for writing: the reader sees EOF once it has
// read everything, and on a link that delays, not before the close has
// crossed it.
func (c *conn) shutWriteLocked(s int) {
	d := &c.dirs[s]
	if d.writeClosed {
		return
	}
	d.writeClosed = true
	if c.link.timed.Load() || d.head < len(d.marks) {
		d.eofAt = maxTime(c.link.eofAt(), d.lastAt)
	}
}

func (c *conn) write(s int, p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	d := &c.dirs[s]
	n := 0
	defer func() {
		if n > 0 {
			d.writes++
			c.net.frames.Add(1)
		}
	}()
	for {
		switch {
		case c.isReset:
			return n, fmt.Errorf("write: %w", ErrStreamReset)
		case c.closed[s] || d.writeClosed:
			return n, fmt.Errorf("write: %w", ErrStreamClosed)
		case d.readClosed:
			return n, fmt.Errorf("write: remote stopped reading: %w", ErrStreamClosed)
		case n == len(p):
			return n, nil
		}
		space := c.max - d.pending()
		if space == 0 {
			c.cond.Wait()
			continue
		}
		k := min(space, len(p)-n)
		if d.buf == nil {
			d.grow()
		}
		if d.off > 0 && len(d.buf)+k > cap(d.buf) {
			d.buf = d.buf[:copy(d.buf, d.buf[d.off:])]
			d.off = 0
		}
		if c.link.timed.Load() || c.nodes[s].shaped.Load() || d.head < len(d.marks) || c.nodes[s].cpu != nil || c.nodes[1-s].cpu != nil {
			c.stampLocked(s, p[n:n+k], n == 0)
		}
		d.buf = append(d.buf, p[n:n+k]...)
		n += k
		d.bytes += uint64(k)
		c.net.bytes.Add(uint64(k))
		c.cond.Broadcast()
	}
}

// stampLocked marks the bytes b side s is about to append with the link time
// they become readable at: after the writer's processor has served the
// write (first: b begins it), its uplink has sent them and the link has
// carried them. The caller holds c.mu.
func (c *conn) stampLocked(s int, b []byte, first bool) {
	d := &c.dirs[s]
	var extra time.Duration
	if first {
		extra = c.nodes[s].writeDelay(b)
	}
	at, lost := c.link.schedule(c.flow[s], b, extra+c.nodes[s].uplinkDelay(len(b)))
	at = maxTime(at, d.lastAt)
	d.lastAt = at
	d.marks = append(d.marks, mark{start: d.bytes, at: at, charge: c.nodes[1-s].cpu != nil})
	if lost {
		d.lost++
		c.net.lost.Add(1)
	}
}

// traffic returns what the stream carried in link direction dir.
func (c *conn) traffic(dir int) DirectionStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := dialer
	if c.flow[dialer] != dir {
		s = listener
	}
	d := &c.dirs[s]
	return DirectionStats{Bytes: d.bytes, Writes: d.writes, Lost: d.lost}
}

// availableLocked is how many bytes side s may read now, and whether the
// writer's close has reached it. If neither, it arms the timer for when
// something will have, unless a partition holds the link (its heal wakes
// everyone). The caller holds c.mu.
func (c *conn) availableLocked(s int) (n int, eof bool) {
	d := &c.dirs[1-s]
	if d.head == len(d.marks) && d.eofAt.IsZero() {
		return d.pending(), d.writeClosed && d.pending() == 0
	}
	now, offset, running := c.link.clock()
	n, next := d.readable(now, func(p []byte) time.Time {
		return c.take(s, p, offset)
	})
	if n > 0 {
		return n, false
	}
	if d.pending() == 0 && d.writeClosed {
		if !d.eofAt.After(now) {
			return 0, true
		}
		next = d.eofAt
	}
	if running && !next.IsZero() {
		c.wakeAtLocked(s, next, offset)
	}
	return 0, false
}

// take charges the write p that reached side s to its node's processor and
// returns the link time (offset turns it into real time) it is taken in by.
// A write that costs nothing still waits for the processor to be free: a
// copy of an update the node is checking is dropped once it has.
func (c *conn) take(s int, p []byte, offset time.Duration) time.Time {
	nd := c.nodes[s]
	return nd.cpu.occupy(time.Now(), p, nd.cpu.cost.ReadCost).Add(-offset)
}

// The errors of a read, made once: a reader waits in read for as long as
// its stream lives, and the less of its stack read's frame takes, the
// more of it the GC can give back.
var (
	errReadReset  = fmt.Errorf("read: %w", ErrStreamReset)
	errReadClosed = fmt.Errorf("read: %w", ErrStreamClosed)
)

func (c *conn) read(s int, p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	d := &c.dirs[1-s]
	for {
		switch {
		case c.isReset:
			return 0, errReadReset
		case c.closed[s]:
			return 0, errReadClosed
		case len(p) == 0:
			return 0, nil
		}
		avail, eof := c.availableLocked(s)
		switch {
		case avail > 0:
			n := copy(p[:min(len(p), avail)], d.buf[d.off:])
			d.off += n
			d.consumed += uint64(n)
			if d.off == len(d.buf) {
				d.release()
			}
			c.cond.Broadcast()
			return n, nil
		case eof:
			return 0, io.EOF
		}
		c.cond.Wait()
	}
}

func (c *conn) close(s int) error {
	c.mu.Lock()
	if c.closed[s] || c.isReset {
		c.mu.Unlock()
		return nil
	}
	release := c.closeLocked(s)
	c.mu.Unlock()

	if release {
		c.link.remove(c)
	}
	return nil
}

func (c *conn) closeWrite(s int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.isReset:
		return fmt.Errorf("close write: %w", ErrStreamReset)
	case c.closed[s]:
		return nil
	}
	c.shutWriteLocked(s)
	c.cond.Broadcast()
	return nil
}

// fullClose closes side s for writing and waits, at most the Network's full
// close timeout, to read the remote's EOF. Data instead of EOF, or no EOF in
// time, resets the stream, as bee's libp2p stream does.
func (c *conn) fullClose(s int) error {
	c.mu.Lock()
	if c.closed[s] {
		c.mu.Unlock()
		return nil
	}
	if c.isReset {
		c.mu.Unlock()
		return fmt.Errorf("full close: %w", ErrStreamReset)
	}
	c.shutWriteLocked(s)
	c.cond.Broadcast()

	timedOut := false
	t := time.AfterFunc(c.net.opts.fullCloseTimeout, func() {
		c.mu.Lock()
		timedOut = true
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer t.Stop()

	in := &c.dirs[1-s]
	for {
		switch {
		case c.isReset:
			c.mu.Unlock()
			return fmt.Errorf("full close: %w", ErrStreamReset)
		case in.pending() > 0:
			c.mu.Unlock()
			c.reset()
			return errExpectedEOF
		case in.writeClosed && c.eofLocked(s):
			release := c.closeLocked(s)
			c.mu.Unlock()
			if release {
				c.link.remove(c)
			}
			return nil
		case timedOut:
			c.mu.Unlock()
			c.reset()
			return fmt.Errorf("full close: waiting for EOF: %w", os.ErrDeadlineExceeded)
		}
		c.cond.Wait()
	}
}

// eofLocked reports whether the remote's close has reached side s, which has
// nothing left to read; if not, the timer is armed for when it will.
func (c *conn) eofLocked(s int) bool {
	_, eof := c.availableLocked(s)
	return eof
}

// DirectionStats counts what was written one way: by one end of a stream,
// over one direction of a link, or by or to a node.
type DirectionStats struct {
	Bytes  uint64
	Writes uint64 // Write calls that moved at least one byte
	Lost   uint64 // writes lost on the wire and retransmitted (LinkConfig.Loss)
}

// StreamStats counts both directions of a stream as seen from one end.
type StreamStats struct {
	Out DirectionStats // written by this end
	In  DirectionStats // written by the remote end
}

// Stream is one end of an in-memory stream. It implements p2p.Stream; its
// methods are safe for one reader and one writer goroutine plus Close,
// FullClose and Reset from any goroutine.
//
//   - Read blocks until data arrives; it returns io.EOF once the remote
//     closed its write side and everything it wrote was read.
//   - Write blocks while the direction's buffer is full; it returns only
//     when all of p was buffered or the stream failed.
//   - Close closes this end: its writes end (the remote reads io.EOF after
//     draining) and it stops reading (the remote's writes fail, data not yet
//     read is dropped). Later Reads and Writes on this end fail.
//   - CloseWrite closes the write side only (the remote reads io.EOF after
//     draining); this end still reads.
//   - FullClose closes the write side, waits for the remote's EOF, then
//     closes. If the remote writes instead, or does not close in time, the
//     stream is reset and an error returned.
//   - Reset fails every pending and future Read and Write on both ends with
//     an error wrapping ErrStreamReset (and network.ErrReset).
type Stream struct {
	c               *conn
	side            int
	headers         p2p.Headers
	responseHeaders p2p.Headers
}

var _ p2p.Stream = (*Stream)(nil)

// Read implements io.Reader.
func (s *Stream) Read(p []byte) (int, error) { return s.c.read(s.side, p) }

// Write implements io.Writer.
func (s *Stream) Write(p []byte) (int, error) { return s.c.write(s.side, p) }

// Close implements io.Closer.
func (s *Stream) Close() error { return s.c.close(s.side) }

// FullClose implements p2p.Stream.
func (s *Stream) FullClose() error { return s.c.fullClose(s.side) }

// CloseWrite closes this end for writing only, as a libp2p stream's
// CloseWrite (which bee's streams carry): the remote reads EOF once it has
// read what was written, and this end still reads.
func (s *Stream) CloseWrite() error { return s.c.closeWrite(s.side) }

// Reset implements p2p.Stream.
func (s *Stream) Reset() error {
	s.c.reset()
	return nil
}

// Headers returns, on the handler's end, the headers the caller sent and, on
// the caller's end, the headers the handler's Headler returned.
func (s *Stream) Headers() p2p.Headers { return s.headers }

// ResponseHeaders returns, on the handler's end, what its Headler returned.
// It is nil on the caller's end, as in bee.
func (s *Stream) ResponseHeaders() p2p.Headers { return s.responseHeaders }

// Stats returns the stream's counters as seen from this end.
func (s *Stream) Stats() StreamStats {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()

	out, in := &s.c.dirs[s.side], &s.c.dirs[1-s.side]
	return StreamStats{
		Out: DirectionStats{Bytes: out.bytes, Writes: out.writes, Lost: out.lost},
		In:  DirectionStats{Bytes: in.bytes, Writes: in.writes, Lost: in.lost},
	}
}
