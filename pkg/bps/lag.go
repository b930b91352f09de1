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

// noteLag records that parent stream from gave the delivery whose frame is
// addr (FrameKey: not the chunk address, which every message of an ANCHOR
// cohort shares); dup: it was taken before (from the other parent). It
// returns the parents that missed MaxLag deliveries this epoch, to be
// dropped. Under j.mu.
func (j *judge) noteLag(from *clientStream, addr [32]byte, dup, sequenced bool) []*parent {
	if dup {
		j.gaveCopy(from, addr) // a copy, or an announcement (lazy.go): the gap escape's too
	}
	if !dup && !sequenced {
		return nil // proves nothing of the parent that did not give it
	}
	if len(j.parents) < 2 && !dup {
		return nil // one parent: nothing to compare with
	}
	var gens [2]uint32
	for i, q := range j.parents {
		if i < 2 {
			gens[i] = q.p.gen
		}
	}
	var fromGen uint32
	if q := j.from(from); q != nil {
		fromGen = q.p.gen
	}
	w := &j.lag
	if dup {
		if e := w.find(addr); e != nil {
			for k := range e.at {
				if e.at[k] == fromGen && fromGen != 0 {
					e.gave[k] = true
				}
			}
		}
		return nil
	}
	e := lagEntry{addr: addr, at: gens}
	for k := range e.at {
		e.gave[k] = e.at[k] == fromGen && fromGen != 0
	}
	var drop []*parent
	w.ring.put(e, lagWindowSize, func(e *lagEntry) { drop = append(drop, j.evictLag(e)...) })
	if w.epoch++; w.epoch >= lagWindowSize {
		w.epoch = 0
		for _, q := range j.parents {
			q.missed = 0
		}
	}
	return drop
}

// sequenced reports whether pub is in a sequence of the cohort this node
// verifies: an explicit feed's update or a service update.
func (j *judge) sequenced(pub publication) bool {
	return pub.service != nil || (pub.feed && j.spec.Explicit())
}

// evictLag blames the parents that missed the delivery of e, leaving the
// window, and returns those that missed MaxLag this epoch; never every
// parent. Under j.mu.
func (j *judge) evictLag(e *lagEntry) []*parent {
	var drop []*parent
	for k, g := range e.at {
		if g == 0 || e.gave[k] {
			continue
		}
		for _, q := range j.parents {
			if q.p.gen == g {
				if q.missed++; q.missed == j.s.opts.MaxLag {
					drop = append(drop, q.p)
				}
			}
		}
	}
	if len(drop) == len(j.parents) {
		return nil // both lag each other? never drop the last parent here
	}
	return drop
}
