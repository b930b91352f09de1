// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// maxBackoffEntries bounds the backoff table; expired entries are evicted first.
const maxBackoffEntries = 4096

// backoffs enforces SWIP-74's mandatory client backoff per (broker, cohort):
// after FULL, REJECTED or a reset the next Join waits a randomised exponential
// delay between min and max with full jitter. Guarded by its mutex.
type backoffs struct {
	min, max time.Duration
	mu       sync.Mutex
	entries  map[string]*backoffEntry
}

type backoffEntry struct {
	attempts int
	until    time.Time
	reason   error // why the last attempt failed, if known
	reasonOf int   // the attempt reason explains
}

func newBackoffs(min, max time.Duration) *backoffs {
	return &backoffs{min: min, max: max, entries: make(map[string]*backoffEntry)}
}

// delay is the randomised delay after the given number of consecutive
// failures (1-based): uniform in [min, min(max, min·2^attempts)]. Even the
// first is jittered, so an audience reset at once does not return at once.
func (b *backoffs) delay(attempts int) time.Duration {
	ceil := b.min
	for i := 0; i < attempts && ceil < b.max; i++ {
		ceil *= 2
	}
	ceil = min(ceil, b.max)
	if ceil <= b.min {
		return b.min
	}
	return b.min + rand.N(ceil-b.min+1)
}

// fail records a refusal or reset and returns the delay imposed.
func (b *backoffs) fail(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.entries[key]
	if e == nil {
		b.evict()
		e = &backoffEntry{}
		b.entries[key] = e
	}
	e.attempts++
	d := b.delay(e.attempts)
	e.until = time.Now().Add(d)
	return d
}

// succeed forgets the failures of key.
func (b *backoffs) succeed(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

// evict makes room for one entry; the caller holds b.mu.
func (b *backoffs) evict() {
	if len(b.entries) < maxBackoffEntries {
		return
	}
	now := time.Now()
	var oldest string
	var oldestUntil time.Time
	for k, e := range b.entries {
		if e.until.Before(now) {
			delete(b.entries, k)
			return
		}
		if oldest == "" || e.until.Before(oldestUntil) {
			oldest, oldestUntil = k, e.until
		}
	}
	delete(b.entries, oldest)
}

// explain records why the latest failure of key happened, once per failure:
// what a later wait on the backoff says, not a timeout of that wait.
func (b *backoffs) explain(key string, reason error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.entries[key]; e != nil && e.reasonOf != e.attempts {
		e.reason, e.reasonOf = reason, e.attempts
	}
}

// wait blocks until key may join again, or ctx ends.
func (b *backoffs) wait(ctx context.Context, key string) error {
	b.mu.Lock()
	var d time.Duration
	if e := b.entries[key]; e != nil {
		d = time.Until(e.until)
	}
	b.mu.Unlock()
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// until reports when key may join again (zero if now).
func (b *backoffs) until(key string) time.Time {
	until, _ := b.state(key)
	return until
}

// state reports when key may join again (zero if now) and why the last
// attempt failed (nil if unknown).
func (b *backoffs) state(key string) (time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.entries[key]; e != nil {
		return e.until, e.reason
	}
	return time.Time{}, nil
}

// Backoff reports when this node may next join spec at broker (zero: now)
// and why its last attempt there failed — the broker's answer, or how the
// stream or the connection failed (nil if unknown).
func (s *Service) Backoff(broker swarm.Address, sp *Spec) (time.Time, error) {
	return s.backoff.state(broker.ByteString() + sp.key)
}
