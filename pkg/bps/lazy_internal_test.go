// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestLateness: the wait before an ask is the floor while the eager
// parent's frames come first, follows a steady lateness above it, and is
// capped at maxLazyWait however late they come.
func TestLateness(t *testing.T) {
	const floor = 100 * time.Millisecond
	var l lateness
	if w := l.wait(floor); w != floor {
		t.Fatalf("no sample: wait %s, want the floor %s", w, floor)
	}
	for range 32 {
		l.sample(-time.Millisecond) // the eager frame came first
	}
	if w := l.wait(floor); w != floor {
		t.Fatalf("eager first: wait %s, want the floor %s", w, floor)
	}
	for range 64 {
		l.sample(300 * time.Millisecond)
	}
	if w := l.wait(floor); w < 300*time.Millisecond || w > maxLazyWait {
		t.Fatalf("steadily 300 ms late: wait %s, want 300 ms to %s", w, maxLazyWait)
	}
	for range 8 {
		l.sample(time.Minute)
	}
	if w := l.wait(floor); w != maxLazyWait {
		t.Fatalf("a minute late: wait %s, want the cap %s", w, maxLazyWait)
	}
	if w := l.wait(time.Hour); w != time.Hour {
		t.Fatalf("a floor above the cap: wait %s, want the floor", w)
	}
}

// TestFrameKeyOf: the key an announcement names is the FrameKey of the
// Broadcast the fan-out encoded, what the child dedups by.
func TestFrameKeyOf(t *testing.T) {
	msg := &pb.Broadcast{Soc: bytes.Repeat([]byte{9}, 300), Kind: pb.Kind_DATA, Challenge: bytes.Repeat([]byte{7}, 32), Index: 5}
	if got, want := frameKeyOf(encodeFrame(msg)), FrameKey(msg); got != want {
		t.Fatalf("frameKeyOf %x, want %x", got, want)
	}
}

// TestLazyRingGrows: a lazy stream's ring holds as many slots as it made
// announcements, up to lazyRing, and then keeps the last lazyRing, each
// announcement q's frame at q % lazyRing.
func TestLazyRingGrows(t *testing.T) {
	lz := &lazyOut{lazy: true}
	frame := func(q int) []byte { return []byte{byte(q), byte(q >> 8)} }
	for q := range 3*lazyRing + 5 {
		var ann announcement
		ann.b = []byte{0} // the announcement itself is not what is tested
		lz.out(outFrame{b: frame(q)}, &ann)
		if want := min(q+1, lazyRing); len(lz.ring.s) != want {
			t.Fatalf("after %d announcements: %d slots, want %d", q+1, len(lz.ring.s), want)
		}
		for p := max(0, q+1-lazyRing); p <= q; p++ {
			if got := lz.ring.s[p%lazyRing].frame; !bytes.Equal(got, frame(p)) {
				t.Fatalf("after %d announcements: slot of %d holds %x", q+1, p, got)
			}
		}
	}
	if lz.next != 3*lazyRing+5 {
		t.Fatalf("next %d", lz.next)
	}
}

// TestLagWindowGrows: the lag window holds the deliveries taken, up to
// lagWindowSize, then the last lagWindowSize, evicting the oldest; find
// looks one up by its frame.
func TestLagWindowGrows(t *testing.T) {
	var w lagWindow
	key := func(i int) [32]byte { return [32]byte{byte(i), byte(i >> 8), 1} }
	for i := range 2*lagWindowSize + 3 {
		evicted := -1
		w.ring.put(lagEntry{addr: key(i)}, lagWindowSize, func(e *lagEntry) { evicted = int(e.addr[0]) | int(e.addr[1])<<8 })
		if want := i - lagWindowSize; evicted != want && (want >= 0 || evicted != -1) {
			t.Fatalf("adding %d evicted %d, want %d", i, evicted, max(want, -1))
		}
		if want := min(i+1, lagWindowSize); len(w.ring.s) != want {
			t.Fatalf("after %d: %d entries, want %d", i+1, len(w.ring.s), want)
		}
		for j := range i + 1 {
			e := w.find(key(j))
			if in := j > i-lagWindowSize; in != (e != nil) || (e != nil && e.addr != key(j)) {
				t.Fatalf("after %d: find(%d) = %v, in the window %v", i+1, j, e, in)
			}
		}
	}
}
