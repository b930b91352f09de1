// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// A subscription's parents are judged by what they give, and by nothing
// they say: the judge sits beside the Subscription, fed by its events — a
// parent taken or lost, a delivery taken or a copy of one (took), a lazy
// parent's announcement, an ask not served, the gaps a reorder flush
// passed over — and keeps its own state under its own lock: the lag window
// and each parent's misses (below), each parent's high-water marks and
// the gap escape (escape.go). Its verdicts are actions it asks of the
// subscription (parentActions): drop a parent that withheld, or escape two
// parents that both failed a gap.
//
// Lock order: the receiver's dmu, then the subscription's mu, then the
// judge's mu. The judge takes no other lock while it holds its own, and
// asks for its actions once it let its own go.

// parentActions is what the judge asks of the subscription it judges for.
type parentActions interface {
	// withhold drops p as a parent that withheld, and never takes it
	// again.
	withhold(p *parent)
	// escape attaches the node to a new parent found from the root and
	// then leaves parent leave (gap is the index that set it off); it
	// returns the parent kept, nil if the node did not move.
	escape(leave *parent, gap uint64) (kept *parent)
	// gapOpen reports whether the reorder still passes over g: no late
	// copy filled it.
	gapOpen(g gapRef) bool
}

// judge judges one subscription's parents.
type judge struct {
	s    *Service
	spec *Spec
	root swarm.Address // the broker: a gap with the root as a parent is the publisher's
	acts parentActions
	feed bool // explicit FEED_TOPIC: the reorder reports gaps, parents' high-water marks count

	mu      sync.Mutex
	parents []*judged // the subscription's parents, in its order
	lag     lagWindow
	esc     escapeState
	hb      beatState       // the root's heartbeat (heartbeat.go)
	stopped bool            // the subscription is closing or over
	shunned []swarm.Address // parents dropped for withholding, most recent last; never taken again
	refused []refusedParent // parents whose Reparent the node refused or could not follow, oldest first

	withheld atomic.Uint64 // parents dropped for withholding (Position.Withheld)
}

// maxShunned bounds the withholding parents a judge remembers, and
// (apart) the parents it shuns for a Reparent it did not follow.
const maxShunned = 16

// refusedShun is how long a node shuns a parent whose Reparent it refused
// (a cycle, a target that is not rootward) or could not follow: a parent
// that keeps sending its children where they cannot go keeps free slots
// (every child leaves it at once), so the root's probe offers it again and
// again; shunned, it is skipped as a candidate and the node takes another
// or asks again. An honest relay sends a Reparent only as it leaves (to its
// own parent, rootward, followed): shunning it for a while costs nothing.
const refusedShun = time.Minute

// refusedParent is a parent shunned until a time for a Reparent not followed.
type refusedParent struct {
	peer  swarm.Address
	until time.Time
}

// judged is what the judge holds of one parent.
type judged struct {
	p      *parent
	missed int               // deliveries its sister gave and it did not, or announced and did not serve, this lag epoch
	gave   map[string]uint64 // per publisher: one past the highest explicit feed index it gave (escape.go)
}

func newJudge(s *Service, sp *Spec, root swarm.Address, acts parentActions, feed bool) *judge {
	return &judge{s: s, spec: sp, root: root, acts: acts, feed: feed}
}

var (
	_ observer      = (*judge)(nil)
	_ observer      = (*lazyIn)(nil)
	_ parentActions = (*Subscription)(nil)
)

// added is told, under the subscription's mu, that p became a parent.
func (j *judge) added(p *parent) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.parents = append(j.parents, &judged{p: p})
}

// lost is told, under the subscription's mu, that p is a parent no more.
func (j *judge) lost(p *parent, _ bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, q := range j.parents {
		if q.p == p {
			j.parents = slices.Delete(j.parents, i, i+1)
			return
		}
	}
}

// stop is told, under the subscription's mu, that the subscription is
// closing or over: nothing is judged any more.
func (j *judge) stop() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.stopped = true
	j.stopBeatLocked()
	if j.esc.timer != nil {
		j.esc.timer.Stop()
		j.esc.timer = nil
	}
}

