// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"testing"
	"time"
)

// TestEscapeWaitBacksOff: gaps that go on after each escape — a publisher
// that skips indexes on purpose — let a node escape at most once per
// interval, the interval doubling up to escapeMaxWait: in an hour of a
// gap every second, 9 escapes, then 2 an hour. An interval without gaps resets
// it.
func TestEscapeWaitBacksOff(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	var last time.Time
	var wait time.Duration
	escapes := 0
	for s := range 3600 {
		now := t0.Add(time.Duration(s) * time.Second)
		w, ok := escapeWait(last, wait, now)
		wait = w
		if ok {
			escapes++
			last = now
		}
	}
	// 0, 10 s, 30 s, 70 s, 150 s, 310 s, 630 s, 1270 s, 2550 s.
	if escapes != 9 {
		t.Fatalf("%d escapes in an hour of gaps, want 9", escapes)
	}
	if wait != escapeMaxWait {
		t.Fatalf("interval %s after an hour of gaps, want %s", wait, escapeMaxWait)
	}
	// Quiet for two intervals: back to the shortest.
	now := last.Add(2*wait + time.Second)
	if w, ok := escapeWait(last, wait, now); !ok || w != escapeMinWait {
		t.Fatalf("after a quiet spell: %s, %v; want %s, true", w, ok, escapeMinWait)
	}
	if w, ok := escapeWait(time.Time{}, 0, t0); !ok || w != escapeMinWait {
		t.Fatalf("first escape: %s, %v", w, ok)
	}
}
