// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package pot

import (
	"context"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/storage"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Parallel is how many nodes a recovery retrieves ahead of its descent at
// once.
const Parallel = 8

// prefetcher retrieves, ahead of a descent and at most Parallel at once,
// nodes the descent is certain to reach, so that a recovery costs about
// depth round trips instead of one per node. It is a storage.Getter: a node
// retrieved ahead is handed over once, anything else is retrieved then.
// Its goroutines are owned by close, which cancels and waits for them.
type prefetcher struct {
	g      storage.Getter
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex // guards ahead
	ahead map[string]*retrieval
}

// retrieval is a node retrieved ahead: done closes once ch or err is set.
type retrieval struct {
	done chan struct{}
	ch   swarm.Chunk
	err  error
}

func newPrefetcher(ctx context.Context, g storage.Getter) *prefetcher {
	p := &prefetcher{g: g, sem: make(chan struct{}, Parallel), ahead: make(map[string]*retrieval)}
	p.ctx, p.cancel = context.WithCancel(ctx)
	return p
}

// fetch starts retrieving ref, unless it already is.
func (p *prefetcher) fetch(ref swarm.Address) {
	k := ref.ByteString()
	p.mu.Lock()
	if _, ok := p.ahead[k]; ok {
		p.mu.Unlock()
		return
	}
	r := &retrieval{done: make(chan struct{})}
	p.ahead[k] = r
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(r.done)
		select {
		case p.sem <- struct{}{}:
		case <-p.ctx.Done():
			r.err = p.ctx.Err()
			return
		}
		defer func() { <-p.sem }()
		r.ch, r.err = p.g.Get(p.ctx, ref)
	}()
}

// Get hands over the node retrieved ahead at ref, or retrieves it.
func (p *prefetcher) Get(ctx context.Context, ref swarm.Address) (swarm.Chunk, error) {
	k := ref.ByteString()
	p.mu.Lock()
	r, ok := p.ahead[k]
	delete(p.ahead, k)
	p.mu.Unlock()
	if !ok {
		return p.g.Get(ctx, ref)
	}
	select {
	case <-r.done:
		return r.ch, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// close cancels what is still being retrieved and waits for it.
func (p *prefetcher) close() {
	p.cancel()
	p.wg.Wait()
}

// lowest is the smallest key the fork at p of a node pinning key can hold:
// key's first p bits, then zeros.
func lowest(key uint64, p int) uint64 { return key & (^uint64(0) << (KeyBits - p)) }
