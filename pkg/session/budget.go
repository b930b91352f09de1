// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/prometheus/client_golang/prometheus"
)

// DefaultRecoverBudget is MuxOptions.RecoverBudget's default: the chunk
// retrievals the gap recoveries of one cohort's sessions make a minute at
// a node, all sessions together, past a burst of four recoveries' worth.
const DefaultRecoverBudget = 6 * DefaultRecoverMax

// recoverCache bounds the chunks a room keeps that its sessions' recoveries
// retrieved, for the next session that misses the same updates.
const recoverCache = 128

// ErrRecoveryBudget is what a retrieval past the cohort's recovery budget
// fails with: the updates it would have recovered are a gap.
var ErrRecoveryBudget = errors.New("bps: the cohort's gap recoveries are over their retrieval budget at this node")

// shared is the storage the followers of one room recover through: each
// chunk is retrieved once for all of them — concurrent asks wait for the
// one retrieval, later ones find it kept — and the retrievals a room makes
// are budgeted. A publisher who skips indexes on purpose (any key may, in a
// cohort of implicit authorship) thereby makes a node retrieve at most the
// budget, however many sessions follow the cohort there; honest sessions
// that miss the same updates cost one retrieval each.
type shared struct {
	bps.Storage
	burst, rate float64 // tokens; tokens a second
	fetches     prometheus.Counter

	mu     sync.Mutex
	tokens float64
	at     time.Time
	chunks map[string]*retrieval // by address: in flight, or kept
	kept   []string              // kept addresses, oldest first
}

// retrieval is one chunk's retrieval, shared by whoever asks for it.
type retrieval struct {
	done chan struct{}
	ch   swarm.Chunk
	err  error
}

// newShared budgets perMinute retrievals a minute past a burst of
// 4 × recoverMax.
func newShared(st bps.Storage, perMinute, recoverMax int, fetches prometheus.Counter) *shared {
	burst := float64(4 * recoverMax)
	return &shared{Storage: st, burst: burst, rate: float64(perMinute) / 60, tokens: burst,
		fetches: fetches, chunks: make(map[string]*retrieval)}
}

// Fetch retrieves the chunk at addr once for every follower of the room,
// within the room's budget.
func (sh *shared) Fetch(ctx context.Context, addr swarm.Address) (swarm.Chunk, error) {
	k := addr.ByteString()
	sh.mu.Lock()
	for r, ok := sh.chunks[k]; ok; r, ok = sh.chunks[k] {
		sh.mu.Unlock()
		select {
		case <-r.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if r.err == nil || !(errors.Is(r.err, context.Canceled) || errors.Is(r.err, context.DeadlineExceeded)) {
			return r.ch, r.err
		}
		sh.mu.Lock() // the asker that retrieved it gave up: ask again
	}
	if !sh.takeLocked(time.Now()) {
		sh.mu.Unlock()
		return nil, ErrRecoveryBudget
	}
	r := &retrieval{done: make(chan struct{})}
	sh.chunks[k] = r
	sh.mu.Unlock()

	sh.fetches.Inc()
	r.ch, r.err = sh.Storage.Fetch(ctx, addr)
	sh.mu.Lock()
	if r.err != nil {
		delete(sh.chunks, k) // a failure is not kept: the next ask retries, budgeted
	} else {
		sh.kept = append(sh.kept, k)
		if len(sh.kept) > recoverCache {
			delete(sh.chunks, sh.kept[0])
			sh.kept = sh.kept[1:]
		}
	}
	sh.mu.Unlock()
	close(r.done)
	return r.ch, r.err
}

// takeLocked takes one token of the budget, if there is one; the caller
// holds sh.mu.
func (sh *shared) takeLocked(now time.Time) bool {
	if !sh.at.IsZero() {
		sh.tokens = min(sh.burst, sh.tokens+now.Sub(sh.at).Seconds()*sh.rate)
	}
	sh.at = now
	if sh.tokens < 1 {
		return false
	}
	sh.tokens--
	return true
}
