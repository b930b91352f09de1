// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// Withholding is visible (SWIP-61): a parent that persistently fails to
// give what its sister gave is dropped. The window remembers, for the last
// lagWindowSize deliveries, which parents (by generation) gave each; one
// leaving it blames the parents that were there and did not, and MaxLag
// misses in an epoch drop a parent. Only deliveries of a sequence the node
// verifies count (explicit feeds, the service feed): anything else may have
// reached one parent without passing the root, and blames nobody.

const lagWindowSize = 64

type lagEntry struct {
	addr [32]byte  // FrameKey of the frame
	at   [2]uint32 // generations of the parents present when it was taken (0: none)
	gave [2]bool   // which of them gave it
}

// lagWindow is a ring of the last lagWindowSize entries. It grows as
// deliveries are taken, so that a node that has taken few holds few
// (44 bytes an entry); a copy looks its delivery up newest first, which
// finds it in the first few entries: the copies of a delivery come within
// a few link latencies of each other.
type lagWindow struct {
	ring  growRing[lagEntry]
	epoch int // deliveries taken this epoch
}

// find returns the entry of the delivery whose frame is addr, nil if it is
// not in the window.
func (w *lagWindow) find(addr [32]byte) *lagEntry {
	return w.ring.newest(func(e *lagEntry) bool { return e.addr == addr })
}

// noteLag records, under the receiver's dmu, that parent stream from gave
// the delivery whose frame is addr (FrameKey: not the chunk address, which
// every message of an ANCHOR cohort shares); dup: it was taken before
// (from the other parent).
func (sub *Subscription) noteLag(from *clientStream, addr [32]byte, dup, sequenced bool) {
	if dup {
		sub.gaveCopy(from, addr) // a copy, or an announcement (lazy.go): the gap escape's too
	}
	if !dup && !sequenced {
		return // proves nothing of the parent that did not give it
	}
	sub.mu.Lock()
	if len(sub.parents) < 2 && !dup {
		sub.mu.Unlock()
		return // one parent: nothing to compare with
	}
	var gens [2]uint32
	for i, p := range sub.parents {
		if i < 2 {
			gens[i] = p.gen
		}
	}
	var fromGen uint32
	for _, p := range sub.parents {
		if p.cs == from {
			fromGen = p.gen
		}
	}
	sub.mu.Unlock()

	w := &sub.lag
	if dup {
		if e := w.find(addr); e != nil {
			for j := range e.at {
				if e.at[j] == fromGen && fromGen != 0 {
					e.gave[j] = true
				}
			}
		}
		return
	}
	e := lagEntry{addr: addr, at: gens}
	for j := range e.at {
		e.gave[j] = e.at[j] == fromGen && fromGen != 0
	}
	w.ring.put(e, lagWindowSize, sub.evictLag)
	if w.epoch++; w.epoch >= lagWindowSize {
		w.epoch = 0
		sub.mu.Lock()
		for _, p := range sub.parents {
			p.missed = 0
		}
		sub.mu.Unlock()
	}
}

// sequenced reports whether pub is in a sequence of the cohort this node
// verifies: an explicit feed's update or a service update.
func (sub *Subscription) sequenced(pub publication) bool {
	return pub.service != nil || (pub.feed && sub.spec.Explicit())
}

// evictLag blames the parents that missed the delivery of e, leaving the
// window, and drops one that missed MaxLag this epoch.
func (sub *Subscription) evictLag(e *lagEntry) {
	s := sub.s
	sub.mu.Lock()
	var drop []*parent
	for j, g := range e.at {
		if g == 0 || e.gave[j] {
			continue
		}
		for _, p := range sub.parents {
			if p.gen == g {
				if p.missed++; p.missed == s.opts.MaxLag {
					drop = append(drop, p)
				}
			}
		}
	}
	if len(drop) == len(sub.parents) {
		drop = nil // both lag each other? never drop the last parent here
	}
	sub.mu.Unlock()
	for _, p := range drop {
		sub.withhold(p)
	}
}

// withhold drops p as a parent that withheld, and never takes it again.
func (sub *Subscription) withhold(p *parent) {
	s := sub.s
	sub.shun(p.cs.peer)
	s.metrics.Withheld.Inc()
	sub.withheld.Add(1)
	s.trace(Event{Kind: EventWithheld, Cohort: sub.spec.String(), Peer: p.cs.peer})
	p.cs.kill(errWithheld)
}

// blame counts a miss against p that is not a delivery leaving the window
// — an announcement it did not serve when asked (lazy.go) — and drops it
// at MaxLag this epoch, as evictLag does. It takes sub.mu, as every change
// of missed holds it; the caller holds no lock.
func (sub *Subscription) blame(p *parent) {
	sub.mu.Lock()
	drop := false
	if sub.hasParentLocked(p.cs.peer) {
		p.missed++
		drop = p.missed == sub.s.opts.MaxLag && len(sub.parents) > 1
	}
	sub.mu.Unlock()
	if drop {
		sub.withhold(p)
	}
}
