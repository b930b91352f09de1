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
// Message the fan-out encoded, what the child dedups by.
func TestFrameKeyOf(t *testing.T) {
	msg := &pb.Message{Address: bytes.Repeat([]byte{7}, 32), Data: bytes.Repeat([]byte{9}, 300)}
	if got, want := frameKeyOf(encodeFrame(msg)), FrameKey(msg.Address, msg.Data); got != want {
		t.Fatalf("frameKeyOf %x, want %x", got, want)
	}
}
