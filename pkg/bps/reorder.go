// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"slices"
	"time"
)

// reorder puts a subscription's feed updates back in index order per
// publisher when two parents interleave them (SWIP-61: a second parent at
// another depth delivers the same updates earlier or later). An update is
// taken once by index: one below the next expected, or held already, is a
// duplicate. One past the next expected is held until the ones before it
// come, for at most maxHeld updates and reorderWait; then everything held
// is delivered in order and what never came is a gap the application sees
// in the indexes (and a SWIP-65 follower recovers). An update of a gap
// that comes after all — a parent later than the wait — is still
// delivered when it comes, out of order: the flush remembers the indexes
// it passed over (at most maxSkipped), so that being late never loses an
// update, and which parent gave it late is the withholding check's to
// judge (it sees every copy, on time or not).
type reorder struct {
	next    map[string]uint64              // per owner: the lowest index not yet delivered
	held    map[string]map[uint64]Delivery // per owner: updates ahead of next
	skipped map[string]map[uint64]struct{} // per owner: indexes below next a flush passed over
	nheld   int
	nskip   int
	wait    time.Duration
	timer   *time.Timer
	// passed lists, per owner, the lowest index each flush passed over,
	// until the subscription takes them (takePassed): the gaps a
	// withholding check may judge (escape.go). At most one per owner a
	// flush, and at most maxHeld owners are held.
	passed []gapRef
}

// gapRef names one index of one owner's feed.
type gapRef struct {
	owner string
	index uint64
}

// Bounds of the reorder buffer.
const (
	maxHeld     = 64
	maxSkipped  = 256
	reorderWait = time.Second
)

func newReorder() *reorder {
	return &reorder{next: make(map[string]uint64), held: make(map[string]map[uint64]Delivery),
		skipped: make(map[string]map[uint64]struct{}), wait: reorderWait}
}

// admit reports whether update index of owner is new.
func (o *reorder) admit(owner []byte, index uint64) bool {
	if n, ok := o.next[string(owner)]; ok && index < n {
		_, late := o.skipped[string(owner)][index]
		return late
	}
	_, held := o.held[string(owner)][index]
	return !held
}

// push takes a new update and returns what may be delivered now, in order;
// flush is armed to run after the wait if updates stay held.
func (o *reorder) push(d Delivery, flush func()) []Delivery {
	k := string(d.Owner)
	n, ok := o.next[k]
	if ok && d.Index < n {
		// Late, past a flush that passed over it (admit let it in).
		if s := o.skipped[k]; s != nil {
			delete(s, d.Index)
			o.nskip--
			if len(s) == 0 {
				delete(o.skipped, k)
			}
		}
		return []Delivery{d}
	}
	if ok && d.Index != n {
		h := o.held[k]
		if h == nil {
			h = make(map[uint64]Delivery)
			o.held[k] = h
		}
		h[d.Index] = d
		o.nheld++
		if o.nheld > maxHeld {
			return o.flush()
		}
		if o.timer == nil {
			o.timer = time.AfterFunc(o.wait, flush)
		}
		return nil
	}
	out := []Delivery{d}
	n = d.Index + 1
	for h := o.held[k]; len(h) > 0; n++ {
		next, ok := h[n]
		if !ok {
			break
		}
		out = append(out, next)
		delete(h, n)
		o.nheld--
	}
	o.next[k] = n
	if len(o.held[k]) == 0 {
		delete(o.held, k)
	}
	if o.nheld == 0 && o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
	return out
}

// flush returns everything held, in index order per owner, and moves each
// owner's next past it.
func (o *reorder) flush() []Delivery {
	var out []Delivery
	for k, h := range o.held {
		idx := make([]uint64, 0, len(h))
		for i := range h {
			idx = append(idx, i)
		}
		slices.Sort(idx)
		prev := o.next[k]
		if prev < idx[0] && len(o.passed) < maxHeld {
			o.passed = append(o.passed, gapRef{owner: k, index: prev})
		}
		for _, i := range idx {
			out = append(out, h[i])
			for n := 0; prev < i && n < maxSkipped; prev, n = prev+1, n+1 {
				o.skip(k, prev) // a publisher may skip indexes: at most maxSkipped are remembered
			}
			prev = i + 1
		}
		o.next[k] = idx[len(idx)-1] + 1
		delete(o.held, k)
	}
	o.nheld = 0
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
	return out
}

// skip remembers that a flush passed over index of owner k. At
// maxSkipped what was remembered is forgotten, so that the newest gaps are
// the ones tracked; a late update of a forgotten one is dropped as a
// duplicate.
func (o *reorder) skip(k string, index uint64) {
	if o.nskip >= maxSkipped {
		clear(o.skipped)
		o.nskip = 0
	}
	s := o.skipped[k]
	if s == nil {
		s = make(map[uint64]struct{})
		o.skipped[k] = s
	}
	if _, ok := s[index]; !ok {
		s[index] = struct{}{}
		o.nskip++
	}
}

// takePassed returns the gaps flushes passed over since it was last
// called, and forgets them.
func (o *reorder) takePassed() []gapRef {
	g := o.passed
	o.passed = nil
	return g
}

// passedOver reports whether index of owner is a gap a flush passed over
// that no late update has filled since (and that is still remembered).
func (o *reorder) passedOver(owner string, index uint64) bool {
	_, ok := o.skipped[owner][index]
	return ok
}

// stop disarms the flush for good.
func (o *reorder) stop() {
	if o.timer != nil {
		o.timer.Stop()
		o.timer = nil
	}
}
