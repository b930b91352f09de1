// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package owned gives goroutines an owner that waits for them.
package owned

import (
	"sync"
	"time"
)

// Group owns goroutines: Go starts one, Track registers the caller, and
// once Close is called neither does anything more. The zero value is ready.
type Group struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// Go runs f on a goroutine the group owns; false, without running f, once
// the group is closed.
func (g *Group) Go(f func()) bool {
	if !g.Track() {
		return false
	}
	go func() {
		defer g.Done()
		f()
	}()
	return true
}

// Track registers the calling goroutine, which must call Done; false once
// the group is closed.
func (g *Group) Track() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

// Done ends what Track registered.
func (g *Group) Done() { g.wg.Done() }

// Close stops the group from starting anything more; false if it was
// closed already.
func (g *Group) Close() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.closed = true
	return true
}

// Closed reports whether Close was called.
func (g *Group) Closed() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.closed
}

// Wait waits for the group's goroutines, at most d; it reports whether
// they all ended.
func (g *Group) Wait(d time.Duration) bool { return Wait(&g.wg, d) }

// Wait waits for wg, at most d; it reports whether wg's count reached zero.
func Wait(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
