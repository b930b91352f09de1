// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"container/list"
	"sync"
)

// lru is a small bounded map, guarded by its mutex: past max entries the least
// recently used is forgotten. The client side keeps its per-feed cursors and
// the challenges it holds in one each.
type lru[V any] struct {
	mu    sync.Mutex
	max   int
	items map[string]*list.Element
	order *list.List // front = most recent
}

type lruItem[V any] struct {
	key string
	val V
}

func newLRU[V any](max int) *lru[V] {
	return &lru[V]{max: max, items: make(map[string]*list.Element), order: list.New()}
}

// update calls f with the value for key (the zero value and false if absent)
// under the lock, stores what f returns, and returns f's verdict.
func (c *lru[V]) update(key string, f func(v V, ok bool) (V, bool)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		it := e.Value.(*lruItem[V])
		c.order.MoveToFront(e)
		var keep bool
		it.val, keep = f(it.val, true)
		return keep
	}
	var zero V
	v, keep := f(zero, false)
	if !keep {
		return false
	}
	if c.order.Len() >= c.max {
		old := c.order.Back()
		c.order.Remove(old)
		delete(c.items, old.Value.(*lruItem[V]).key)
	}
	c.items[key] = c.order.PushFront(&lruItem[V]{key: key, val: v})
	return true
}

func (c *lru[V]) get(key string) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		return e.Value.(*lruItem[V]).val
	}
	var zero V
	return zero
}

// peek is the value for key, without making it more recent.
func (c *lru[V]) peek(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		return e.Value.(*lruItem[V]).val, true
	}
	var zero V
	return zero, false
}

func (c *lru[V]) put(key string, v V) {
	c.update(key, func(V, bool) (V, bool) { return v, true })
}

func (c *lru[V]) remove(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[key]; ok {
		c.order.Remove(e)
		delete(c.items, key)
	}
}

// cursorCache is a subscriber's own cursor per (topic, admin): the lowest
// index it accepts next, shared by every subscription of this node to that
// feed, so a stale or replayed update is caught at the edge whichever broker
// delivers it.
type cursorCache struct{ *lru[uint64] }

func newCursorCache(max int) *cursorCache { return &cursorCache{newLRU[uint64](max)} }

// advance accepts index n for key iff n is at least the cursor, and moves the
// cursor past it.
func (c *cursorCache) advance(key string, n uint64) bool {
	return c.update(key, func(cur uint64, _ bool) (uint64, bool) {
		if n < cur {
			return cur, false
		}
		return n + 1, true
	})
}
