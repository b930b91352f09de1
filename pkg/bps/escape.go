// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	mrand "math/rand/v2"
	"time"
)

// A captured node escapes (DESIGN §7, issue 16). The withholding check
// (lag.go) compares a node's two parents with each other, so two parents
// that withhold alike — colluders, or two relays that are both starved by
// colluders above them — are never told apart: the node loses what both
// withhold for as long as it keeps them. What it can see is a gap in the
// cohort's own sequence: an explicit feed's update that the reorder flush
// passed over (reorder.go), that no parent gave, while both parents gave
// updates of that publisher past it. Both failed it. The node then
// replaces one of them through the ordinary join at the root — whose probe
// searches the whole tree and skips the node's current parents and the
// ones it shunned — so that it gains a parent from another subtree, and
// the withholding check judges the one it kept against the new one.
//
// A gap alone proves nothing against either parent — the publisher may
// skip indexes on purpose (SWIP-60 allows it), and an honest relay whose
// own parents withhold passes on the gap it was given — so the escape
// blames nobody: no miss, no shunning, no blocklisting, and the parent it
// leaves may be taken again later. What bounds it is time: an update of
// the gap that comes late (a slow parent, after the flush) cancels it; one
// escape per subscription per interval, the interval doubling (up to
// escapeMaxWait) while the escapes do not stop the gaps — a publisher
// that skips indexes all the time makes a node move 9 times in the first
// hour and twice an hour after, not with every skip — and back to
// escapeMinWait once an interval passed without one.
//
// Which parent goes: one at random. The two are alike as far as the node
// can tell — both failed the same update — so any rule that looks at them
// (the older, the deeper, the smaller overlay) is one colluders can arrange
// to win (join early, state a depth, mine an overlay) and keep their place,
// while a coin lets the node keep an honest parent, if it had one, half of
// the time; and the one kept is judged by the lag check against the new
// parent within one window either way.

// Bounds of the gap escape.
const (
	escapeGrace   = reorderWait      // how long a gap may still be filled late before it counts
	escapeMinWait = 10 * time.Second // between two escapes of one subscription, at first
	escapeMaxWait = 30 * time.Minute // the interval's bound while gaps persist
	gaveOwners    = 64               // publishers a parent's high-water marks are kept for
)

// escapeState is a subscription's gap escape; under sub.mu, but refs,
// which is under dmu.
type escapeState struct {
	// refs: the last lagWindowSize feed updates taken, by FrameKey: what
	// a byte-identical second copy was (under dmu).
	refs  growRing[gaveRef]
	timer *time.Timer // a gap waiting out escapeGrace
	// queued is the newest gap both parents failed while another waited
	// out its grace: judged next, if that one is filled late.
	queued     gapRef
	queuedGens [2]uint32
	hasQueued  bool
	wait       time.Duration // the interval after the last escape
	last       time.Time     // when the last escape began (zero: none yet)
	moving     bool          // an escape runs
}

// gaveRef is one feed update taken: its frame and its place in the feed.
type gaveRef struct {
	key [32]byte
	gapRef
}

// noteGave records, under dmu (a reader), that parent stream from gave the
// update pub of an explicit feed, so that a gap can be told from a parent
// that is merely behind. A byte-identical second copy (pub unset) is
// credited by gaveCopy, through the lag check, which is told every copy
// and every lazy parent's announcement of a frame taken.
func (sub *Subscription) noteGave(from *clientStream, pub publication, key [32]byte, dup bool) {
	if sub.order == nil || !pub.feed {
		return
	}
	ref := gapRef{owner: string(pub.owner), index: pub.index}
	if !dup {
		sub.esc.refs.put(gaveRef{key: key, gapRef: ref}, lagWindowSize, nil)
	}
	sub.credit(from, ref)
}

// gaveCopy credits parent stream from, under dmu, with the feed update
// whose frame is key, if it is one of the last taken: it sent a copy, or
// announced it.
func (sub *Subscription) gaveCopy(from *clientStream, key [32]byte) {
	if sub.order == nil {
		return
	}
	for _, r := range sub.esc.refs.s {
		if r.key == key && r.owner != "" {
			sub.credit(from, r.gapRef)
			return
		}
	}
}

// credit raises from's high-water mark for ref's publisher; it takes
// sub.mu.
func (sub *Subscription) credit(from *clientStream, ref gapRef) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	for _, p := range sub.parents {
		if p.cs != from {
			continue
		}
		if p.gave == nil || len(p.gave) >= gaveOwners {
			p.gave = make(map[string]uint64) // a roster past the bound: start again
		}
		if i, ok := p.gave[ref.owner]; !ok || ref.index+1 > i {
			p.gave[ref.owner] = ref.index + 1
		}
	}
}

// gapsPassed judges the gaps a reorder flush passed over; it takes sub.mu
// and never dmu. A gap that both of the node's two parents passed — each
// gave a later update of that publisher — and that neither is the root
// waits escapeGrace for a late copy, then (escapeAfterGrace) may move the
// node.
func (sub *Subscription) gapsPassed(gaps []gapRef) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.esc.moving || sub.closing || sub.fatal != nil || len(sub.parents) != 2 {
		return
	}
	for _, p := range sub.parents {
		if p.cs.peer.Equal(sub.root) {
			return // the root gave what the publisher published: a gap is the publisher's
		}
	}
	for _, g := range gaps {
		both := true
		for _, p := range sub.parents {
			if p.gave[g.owner] <= g.index+1 {
				both = false // this parent gave nothing past it: behind, not failing
			}
		}
		if !both {
			continue
		}
		gens := [2]uint32{sub.parents[0].gen, sub.parents[1].gen}
		if sub.esc.timer != nil {
			// Another gap waits out its grace: this one is judged if
			// that one is filled late (one kept, the newest).
			sub.esc.queued, sub.esc.queuedGens, sub.esc.hasQueued = g, gens, true
			return
		}
		sub.armEscapeLocked(g, gens)
		return
	}
}

