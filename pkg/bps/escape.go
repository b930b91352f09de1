// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	mrand "math/rand/v2"
	"time"
)

// A captured node escapes (docs/protocol.md, "A captured node escapes"). The withholding check
// (judge.go) compares a node's two parents with each other, so two parents
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

// escapeState is the judge's gap escape; under its mu.
type escapeState struct {
	// refs: the last lagWindowSize feed updates taken, by FrameKey: what
	// a byte-identical second copy was.
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

// noteGave records that parent stream from gave the update pub of an
// explicit feed, so that a gap can be told from a parent that is merely
// behind. A byte-identical second copy (pub unset) is credited by
// gaveCopy, through the lag check, which is told every copy and every lazy
// parent's announcement of a frame taken. Under j.mu.
func (j *judge) noteGave(from *clientStream, pub publication, key [32]byte, dup bool) {
	if !j.feed || !pub.feed {
		return
	}
	ref := gapRef{owner: string(pub.owner), index: pub.index}
	if !dup {
		j.esc.refs.put(gaveRef{key: key, gapRef: ref}, lagWindowSize, nil)
	}
	j.credit(from, ref)
}

// gaveCopy credits parent stream from with the feed update whose frame is
// key, if it is one of the last taken: it sent a copy, or announced it.
// Under j.mu.
func (j *judge) gaveCopy(from *clientStream, key [32]byte) {
	if !j.feed {
		return
	}
	for _, r := range j.esc.refs.s {
		if r.key == key && r.owner != "" {
			j.credit(from, r.gapRef)
			return
		}
	}
}

// credit raises from's high-water mark for ref's publisher; under j.mu.
func (j *judge) credit(from *clientStream, ref gapRef) {
	for _, q := range j.parents {
		if q.p.cs != from {
			continue
		}
		if q.gave == nil || len(q.gave) >= gaveOwners {
			q.gave = make(map[string]uint64) // a roster past the bound: start again
		}
		if i, ok := q.gave[ref.owner]; !ok || ref.index+1 > i {
			q.gave[ref.owner] = ref.index + 1
		}
	}
}

// gaps judges the gaps a reorder flush passed over (the receiver's onGaps).
// A gap that both of the node's two parents passed — each gave a later
// update of that publisher — and that neither is the root waits
// escapeGrace for a late copy, then (afterGrace) may move the node.
func (j *judge) gaps(gaps []gapRef) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.esc.moving || j.stopped || len(j.parents) != 2 {
		return
	}
	for _, q := range j.parents {
		if q.p.cs.peer.Equal(j.root) {
			return // the root gave what the publisher published: a gap is the publisher's
		}
	}
	for _, g := range gaps {
		both := true
		for _, q := range j.parents {
			if q.gave[g.owner] <= g.index+1 {
				both = false // this parent gave nothing past it: behind, not failing
			}
		}
		if !both {
			continue
		}
		gens := [2]uint32{j.parents[0].p.gen, j.parents[1].p.gen}
		if j.esc.timer != nil {
			// Another gap waits out its grace: this one is judged if
			// that one is filled late (one kept, the newest).
			j.esc.queued, j.esc.queuedGens, j.esc.hasQueued = g, gens, true
			return
		}
		j.armEscapeLocked(g, gens)
		return
	}
}

// armEscapeLocked has gap g, which both parents of generations gens
// failed, wait out escapeGrace; under j.mu.
func (j *judge) armEscapeLocked(g gapRef, gens [2]uint32) {
	j.esc.timer = time.AfterFunc(escapeGrace, func() { j.afterGrace(g, gens) })
}

// afterGrace runs escapeGrace after a gap both parents failed: if no late
// copy filled it and both are still the node's parents, the node escapes —
// unless it escaped less than the interval ago.
func (j *judge) afterGrace(g gapRef, gens [2]uint32) {
	filled := !j.acts.gapOpen(g)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.esc.timer = nil
	if j.stopped || len(j.parents) != 2 {
		return
	}
	if filled {
		if j.esc.hasQueued {
			// A later gap came while this one waited: judge it now.
			q, qg := j.esc.queued, j.esc.queuedGens
			j.esc.hasQueued = false
			j.armEscapeLocked(q, qg)
		}
		return
	}
	j.esc.hasQueued = false
	for i, q := range j.parents {
		if q.p.gen != gens[i] {
			return // a parent changed meanwhile: judged again on the next gap
		}
	}
	j.escapeNowLocked(g.index)
}

// escapeNowLocked leaves one of the node's parents, at random, for a
// parent the root's probe finds — unless an escape runs or the node
// escaped less than the interval ago; index is the update that set it off
// (a gap both of two parents passed over, or what the root's heartbeat
// said, which judges a single parent too: heartbeat.go). Under j.mu.
func (j *judge) escapeNowLocked(index uint64) {
	if j.esc.moving || j.stopped || len(j.parents) == 0 {
		return
	}
	now := time.Now()
	wait, ok := escapeWait(j.esc.last, j.esc.wait, now)
	if !ok {
		return
	}
	j.esc.wait = wait
	leave := j.parents[mrand.IntN(len(j.parents))].p
	j.esc.last, j.esc.moving = now, true
	if !j.s.goOwned(func() { j.escaped(j.acts.escape(leave, index)) }) {
		j.esc.moving = false
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

// escaped ends an escape; kept, the parent the node kept if it moved, is
// forgiven what it missed so far — while both parents failed alike, the
// misses blame both or neither — so that the lag check judges it against
// the new parent from the escape on: an honest relay that was captured
// itself, and escaped too, is not dropped for what it lacked then; one
// that still withholds is dropped within an epoch.
func (j *judge) escaped(kept *parent) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.esc.moving = false
	if kept == nil {
		return
	}
	for i := range j.lag.ring.s {
		e := &j.lag.ring.s[i]
		for k := range e.at {
			if e.at[k] == kept.gen && kept.gen != 0 {
				e.gave[k] = true
			}
		}
	}
	if q := j.of(kept); q != nil {
		q.missed = 0
	}
}

// Escapes counts the times this subscription left one of two parents that
// both passed over an update (escape.go).
func (sub *Subscription) Escapes() uint64 { return sub.escapes.Load() }
