// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"container/list"
	"sync"
)

// heldFeeds remembers the service feeds of forgotten cohorts (heldFeed),
// at most max in all, shared fairly so that nobody makes a node forget
// another's: each feed is charged to the peer whose stream carried its
// last accepted service update and, under that peer, to the cohort's
// admin. Past the bound the feed dropped is the oldest of the admin
// holding the most under the peer holding the most, so a peer filling
// the memory with cohorts of its own — under one admin key or under many
// it mints — evicts only its own while any other peer holds fewer than
// it does (docs/protocol.md, "Threat model"). Its own mutex guards it.
//
// It lives in memory only: a restarted node remembers nothing, as a node
// that never rooted the cohort does (docs/protocol.md, "Rosters").
type heldFeeds struct {
	mu     sync.Mutex
	max    int
	bySpec map[string]*heldEntry // every feed held, by spec
	peers  map[string]*heldPeer
}

// heldPeer is what one peer is charged with: by admin, oldest first.
type heldPeer struct {
	n      int
	admins map[string]*list.List // of *heldEntry
}

type heldEntry struct {
	spec, peer, admin string
	feed              heldFeed
	el                *list.Element
}

func newHeldFeeds(max int) *heldFeeds {
	return &heldFeeds{max: max, bySpec: make(map[string]*heldEntry), peers: make(map[string]*heldPeer)}
}

// put remembers feed for the cohort spec (its canonical key), charged to
// the peer that carried it (feed.from) and to admin, replacing what was
// held for spec.
func (h *heldFeeds) put(spec, admin string, feed heldFeed) {
	peer := feed.from
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(spec)
	for len(h.bySpec) >= h.max && len(h.bySpec) > 0 {
		h.evictLocked()
	}
	p := h.peers[peer]
	if p == nil {
		p = &heldPeer{admins: make(map[string]*list.List)}
		h.peers[peer] = p
	}
	l := p.admins[admin]
	if l == nil {
		l = list.New()
		p.admins[admin] = l
	}
	e := &heldEntry{spec: spec, peer: peer, admin: admin, feed: feed}
	e.el = l.PushBack(e)
	p.n++
	h.bySpec[spec] = e
}

// take returns the feed held for spec and forgets it; the zero heldFeed if
// none is.
func (h *heldFeeds) take(spec string) heldFeed {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.bySpec[spec]
	if e == nil {
		return heldFeed{}
	}
	h.removeLocked(spec)
	return e.feed
}

// peek is the service feed held for spec, without forgetting it: the
// roster a Join is judged by before its cohort is made again.
func (h *heldFeeds) peek(spec string) *ServiceFeed {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.bySpec[spec]; e != nil {
		f := e.feed.svc.clone()
		return &f
	}
	return &ServiceFeed{}
}

// len is how many feeds are held.
func (h *heldFeeds) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.bySpec)
}

func (h *heldFeeds) removeLocked(spec string) {
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

// evictLocked drops the oldest feed of the admin holding the most under
// the peer holding the most. A scan: at most max peers, and only when a
// cohort is forgotten with the memory full.
func (h *heldFeeds) evictLocked() {
	var top *heldPeer
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
	h.removeLocked(most.Front().Value.(*heldEntry).spec)
}