// armEscapeLocked has gap g, which both parents of generations gens
// failed, wait out escapeGrace. The caller holds sub.mu.
func (sub *Subscription) armEscapeLocked(g gapRef, gens [2]uint32) {
	sub.esc.timer = time.AfterFunc(escapeGrace, func() { sub.escapeAfterGrace(g, gens) })
}

// escapeAfterGrace runs escapeGrace after a gap both parents failed: if no
// late copy filled it and both are still the node's parents, the node
// escapes — unless it escaped less than the interval ago.
func (sub *Subscription) escapeAfterGrace(g gapRef, gens [2]uint32) {
	sub.dmu.Lock()
	filled := sub.cClosed || !sub.order.passedOver(g.owner, g.index)
	sub.dmu.Unlock()
	sub.mu.Lock()
	defer sub.mu.Unlock()
	sub.esc.timer = nil
	if sub.closing || sub.fatal != nil || len(sub.parents) != 2 {
		return
	}
	if filled {
		if sub.esc.hasQueued {
			// A later gap came while this one waited: judge it now.
			q, qg := sub.esc.queued, sub.esc.queuedGens
			sub.esc.hasQueued = false
			sub.armEscapeLocked(q, qg)
		}
		return
	}
	sub.esc.hasQueued = false
	for i, p := range sub.parents {
		if p.gen != gens[i] {
			return // a parent changed meanwhile: judged again on the next gap
		}
	}
	now := time.Now()
	wait, ok := escapeWait(sub.esc.last, sub.esc.wait, now)
	if !ok {
		return
	}
	sub.esc.wait = wait
	leave := sub.parents[mrand.IntN(2)]
	sub.esc.last, sub.esc.moving = now, true
	if !sub.s.goOwned(func() { sub.escape(leave, g.index) }) {
		sub.esc.moving = false
	}
}

// escapeWait decides whether a subscription whose last escape began at
// last (zero: none), with the interval wait after it, may escape at now,
// and the interval after this one: escapeMinWait at first and after an
// interval passed without one; doubled, up to escapeMaxWait, when it comes
// within two intervals of the last — that one did not stop the gaps (the
// publisher's own, maybe).
func escapeWait(last time.Time, wait time.Duration, now time.Time) (time.Duration, bool) {
	if last.IsZero() {
		return escapeMinWait, true
	}
	since := now.Sub(last)
	switch {
	case since < wait:
		return wait, false
	case since < 2*wait:
		return min(2*wait, escapeMaxWait), true
	}
	return escapeMinWait, true
}

// escape attaches the node to a third parent found by the root's probe
// (make-before-break, as a Reparent is followed) and then leaves parent
// leave; gap is the index that set it off. If no new parent is found,
// both stay.
func (sub *Subscription) escape(leave *parent, gap uint64) {
	s := sub.s
	sub.mu.Lock()
	if sub.closing || sub.fatal != nil || !sub.hasParentLocked(leave.cs.peer) {
		sub.esc.moving = false
		sub.mu.Unlock()
		return
	}
	var kept *parent
	for _, p := range sub.parents {
		if p != leave {
			kept = p
		}
	}
	sub.want++ // room for the new parent beside the old ones, for the overlap
	sub.mu.Unlock()
	ctx, cancel := context.WithTimeout(sub.ctx, s.opts.HandshakeTimeout+s.opts.ProbeWait)
	err := sub.acquire(ctx, sub.root, nil, false, nil)
	cancel()
	sub.mu.Lock()
	sub.want--
	sub.esc.moving = false
	gained := err == nil && len(sub.parents) > 2 && sub.hasParentLocked(leave.cs.peer)
	sub.mu.Unlock()
	if !gained {
		if err == nil {
			err = errNoParents
		}
		s.trace(Event{Kind: EventEscape, Cohort: sub.spec.String(), Peer: leave.cs.peer, Index: gap, Err: err})
		return
	}
	s.metrics.Escapes.Inc()
	sub.escapes.Add(1)
	s.trace(Event{Kind: EventEscape, Cohort: sub.spec.String(), Peer: leave.cs.peer, Index: gap})
	// Left as a parent that moved: no repair (the new one is in), no
	// blame, no shunning — the gap proves nothing against it alone.
	leave.moved.Store(true)
	leave.cs.closeOnce()
	if kept != nil {
		sub.forgive(kept)
	}
}

// forgive forgets what parent p missed so far — while both parents failed
// alike, the misses blame both or neither — so that the lag check judges
// it against the new parent from the escape on: an honest relay that was
// captured itself, and escaped too, is not dropped for what it lacked
// then; one that still withholds is dropped within an epoch. It takes dmu,
// then sub.mu, never both at once (the subscription's end holds sub.mu and
// takes dmu).
func (sub *Subscription) forgive(p *parent) {
	sub.dmu.Lock()
	for i := range sub.lag.ring.s {
		e := &sub.lag.ring.s[i]
		for j := range e.at {
			if e.at[j] == p.gen && p.gen != 0 {
				e.gave[j] = true
			}
		}
	}
	sub.dmu.Unlock()
	sub.mu.Lock()
	p.missed = 0
	sub.mu.Unlock()
}

// Escapes counts the times this subscription left one of two parents that
// both passed over an update (escape.go).
func (sub *Subscription) Escapes() uint64 { return sub.escapes.Load() }
