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
// nodes the descent is certain to reach — as each arrives, its forks that
// need says the descent reaches too — so that a recovery costs about as
// many round trips as the pot is deep instead of one per node. It is a
// storage.Getter: a node retrieved ahead is handed over once, anything
// else is retrieved then; no node is retrieved ahead twice. Its goroutines
// are owned by close, which cancels and waits for them.
type prefetcher struct {
	g      storage.Getter
	need   func(n *Node, p int) bool
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex // guards ahead and seen
	ahead map[string]*retrieval
	seen  map[string]bool
}

// retrieval is a node retrieved ahead: done closes once ch or err is set.
type retrieval struct {
	done chan struct{}
	ch   swarm.Chunk
	err  error
}

func newPrefetcher(ctx context.Context, g storage.Getter, need func(n *Node, p int) bool) *prefetcher {
	p := &prefetcher{g: g, need: need, sem: make(chan struct{}, Parallel),
		ahead: make(map[string]*retrieval), seen: make(map[string]bool)}
	p.ctx, p.cancel = context.WithCancel(ctx)
	return p
}

// reached starts retrieving the forks of n, reached at fork floor, that
// the descent needs.
func (p *prefetcher) reached(n *Node, floor int) {
	for q := n.prev(KeyBits - 1); q > floor; q = n.prev(q - 1) {
		if p.need(n, q) {
			ref, _ := n.Fork(q)
			p.fetch(ref, q)
		}
	}
}

// fetch starts retrieving ref, the fork at floor of its parent, unless it
// was already; once it arrives, its own forks the descent needs.
func (p *prefetcher) fetch(ref swarm.Address, floor int) {
	k := ref.ByteString()
	p.mu.Lock()
	if p.seen[k] {
		p.mu.Unlock()
		return
	}
	p.seen[k] = true
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
		r.ch, r.err = p.g.Get(p.ctx, ref)
		<-p.sem
		if r.err == nil {
			if n, err := nodeOf(r.ch, ref); err == nil {
				p.reached(n, floor) // before done: the descent enters n after
			}
		}
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
