// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package delay_test

import (
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bps/internal/delay"
)

func TestPositive(t *testing.T) {
	for _, c := range []struct{ d, want time.Duration }{
		{-time.Hour, time.Nanosecond},
		{-1, time.Nanosecond},
		{0, time.Nanosecond},
		{1, 1},
		{time.Second, time.Second},
	} {
		if got := delay.Positive(c.d); got != c.want {
			t.Errorf("Positive(%s) = %s, want %s", c.d, got, c.want)
		}
	}
}

// TestPositiveConcurrentInBubble is the pattern that crashes Go 1.26's
// runtime under the race detector (see Positive) with delays of 0: several
// goroutines of one synctest bubble resetting and making timers "at once"
// at the same time. With Positive's delays it must not crash. Were
// Positive to return d unchanged, a run under -race dies of a SIGSEGV here
// nearly every time (97 runs of 100 when this test was written); without
// -race it only checks that every timer fires.
func TestPositiveConcurrentInBubble(t *testing.T) {
	const (
		bubbles    = 30
		goroutines = 8
		rounds     = 100
	)
	for range bubbles {
		synctest.Test(t, func(t *testing.T) {
			var fired sync.WaitGroup
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					tm := time.AfterFunc(time.Hour, fired.Done)
					tm.Stop()
					for i := range rounds {
						fired.Add(1)
						if tm.Reset(delay.Positive(0)) {
							fired.Done() // moved while pending: it fires once
						}
						switch i % 3 {
						case 1:
							<-time.NewTimer(delay.Positive(-time.Millisecond)).C
						case 2:
							<-time.After(delay.Positive(0))
						}
					}
				})
			}
			wg.Wait()
			fired.Wait()
		})
	}
}
