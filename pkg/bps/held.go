// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"container/list"
	"sync"
	"time"
)

// fairMemory is a bounded memory of what peers' actions make a node keep
// about cohorts, shared fairly so that nobody makes a node forget
// another's (docs/protocol.md, "Threat model"): each entry is charged to
// the peer whose stream carried what made the node keep it and, under that
// peer, to the cohort's admin. Past max entries the one dropped is the
// oldest of the admin holding the most under the peer holding the most, so
// a peer filling the memory with cohorts of its own — under one admin key
// or under many it mints — evicts only its own while any other peer holds
// fewer than it does. Its own mutex guards it.
//
// Two are kept: the service feeds of forgotten cohorts (heldFeeds) and
// the ends of cohorts their admin ended (endedSpecs). Both live in memory
// only: a restarted node remembers nothing, as a node that never rooted
// the cohort does (docs/protocol.md, "Rosters").
type fairMemory[V any] struct {
	mu     sync.Mutex
	max    int
	bySpec map[string]*fairEntry[V] // every entry, by spec
	peers  map[string]*fairPeer
}

// fairPeer is what one peer is charged with: by admin, oldest first.
type fairPeer struct {
	n      int
	admins map[string]*list.List // of spec keys
}

type fairEntry[V any] struct {
	peer, admin string
	val         V
	el          *list.Element
}

func newFairMemory[V any](max int) *fairMemory[V] {
	return &fairMemory[V]{max: max, bySpec: make(map[string]*fairEntry[V]), peers: make(map[string]*fairPeer)}
}

// put remembers v for the cohort spec (its canonical key), charged to peer
// and to admin, replacing what was held for spec.
func (h *fairMemory[V]) put(spec, peer, admin string, v V) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(spec)
	for len(h.bySpec) >= h.max && len(h.bySpec) > 0 {
		h.evictLocked()
	}
	p := h.peers[peer]
	if p == nil {
		p = &fairPeer{admins: make(map[string]*list.List)}
		h.peers[peer] = p
	}
	l := p.admins[admin]
	if l == nil {
		l = list.New()
		p.admins[admin] = l
	}
	h.bySpec[spec] = &fairEntry[V]{peer: peer, admin: admin, val: v, el: l.PushBack(spec)}
	p.n++
}

// get returns what is held for spec, and whether anything is.
func (h *fairMemory[V]) get(spec string) (V, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.bySpec[spec]
	if e == nil {
		var zero V
		return zero, false
	}
	return e.val, true
}

// take returns what is held for spec and forgets it.
func (h *fairMemory[V]) take(spec string) (V, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.bySpec[spec]
	if e == nil {
		var zero V
		return zero, false
	}
	h.removeLocked(spec)
	return e.val, true
}

// remove forgets what is held for spec.
func (h *fairMemory[V]) remove(spec string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(spec)
}

// len is how many entries are held.
func (h *fairMemory[V]) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bySpec)
}

func (h *fairMemory[V]) removeLocked(spec string) {
	e := h.bySpec[spec]
	if e == nil {
		return
	}
	delete(h.bySpec, spec)
	p := h.peers[e.peer]
	l := p.admins[e.admin]
	l.Remove(e.el)
	if l.Len() == 0 {
		delete(p.admins, e.admin)
	}
	if p.n--; p.n == 0 {
		delete(h.peers, e.peer)
	}
}

// evictLocked drops the oldest entry of the admin holding the most under
// the peer holding the most. A scan: at most max peers, and only when an
// entry is put with the memory full.
func (h *fairMemory[V]) evictLocked() {
	var top *fairPeer
	for _, p := range h.peers {
		if top == nil || p.n > top.n {
			top = p
		}
	}
	var most *list.List
	for _, l := range top.admins {
		if most == nil || l.Len() > most.Len() {
			most = l
		}
	}
	h.removeLocked(most.Front().Value.(string))
}

// heldFeeds remembers the service feeds of forgotten cohorts (heldFeed),
// each charged to the peer whose stream carried its last accepted service
// update (heldFeed.from) and to the cohort's admin.
type heldFeeds struct{ m *fairMemory[heldFeed] }

func newHeldFeeds(max int) *heldFeeds { return &heldFeeds{newFairMemory[heldFeed](max)} }

// put remembers feed for the cohort spec, replacing what was held for it.
func (h *heldFeeds) put(spec, admin string, feed heldFeed) { h.m.put(spec, feed.from, admin, feed) }

// take returns the feed held for spec and forgets it; the zero heldFeed if
// none is.
func (h *heldFeeds) take(spec string) heldFeed {
	f, _ := h.m.take(spec)
	return f
}

func (h *heldFeeds) len() int { return h.m.len() }

// peek is the service feed held for spec, without forgetting it: the
// roster a Join is judged by before its cohort is made again.
func (h *heldFeeds) peek(spec string) ServiceFeed {
	f, _ := h.m.get(spec)
	return f.svc.clone()
}

// endedSpecs is the broker's memory of cohorts their admin ended: the
// END_OF_STREAM frame by spec key, which a later Join for the spec is told.
// Each is charged to the peer whose stream carried the END_OF_STREAM and to
// the cohort's admin, bounded in entries as fairMemory says (issue 24: it
// was one LRU, and any peer ending cohorts of its own under keys it minted
// evicted a victim's end, after which a Join made the ended cohort again,
// its cursors at 0) and in time (an entry older than ttl is forgotten when
// next looked up).
type endedSpecs struct {
	m   *fairMemory[endedSpec]
	ttl time.Duration
}

type endedSpec struct {
	frame []byte
	at    time.Time
}

func newEndedSpecs(max int, ttl time.Duration) *endedSpecs {
	return &endedSpecs{m: newFairMemory[endedSpec](max), ttl: ttl}
}

// put remembers the end of cohort key, carried by peer, under admin.
func (e *endedSpecs) put(key, peer, admin string, frame []byte) {
	e.m.put(key, peer, admin, endedSpec{frame: frame, at: time.Now()})
}

// get returns the END_OF_STREAM frame of the ended cohort key, nil if it is
// not remembered (never ended, forgotten, or older than the ttl).
func (e *endedSpecs) get(key string) []byte {
	v, ok := e.m.get(key)
	if !ok {
		return nil
	}
	if time.Since(v.at) > e.ttl {
		e.m.remove(key)
		return nil
	}
	return v.frame
}

func (e *endedSpecs) len() int { return e.m.len() }
