// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest

import (
	"context"
	"sync"
)

// linkKey identifies the link between two nodes regardless of who dialed.
type linkKey struct{ lo, hi string }

func keyOf(a, b *Node) linkKey {
	x, y := a.overlay.ByteString(), b.overlay.ByteString()
	if x > y {
		x, y = y, x
	}
	return linkKey{lo: x, hi: y}
}

// link is the connection between two nodes: the streams opened over it and
// the context their handlers run on. Per-link properties (latency,
// bandwidth, loss, partitions) belong here.
type link struct {
	key    linkKey
	a, b   *Node // a dialed b
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	streams map[*conn]struct{}
}

func newLink(parent context.Context, a, b *Node) *link {
	ctx, cancel := context.WithCancel(parent)
	return &link{
		key:     keyOf(a, b),
		a:       a,
		b:       b,
		ctx:     ctx,
		cancel:  cancel,
		streams: make(map[*conn]struct{}),
	}
}

func (l *link) other(nd *Node) *Node {
	if nd == l.a {
		return l.b
	}
	return l.a
}

// open registers c on the link and runs start while the link is known to be
// up, so that nothing starts on a link that close has already torn down. It
// reports false if the link is closed.
func (l *link) open(c *conn, start func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.closed {
		return false
	}
	l.streams[c] = struct{}{}
	start()
	return true
}

// remove forgets a stream that was reset or closed by both ends.
func (l *link) remove(c *conn) {
	l.mu.Lock()
	delete(l.streams, c)
	l.mu.Unlock()
}

// close cancels the handlers' context and resets every stream on the link.
func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	streams := l.streams
	l.streams = nil
	l.mu.Unlock()

	l.cancel()
	for c := range streams {
		c.reset()
	}
}
