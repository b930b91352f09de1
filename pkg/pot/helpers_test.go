// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package pot_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/storage"
	"github.com/ethersphere/bee/v2/pkg/storage/inmemchunkstore"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/pot"
)

// feed is a publisher's pot profile over bee's in-memory chunk store: the
// node of every update, its chunk's address, its key.
type feed struct {
	store *inmemchunkstore.ChunkStore
	nodes []*pot.Node
	refs  []swarm.Address
	keys  []uint64
}

func newFeed() *feed { return &feed{store: inmemchunkstore.New()} }

// add inserts ⟨key, value⟩ and stores the new node's chunk, as a persistent
// publisher uploads an update's wrapped chunk.
func (f *feed) add(tb testing.TB, key uint64, value []byte) {
	tb.Helper()
	var prev *pot.Node
	var prevRef swarm.Address
	if len(f.nodes) > 0 {
		prev, prevRef = f.nodes[len(f.nodes)-1], f.refs[len(f.refs)-1]
	}
	n, err := pot.Insert(prev, prevRef, key, value)
	if err != nil {
		tb.Fatal(err)
	}
	ch, err := n.Chunk()
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.store.Put(context.Background(), ch); err != nil {
		tb.Fatal(err)
	}
	f.nodes = append(f.nodes, n)
	f.refs = append(f.refs, ch.Address())
	f.keys = append(f.keys, key)
}

// top is update i's node and reference.
func (f *feed) top(i int) (*pot.Node, swarm.Address) { return f.nodes[i], f.refs[i] }

// value is element i's value: its index, 8 bytes.
func value(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }

// keyFunc makes the key of element i after prev.
type keyFunc func(r *rand.Rand, i int, prev uint64) uint64

var (
	// sequential keys: KEY = IDX.
	sequential keyFunc = func(_ *rand.Rand, i int, _ uint64) uint64 { return uint64(i) }
	// timestamps: a segment every 2 s ± 500 ms, in ms, from a 2026 clock.
	timestamps keyFunc = func(r *rand.Rand, i int, prev uint64) uint64 {
		if i == 0 {
			return 1_780_000_000_000
		}
		return prev + 1500 + uint64(r.IntN(1000))
	}
	// bursty: 1 to 64 ms apart.
	bursty keyFunc = func(r *rand.Rand, i int, prev uint64) uint64 {
		return prev + 1 + uint64(r.IntN(64))
	}
)

// build is a feed of n updates with keys from kf.
func build(tb testing.TB, n int, kf keyFunc, seed uint64) *feed {
	tb.Helper()
	r := rand.New(rand.NewPCG(seed, seed))
	f := newFeed()
	var prev uint64
	for i := range n {
		k := kf(r, i, prev)
		f.add(tb, k, value(i))
		prev = k
	}
	return f
}

// counting is a getter that counts its retrievals, per address too.
type counting struct {
	g   storage.Getter
	mu  sync.Mutex
	n   int
	per map[string]int
}

func count(g storage.Getter) *counting { return &counting{g: g, per: make(map[string]int)} }

func (c *counting) Get(ctx context.Context, addr swarm.Address) (swarm.Chunk, error) {
	c.mu.Lock()
	c.n++
	c.per[addr.ByteString()]++
	c.mu.Unlock()
	return c.g.Get(ctx, addr)
}

// twice reports an address retrieved more than once.
func (c *counting) twice() (swarm.Address, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for a, k := range c.per {
		if k > 1 {
			return swarm.NewAddress([]byte(a)), true
		}
	}
	return swarm.ZeroAddress, false
}
