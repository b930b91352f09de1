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
type direction struct {
	buf         []byte
	off         int
	writeClosed bool // the writer closed its side: EOF once drained
	readClosed  bool // the reader stopped reading: writes fail

	bytes, writes uint64
}

func (d *direction) pending() int { return len(d.buf) - d.off }

func (d *direction) discard() {
	d.buf, d.off = nil, 0
}

// conn is one stream between two nodes. One mutex and one condition guard
// both directions; every state change broadcasts, and at most four
// goroutines (a reader and a writer per end) wait on it.
type conn struct {
	net  *Network
	link *link
	max  int // capacity of each direction

	mu       sync.Mutex
	cond     sync.Cond
	dirs     [2]direction // dirs[s] carries what side s writes
	closed   [2]bool      // side s called Close (or FullClose succeeded)
	isReset  bool
	released bool // reset, or closed by both ends: off the link
}

func newConn(n *Network, l *link) *conn {
	c := &conn{net: n, link: l, max: n.opts.bufferSize}
	c.cond.L = &c.mu
	return c
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
	return true
}

// closeLocked closes side s: its writes end (the remote reads EOF once it
// drained them) and it stops reading (the remote's writes fail).
func (c *conn) closeLocked(s int) bool {
	c.closed[s] = true
	c.dirs[s].writeClosed = true
	c.dirs[1-s].readClosed = true
	c.dirs[1-s].discard()
	c.cond.Broadcast()
	return c.releaseLocked()
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
		if d.off > 0 && len(d.buf)+k > cap(d.buf) {
			d.buf = d.buf[:copy(d.buf, d.buf[d.off:])]
			d.off = 0
		}
		d.buf = append(d.buf, p[n:n+k]...)
		n += k
		d.bytes += uint64(k)
		c.net.bytes.Add(uint64(k))
		c.cond.Broadcast()
	}
}

func (c *conn) read(s int, p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()

	d := &c.dirs[1-s]
	for {
		switch {
		case c.isReset:
			return 0, fmt.Errorf("read: %w", ErrStreamReset)
		case c.closed[s]:
			return 0, fmt.Errorf("read: %w", ErrStreamClosed)
		case len(p) == 0:
			return 0, nil
		case d.pending() > 0:
			n := copy(p, d.buf[d.off:])
			d.off += n
			if d.off == len(d.buf) {
				d.buf, d.off = d.buf[:0], 0
			}
			c.cond.Broadcast()
			return n, nil
		case d.writeClosed:
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
	c.dirs[s].writeClosed = true
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
		case in.writeClosed:
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

// DirectionStats counts what one end of a stream wrote.
type DirectionStats struct {
	Bytes  uint64
	Writes uint64 // Write calls that moved at least one byte
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
		Out: DirectionStats{Bytes: out.bytes, Writes: out.writes},
		In:  DirectionStats{Bytes: in.bytes, Writes: in.writes},
	}
}
