// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package delay holds the one rule for a timer's delay that can come out
// zero or negative.
package delay

import "time"

// Positive returns d, or 1 ns if d is not positive. It is the delay to give
// a timer (time.AfterFunc, time.NewTimer, time.After, Timer.Reset) wherever
// the delay is computed, as from time.Until, or meant as "at once".
//
// The reason is a fault of Go 1.26's runtime under the race detector. In a
// testing/synctest bubble, a timer made or reset with a delay ≤ 0 is due at
// the bubble's current instant, and the runtime runs it (the send on its
// channel, or the start of its AfterFunc goroutine) inside the call, on the
// calling thread's system stack, under the one race context that the whole
// bubble shares (runtime.(*timer).modify → unlockAndRun). Two goroutines of
// a bubble doing so at the same time use that context concurrently and
// corrupt it: the process dies of a SIGSEGV in the race runtime
// (runtime.raceacquirectx). A timer due even 1 ns later goes on the
// bubble's timer heap instead, whose timers the runtime runs one at a time.
//
// Outside a bubble 1 ns cannot be told from 0: the timer is due at once
// either way. Inside one, the timer fires when every goroutine of the
// bubble is blocked and its clock moves on, not within the call.
func Positive(d time.Duration) time.Duration {
	return max(d, time.Nanosecond)
}