// took is told, under the receiver's dmu, every valid delivery parent
// stream from gave: dup, one taken before from another parent.
func (j *judge) took(from *clientStream, pub publication, _ *pb.Broadcast, key [32]byte, dup bool) {
	j.mu.Lock()
	drop := j.noteLag(from, key, dup, j.sequenced(pub))
	j.noteGave(from, pub, key, dup)
	j.mu.Unlock()
	j.withhold(drop)
}

// copied is told, under the receiver's dmu, that parent stream from gave
// or announced the frame key of a delivery taken before (lazy.go).
func (j *judge) copied(from *clientStream, key [32]byte) {
	j.mu.Lock()
	drop := j.noteLag(from, key, true, false)
	j.mu.Unlock()
	j.withhold(drop)
}

// unserved counts a miss against p that is not a delivery leaving the
// window — an announcement it did not serve when asked (lazy.go) — and
// drops it at MaxLag this epoch, as a lag does.
func (j *judge) unserved(p *parent) {
	j.mu.Lock()
	var drop []*parent
	if q := j.of(p); q != nil {
		if q.missed++; q.missed == j.s.opts.MaxLag && len(j.parents) > 1 {
			drop = append(drop, p)
		}
	}
	j.mu.Unlock()
	j.withhold(drop)
}

// repeated counts a miss against the parent on stream from, which gave a
// delivery it gave before on the same stream (receiver.charge): a copy the
// eager/lazy overlap does not explain, which the node does not pay for,
// and judged as a withheld delivery is — dropped at MaxLag this epoch.
func (j *judge) repeated(from *clientStream) {
	j.mu.Lock()
	var drop []*parent
	if q := j.from(from); q != nil {
		if q.missed++; q.missed == j.s.opts.MaxLag && len(j.parents) > 1 {
			drop = append(drop, q.p)
		}
	}
	j.mu.Unlock()
	j.withhold(drop)
}

// withhold shuns each parent in drop — it is not taken as a parent again
// by this subscription — and asks the subscription to drop it; the caller
// holds no lock of the judge's.
func (j *judge) withhold(drop []*parent) {
	for _, p := range drop {
		j.mu.Lock()
		j.shunned = append(j.shunned, p.cs.peer)
		if len(j.shunned) > maxShunned {
			j.shunned = j.shunned[1:]
		}
		j.mu.Unlock()
		j.s.metrics.Withheld.Inc()
		j.withheld.Add(1)
		j.s.trace(Event{Kind: EventWithheld, Cohort: j.spec.String(), Peer: p.cs.peer})
		j.acts.withhold(p)
	}
}

// refusedReparent shuns peer, a parent whose Reparent the node refused or
// could not follow, for refusedShun; at most maxShunned are remembered,
// the oldest forgotten first.
func (j *judge) refusedReparent(peer swarm.Address) {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := time.Now()
	j.refused = slices.DeleteFunc(j.refused, func(r refusedParent) bool { return !now.Before(r.until) || r.peer.Equal(peer) })
	j.refused = append(j.refused, refusedParent{peer: peer, until: now.Add(refusedShun)})
	if len(j.refused) > maxShunned {
		j.refused = j.refused[1:]
	}
}

// shuns reports whether peer was dropped as a parent for withholding, or
// sent a Reparent the node did not follow within refusedShun.
func (j *judge) shuns(peer swarm.Address) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if slices.ContainsFunc(j.shunned, peer.Equal) {
		return true
	}
	now := time.Now()
	return slices.ContainsFunc(j.refused, func(r refusedParent) bool { return r.peer.Equal(peer) && now.Before(r.until) })
}

// lags is, by parent overlay, how many deliveries each parent missed this
// lag epoch (Position.Lag).
func (j *judge) lags() map[string]int {
	j.mu.Lock()
	defer j.mu.Unlock()
	lag := make(map[string]int, len(j.parents))
	for _, q := range j.parents {
		lag[q.p.cs.peer.ByteString()] = q.missed
	}
	return lag
}

// of is what the judge holds of p, nil if p is not a parent; under j.mu.
func (j *judge) of(p *parent) *judged {
	for _, q := range j.parents {
		if q.p == p {
			return q
		}
	}
	return nil
}

// from is what the judge holds of the parent on stream cs, nil if none;
// under j.mu.
func (j *judge) from(cs *clientStream) *judged {
	for _, q := range j.parents {
		if q.p.cs == cs {
			return q
		}
	}
	return nil
}

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
