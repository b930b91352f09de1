// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"slices"
	"strings"
	"sync"
)

// refMap holds values that many sessions share, by key, counting the
// references to each: the last release frees a value. A value can be
// dropped from the map before that — it failed, or its stream ended — so
// that the next acquire of its key makes a new one while the old one lives
// on for those still holding it. Its mutex guards the map and the counts;
// mk runs under it and must not block.
type refMap[V comparable] struct {
	mu    sync.Mutex
	byKey map[string]V
	refs  map[V]int // every value still referenced, in byKey or dropped
}

func newRefMap[V comparable]() *refMap[V] {
	return &refMap[V]{byKey: make(map[string]V), refs: make(map[V]int)}
}

// acquire takes a reference to the value of key, made by mk if there is
// none (created).
func (m *refMap[V]) acquire(key string, mk func() V) (v V, created bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.byKey[key]
	if !ok {
		v = mk()
		m.byKey[key] = v
	}
	m.refs[v]++
	return v, !ok
}

// hold takes a reference to the value of key if there is one and usable
// says it may be used.
func (m *refMap[V]) hold(key string, usable func(V) bool) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.byKey[key]
	if !ok || !usable(v) {
		var zero V
		return zero, false
	}
	m.refs[v]++
	return v, true
}

// lookup returns the value of key without taking a reference.
func (m *refMap[V]) lookup(key string) (V, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.byKey[key]
	return v, ok
}

// release drops a reference to v, the value of key; it reports whether it
// was the last one (v is then out of the map).
func (m *refMap[V]) release(key string, v V) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.refs[v]--; m.refs[v] > 0 {
		return false
	}
	delete(m.refs, v)
	if m.byKey[key] == v {
		delete(m.byKey, key)
	}
	return true
}

// drop takes v out of the map, if it is still the value of key; the
// references to it stay counted.
func (m *refMap[V]) drop(key string, v V) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byKey[key] == v {
		delete(m.byKey, key)
	}
}

// values returns the values in the map, ordered by key.
func (m *refMap[V]) values() []V {
	m.mu.Lock()
	keys := make([]string, 0, len(m.byKey))
	for k := range m.byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, strings.Compare)
	out := make([]V, len(keys))
	for i, k := range keys {
		out[i] = m.byKey[k]
	}
	m.mu.Unlock()
	return out
}
