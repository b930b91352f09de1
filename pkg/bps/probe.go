// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Bounds of the probe (SWIP-61, DESIGN §1.5).
const (
	maxCandidates   = 2   // SWIP-61: the two shallowest
	maxUnderlays    = 8   // per candidate or reparent
	maxUnderlaySize = 256 // bytes per underlay (a multiaddr)
	maxOpenProbes   = 64  // per cohort at one node: joins probing at once
	recentNonces    = 32  // closed nonces remembered per cohort: only to name a flood's violation
	// maxProbesPerSecond bounds the probes a parent may send one child in
	// a second: one past it is answered empty at once.
	maxProbesPerSecond = 1000
	// maxProbesInFlight bounds the probes from one parent a node forwards
	// into its subtree at once; one beyond is answered empty at once.
	maxProbesInFlight = 8
	// maxProbeFanout bounds the children one node probes for one join:
	// FCFS needs a free slot, not the best one (SWIP-61), and a probe that
	// reached every full relay would cost O(audience) frames per join.
	// Go's map order picks them.
	maxProbeFanout = 4
	// maxOriginFanout bounds the children the node a join reached probes
	// for it: its rounds feed the pool every later joiner is answered
	// from, and at a broker facing a crowd they are the bound on how fast
	// the crowd joins (two candidates per child asked, a round a few link
	// round trips). The nodes below ask maxProbeFanout.
	maxOriginFanout = 32
)

// Flash crowds: thousands of joiners at one broker in a second. Three
// rules keep each of them to about two answers (FULL with candidates, then
// OK) instead of a bare FULL and a backoff:
//
//   - a probe asks up to maxOriginFanout children at the node the join
//     reached (maxProbeFanout below) and finds up to two candidates in
//     each subtree, while a joiner is told two: the others
//     are pooled at the probing node, each handed out once and for
//     poolTTL at most, and a join the pool can answer takes no probe;
//   - a join the broker cannot answer at once — maxOpenProbes open, or a
//     round that found nothing because every free slot below is offered to
//     other joiners — is held for the probe wait, looking again whenever a
//     round closes (the joiners' attaches make new slots), and past it for
//     as long as the crowd makes progress (a round closed with candidates
//     within the last probe wait), up to maxHold and for at most
//     maxLongHeld joins; it is told a bare FULL only when the wait is
//     over. A round waits its own probe wait, not what is left of the
//     join's: a round cut short loses what its subtrees found. A relay,
//     answering its parent's probe or its child's refer-Join, never holds
//     (probeSubtree): a child repairing is better served by a quick answer
//     than a held one, and what its pool holds answers a probe at once;
//   - a node answers a probe with its own free slot once per slot: an
//     offer holds the slot for offerTTL or until a child takes it, so that
//     concurrent probes do not all send their joiners to the same one.
const (
	maxPooled = maxOpenProbes * maxOriginFanout * maxCandidates
	// maxLongHeld bounds the joins one cohort's root holds past the probe
	// wait (holdLonger), one per joiner: a crowd of 50,000 in a second
	// reached 8,192 (and was told 9,068 bare FULLs for it).
	maxLongHeld = 16384
)

// maxHold bounds how long the root holds a join while the crowd makes
// progress: a third of the handshake timeout (10 s by default), the bound
// a joiner on the same defaults gives its wait for the answer — well
// within it — and never less than the probe wait.
func (s *Service) maxHold() time.Duration {
	return max(s.opts.ProbeWait, s.opts.HandshakeTimeout/3)
}

// poolTTL bounds how long a pooled candidate is handed out: a quarter of
// a probe's wait, and no longer than the round that found it took — in a
// crowd the next joins come within it, and in a quiet tree the next join
// a second later is better served by a fresh round than by a slot taken
// since or a node that has become the joiner's descendant.
func (s *Service) poolTTL() time.Duration { return s.opts.ProbeWait / 4 }

// offerTTL is how long an offered slot is held for the joiner a probe was
// for, unless a child takes it first: an eighth of the probe's wait (250 ms
// by default, a crowd joiner's attach at 25 ms links takes ~200 ms). A
// joiner that needed one parent and was told two leaves the other offer
// to expire.
func (s *Service) offerTTL() time.Duration { return s.opts.ProbeWait / 8 }

// probePool is a cohort's pooled candidates, under the cohort's mu, and
// the joins held for them.
type probePool struct {
	found []pooled
	// waiting are the held joins, oldest first; gone counts the entries of
	// those that stopped waiting since. A round that closes wakes as many
	// as it can serve, not all: in a crowd of thousands held, waking every
	// one at every close costs each close the whole crowd.
	waiting []*poolWaiter
	gone    int
	// progress is when a round last closed with candidates: while it is
	// within a probe wait, the crowd is being placed and a held join is
	// held past its probe wait (holdLonger).
	progress time.Time
	// long are the joiners whose join is held past the probe wait: at
	// most maxLongHeld, one join each.
	long map[string]struct{}
}

// holdLonger reports whether joiner's join, past its probe wait, may be
// held on: the crowd made progress within the last probe wait, and fewer
// than maxLongHeld joins, none of them joiner's, are held so. A true
// answer takes a place the caller gives back with unhold.
func (p *probePool) holdLonger(now time.Time, joiner swarm.Address, wait time.Duration) bool {
	if joiner.IsZero() || now.Sub(p.progress) >= wait || len(p.long) >= maxLongHeld {
		return false
	}
	k := joiner.ByteString()
	if _, ok := p.long[k]; ok {
		return false
	}
	if p.long == nil {
		p.long = make(map[string]struct{})
	}
	p.long[k] = struct{}{}
	return true
}

// unhold gives back joiner's place among the joins held past the probe
// wait.
func (p *probePool) unhold(joiner swarm.Address) {
	delete(p.long, joiner.ByteString())
	if len(p.long) == 0 {
		p.long = nil
	}
}

// poolWaiter is a held join's place in the queue.
type poolWaiter struct {
	woken  chan struct{} // closed when a round's close wakes it
	queued bool          // in waiting and not yet woken or gone
}

// pooled is a candidate found and not handed out, until it goes stale.
type pooled struct {
	found
	until time.Time
}

// wait queues a held join, to be woken when a round closes; it calls
// leave when it stops waiting.
func (p *probePool) wait() *poolWaiter {
	w := &poolWaiter{woken: make(chan struct{}), queued: true}
	p.waiting = append(p.waiting, w)
	return w
}

// leave takes w out of the queue, woken or not.
func (p *probePool) leave(w *poolWaiter) {
	if w == nil || !w.queued {
		return
	}
	w.queued = false
	if p.gone++; p.gone > len(p.waiting)/2 {
		p.waiting = slices.DeleteFunc(p.waiting, func(w *poolWaiter) bool { return !w.queued })
		p.gone = 0
	}
}

// wake wakes the k oldest joins held.
func (p *probePool) wake(k int) {
	for k > 0 && len(p.waiting) > 0 {
		w := p.waiting[0]
		p.waiting[0] = nil
		p.waiting = p.waiting[1:]
		if !w.queued {
			p.gone--
			continue
		}
		w.queued = false
		close(w.woken)
		k--
	}
	if len(p.waiting) == 0 {
		p.waiting, p.gone = nil, 0 // the array the queue was sliced from goes
	}
}

// add pools what a probe found and did not hand out, and wakes as many of
// the joins held as it can serve: one a pooled candidate, and one for the
// probe slot that closed.
func (p *probePool) add(rest []found, until time.Time) {
	for _, f := range rest {
		if len(p.found) == maxPooled {
			break
		}
		if !slices.ContainsFunc(p.found, func(q pooled) bool { return slices.Equal(q.c.Overlay, f.c.Overlay) }) {
			p.found = append(p.found, pooled{found: f, until: until})
		}
	}
	p.wake(len(p.found) + 1)
}

// take hands out the best candidates the pool holds for a joiner at depth
// or below, if it holds at least need of them; they leave the pool.
func (p *probePool) take(now time.Time, depth uint32, exclude swarm.Address, need int) []*pb.Candidate {
	p.found = slices.DeleteFunc(p.found, func(q pooled) bool { return !q.until.After(now) })
	var fit []found
	for _, q := range p.found {
		if q.c.Depth >= depth {
			fit = append(fit, q.found)
		}
	}
	best := bestCandidates(fit, exclude)
	if len(best) < need || len(best) == 0 {
		return nil
	}
	p.found = slices.DeleteFunc(p.found, func(q pooled) bool { return slices.Contains(best, q.c) })
	return best
}

// offers are the slots a node offered in answers to probes and that no
// child has taken yet, oldest first, one per joiner (a probe reaches a
// node once through each of its parents); under the subscription's mu.
type offers struct {
	held   []offer
	fanout int // the fan-out when last counted: each child since took the oldest offer
}

type offer struct {
	joiner swarm.Address // zero: a probe that named none
	until  time.Time
}

// take reports whether the node may offer joiner one of its free slots
// now, and if so holds it until until. A joiner offered a slot already is
// offered it again.
func (o *offers) take(now, until time.Time, joiner swarm.Address, free, fanout int) bool {
	if d := fanout - o.fanout; d > 0 {
		o.held = o.held[min(d, len(o.held)):]
	}
	o.fanout = fanout
	o.held = slices.DeleteFunc(o.held, func(h offer) bool { return !h.until.After(now) })
	if free <= 0 {
		return false
	}
	if !joiner.IsZero() {
		if i := slices.IndexFunc(o.held, func(h offer) bool { return h.joiner.Equal(joiner) }); i >= 0 {
			o.held[i].until = until
			return true
		}
	}
	if len(o.held) >= free {
		return false
	}
	o.held = append(o.held, offer{joiner: joiner, until: until})
	return true
}

// holding reports whether a slot offered is still held at now: while it
// is, the node keeps the rank its candidate stated (mayAttachUnder).
func (o *offers) holding(now time.Time) bool {
	for _, h := range o.held {
		if h.until.After(now) {
			return true
		}
	}
	return false
}

// probeWait is one open probe at a node: the children asked, the depth
// they were told, and the candidates they answered with.
type probeWait struct {
	asked map[*member]bool // answered?
	depth uint32           // the probed children's depth: no candidate lies above it
	left  int
	found []found
	ready chan struct{} // closed when every child asked has answered
}

// found is a candidate and the child whose subtree it came from.
type found struct {
	from *member
	c    *pb.Candidate
}

func candidateWellFormed(c *pb.Candidate) bool {
	if c == nil || len(c.Overlay) != swarm.HashSize || len(c.Underlays) > maxUnderlays {
		return false
	}
	for _, u := range c.Underlays {
		if len(u) == 0 || len(u) > maxUnderlaySize {
			return false
		}
	}
	return true
}

// bestCandidates keeps the two shallowest distinct candidates, none of
// them exclude, ordered by depth and, at one depth, at random (SWIP-61's
// min-2 filter), at most one from each child's subtree: a joiner's two
// parents come from different subtrees, so that one child — which states
// its candidates' depths on its own word — can be at most one of them.
//
// Not by overlay at one depth: an overlay is chosen by its node (mined
// small), and a child may name any node as its candidate — a sybil
// naming the smaller of two colluders' overlays won every tie (bps-sim
// -attack candidates).
func bestCandidates(all []found, exclude swarm.Address) []*pb.Candidate {
	all = slices.DeleteFunc(slices.Clone(all), func(f found) bool {
		return swarm.NewAddress(f.c.Overlay).Equal(exclude)
	})
	mrand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	slices.SortStableFunc(all, func(a, b found) int { return cmp.Compare(a.c.Depth, b.c.Depth) })
	var best []*pb.Candidate
	var from []*member
	for _, f := range all {
		if len(best) == maxCandidates {
			break
		}
		if slices.Contains(from, f.from) || slices.ContainsFunc(best, func(c *pb.Candidate) bool { return slices.Equal(c.Overlay, f.c.Overlay) }) {
			continue
		}
		best, from = append(best, f.c), append(from, f.from)
	}
	return best
}

// probe searches c's subtree for free slots over the streams it has
// (SWIP-61) and returns the two shallowest candidates found, within wait —
// or, while the crowd makes progress, longer (holdLonger, up to maxHold;
// a round started within the wait runs its own wait out). Two candidates
// in the pool answer at once. Else a probe round goes out (probeOnce);
// when a round found nothing while other joins are being probed (every
// free slot below is offered to other joiners, whose attaches make new
// ones), the join looks again, and while maxOpenProbes are open it is held
// in a queue until a round closes (as long as its last round took, if it
// ran one) — a crowd's joins are held here rather than told a bare FULL
// and backed off. A round's close wakes the oldest held joins, as many as
// it can serve. Only the root (the broker) holds joins; a relay answers at
// once.
func (s *Service) probe(c *cohort, childDepth uint32, exclude swarm.Address, wait time.Duration) []*pb.Candidate {
	c.mu.Lock()
	root := c.role.holdsJoins()
	c.mu.Unlock()
	if !root {
		// A relay asked to refer — its child repairing — answers as it
		// answers a probe: a crowd joins at the root.
		return s.probeSubtree(c, childDepth, exclude, wait)
	}
	start := time.Now()
	deadline := start.Add(wait)
	long := false // held past the probe wait: a place among maxLongHeld
	defer func() {
		if long {
			c.mu.Lock()
			c.pool.unhold(exclude)
			c.mu.Unlock()
		}
	}()
	pause := time.Duration(0) // how long the last fruitless round took
	need := maxCandidates     // from the pool: two at first, one once held (the second parent comes later)
	woken := false
	busy := false // the last round found every child to ask busy
	for ; ; need = 1 {
		c.mu.Lock()
		if best := c.pool.take(time.Now(), childDepth, exclude, need); best != nil {
			c.mu.Unlock()
			return best
		}
		if woken && len(c.pool.found) > 0 {
			c.pool.wake(1) // what is pooled is not for this join: the next may take it
		}
		if c.dead || c.svc.Ended() {
			c.mu.Unlock()
			return nil
		}
		open := len(c.probes) < maxOpenProbes && !busy
		var held *poolWaiter
		if !open {
			held = c.pool.wait()
		}
		c.mu.Unlock()
		if open {
			began := time.Now()
			best, asked := s.probeOnce(c, childDepth, exclude, wait, maxOriginFanout)
			if len(best) > 0 || asked == 0 {
				return best // found, or nobody to ask
			}
			c.mu.Lock()
			crowd := len(c.probes) > 0 || len(c.pool.waiting) > c.pool.gone
			c.mu.Unlock()
			if !crowd {
				return nil // nothing below, and no other join, probing or held, whose attach could make room
			}
			if busy = asked < 0; !busy {
				pause = time.Since(began)
			}
		}
		left := time.Until(deadline)
		if left <= 0 && s.ctx.Err() == nil {
			// The probe wait is over: while the crowd makes progress,
			// hold on, up to maxHold.
			now := time.Now()
			c.mu.Lock()
			if now.Sub(c.pool.progress) < wait && (long || c.pool.holdLonger(now, exclude, wait)) {
				long = true
				deadline = c.pool.progress.Add(wait)
				if end := start.Add(s.maxHold()); end.Before(deadline) {
					deadline = end
				}
			}
			c.mu.Unlock()
			left = time.Until(deadline)
		}
		if left <= 0 || s.ctx.Err() != nil {
			c.mu.Lock()
			c.pool.leave(held)
			best := c.pool.take(time.Now(), childDepth, exclude, 1)
			c.mu.Unlock()
			return best
		}
		if held == nil {
			woken = false
			continue // a round closed (this join's own): look again at once
		}
		wait := left
		if pause > 0 {
			wait = min(pause, left)
		}
		t := time.NewTimer(wait) // made for its time: a timer moved while pending costs the runtime a pass over its heap
		select {
		case <-held.woken:
			woken = true
		case <-t.C:
			woken = false
		case <-s.ctx.Done():
		}
		t.Stop()
		busy = false
		c.mu.Lock()
		c.pool.leave(held)
		c.mu.Unlock()
	}
}

// probeSubtree answers a parent's probe from this relay's subtree: two
// pooled candidates, or what one round finds; it never holds the answer
// (the join is held at the node it asked, probe).
func (s *Service) probeSubtree(c *cohort, childDepth uint32, exclude swarm.Address, wait time.Duration) []*pb.Candidate {
	c.mu.Lock()
	best := c.pool.take(time.Now(), childDepth, exclude, maxCandidates)
	c.mu.Unlock()
	if best == nil {
		best, _ = s.probeOnce(c, childDepth, exclude, wait, maxProbeFanout)
	}
	return best
}

// probeOnce sends one probe round: Probe{childDepth, nonce, joiner} to
// every child that speaks the envelope and may relay (a subscriber stream;
// never exclude's — the joiner's — whose subtree the probe does not
// enter), up to fanout, and returns the two shallowest candidates
// among their answers, collected until every child answered or wait
// passed, and how many children it asked (-1: none, each child to ask
// having half its queue taken); it pools the other candidates.
func (s *Service) probeOnce(c *cohort, childDepth uint32, exclude swarm.Address, wait time.Duration, fanout int) ([]*pb.Candidate, int) {
	began := time.Now()
	var nb [8]byte
	_, _ = rand.Read(nb[:])
	nonce := binary.BigEndian.Uint64(nb[:])
	pr := &pb.Probe{Depth: childDepth, Nonce: nonce}
	if !exclude.IsZero() {
		pr.Joiner = exclude.Bytes()
	}
	frame := encodeFrame(pr)

	c.mu.Lock()
	if c.dead || c.svc.Ended() || len(c.probes) >= maxOpenProbes {
		c.mu.Unlock()
		return nil, 1 // raced: look again
	}
	pw := &probeWait{asked: make(map[*member]bool), depth: childDepth, ready: make(chan struct{})}
	var peers []swarm.Address // one stream per peer is asked: more identities buy no more say
	busy := false
	for m := range c.children {
		if m.codec != codecEnvelope || m.role != roleSubscriber || m.declared != nil || m.silent || m.peer.Equal(exclude) || isDone(m.quit) ||
			slices.ContainsFunc(peers, m.peer.Equal) {
			continue
		}
		if len(pw.asked) == fanout {
			break
		}
		if m.halfTaken() {
			// Half the child's queue is kept for its deliveries: under a
			// crowd's rounds a full queue left no child to ask, and a
			// delivery that finds it full resets the stream.
			busy = true
			continue
		}
		if m.offer(outFrame{b: frame, kind: kindProbe}) {
			pw.asked[m] = false
			peers = append(peers, m.peer)
		}
	}
	pw.left = len(pw.asked)
	if pw.left == 0 {
		c.mu.Unlock()
		if busy {
			return nil, -1 // every child to ask is busy: look again when a round closes
		}
		return nil, 0
	}
	if c.probes == nil {
		c.probes = make(map[uint64]*probeWait)
	}
	c.probes[nonce] = pw
	c.mu.Unlock()
	s.metrics.Probes.Inc()

	t := time.NewTimer(wait)
	select {
	case <-pw.ready:
	case <-t.C:
	case <-s.ctx.Done():
	}
	t.Stop()

	c.mu.Lock()
	delete(c.probes, nonce)
	for m, answered := range pw.asked {
		if !answered {
			m.owed++ // it may still answer, late
		}
	}
	c.doneProbes = append(c.doneProbes, nonce)
	if len(c.doneProbes) > recentNonces {
		c.doneProbes = c.doneProbes[1:]
	}
	best := bestCandidates(pw.found, exclude)
	if len(pw.found) > 0 {
		c.pool.progress = time.Now()
	}
	c.pool.add(slices.DeleteFunc(pw.found, func(f found) bool {
		return slices.ContainsFunc(best, func(b *pb.Candidate) bool { return slices.Equal(b.Overlay, f.c.Overlay) })
	}), time.Now().Add(min(time.Since(began), s.poolTTL())))
	c.mu.Unlock()
	s.trace(Event{Kind: EventProbe, Cohort: c.spec.String(), Peer: exclude, Index: uint64(len(best))})
	return best, len(pw.asked)
}

// candidates takes a child's answer to an open probe. An answer to a probe
// the child was not asked, or answered already, or with more than two
// candidates or a malformed one, is a violation; a late answer to a probe
// closed recently is dropped, up to a bound.
func (c *cohort) candidates(from *member, cs *pb.Candidates) error {
	if len(cs.Candidates) > maxCandidates {
		c.r.s.count(c, CounterWrongStream)
		return violationf("%d candidates in one answer", len(cs.Candidates))
	}
	for _, cand := range cs.Candidates {
		if !candidateWellFormed(cand) {
			c.r.s.count(c, CounterWrongStream)
			return violationf("a malformed candidate")
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pw := c.probes[cs.Nonce]
	if pw == nil {
		// Late, not wrong — but a child answers each probe it was asked
		// once: one answer more than the probes that closed without its
		// answer is a flood. What the child owes bounds it, not the
		// nonces this node remembers: under a storm of probes more than
		// recentNonces close while an honest child's answer is on its way.
		if from.owed == 0 {
			c.r.s.count(c, CounterWrongStream)
			if slices.Contains(c.doneProbes, cs.Nonce) {
				return violationf("a late answer to a probe it answered, or was not asked")
			}
			return violationf("candidates for no open probe")
		}
		from.owed--
		return nil
	}
	answered, asked := pw.asked[from]
	if !asked || answered {
		c.r.s.count(c, CounterWrongStream)
		return violationf("candidates for a probe this stream was not asked, or answered already")
	}
	for _, cand := range cs.Candidates {
		if cand.Depth < pw.depth {
			// The child's subtree lies at its depth or below: a candidate
			// above it is a lie, whatever the child says of itself.
			c.r.s.count(c, CounterWrongStream)
			return violationf("a candidate at depth %d above the subtree probed at %d", cand.Depth, pw.depth)
		}
	}
	pw.asked[from] = true
	for _, cand := range cs.Candidates {
		pw.found = append(pw.found, found{from: from, c: cand})
	}
	if pw.left--; pw.left == 0 {
		close(pw.ready)
	}
	return nil
}

// answerProbe answers a probe parent p sent down (SWIP-61): with this node
// itself if it has a free slot as a relay, with nothing if it cannot relay,
// and else with what a probe of its own subtree finds, within half the
// probe wait. One probe per parent is answered at a time, and not more
// often than maxProbesPerSecond; one beyond is answered empty at once.
func (sub *Subscription) answerProbe(p *parent, pr *pb.Probe) {
	s := sub.s
	sub.probes.Add(1)
	answer := func(cands []*pb.Candidate) {
		p.cs.push(s, outFrame{b: encodeFrame(&pb.Candidates{Candidates: cands, Nonce: pr.Nonce}), kind: kindCandidates})
	}
	joiner := swarm.NewAddress(pr.Joiner)
	if s.opts.RelayCapacity == 0 || p.cs.codec != codecEnvelope || !p.probeAllowed(time.Now()) ||
		len(pr.Joiner) != 0 && (len(pr.Joiner) != swarm.HashSize || joiner.Equal(s.overlay)) {
		// Nothing to offer, too many probes, or this node is the joiner:
		// its own subtree is no place for it.
		answer(nil)
		return
	}
	// A candidate states its rank where the probe's path is shorter
	// (Subscription.depth): the joiner, if it has children, takes only
	// parents ranked above it. A child of the joiner offers nothing: its
	// subtree is the joiner's own.
	depth := max(pr.Depth, sub.depth())
	if depth >= maxDepth-1 || len(pr.Joiner) != 0 && sub.hasParent(joiner) {
		answer(nil)
		return
	}
	sub.mu.Lock()
	c := sub.relay
	sub.mu.Unlock()
	fanout := 0
	if c != nil {
		c.mu.Lock()
		fanout = c.fanout
		c.mu.Unlock()
	}
	// A free slot not offered to another probe's joiner yet.
	now := time.Now()
	sub.mu.Lock()
	offered := sub.offers.take(now, now.Add(s.offerTTL()), joiner, s.opts.RelayCapacity-fanout, fanout)
	sub.mu.Unlock()
	if offered {
		var under [][]byte
		if s.opts.Underlays != nil {
			under = s.opts.Underlays()
			under = under[:min(len(under), maxUnderlays)]
		}
		answer([]*pb.Candidate{{Overlay: s.overlay.Bytes(), Depth: depth, Underlays: under}})
		return
	}
	if len(pr.Joiner) == 0 {
		joiner = swarm.ZeroAddress
	}
	if c != nil {
		// What an earlier round pooled answers at once, before the bound
		// on the rounds in flight: it costs no round.
		c.mu.Lock()
		best := c.pool.take(now, depth+1, joiner, maxCandidates)
		c.mu.Unlock()
		if best != nil {
			answer(best)
			return
		}
	}
	if c == nil || p.probing.Add(1) > maxProbesInFlight {
		p.probing.Add(-1)
		answer(nil)
		return
	}
	if !s.goOwned(func() {
		defer p.probing.Add(-1)
		answer(s.probeSubtree(c, depth+1, joiner, s.opts.ProbeWait/2))
	}) {
		p.probing.Add(-1)
	}
}

// probeAllowed counts a probe from p in the current second and reports
// whether it is within maxProbesPerSecond; the parent's reader only.
func (p *parent) probeAllowed(now time.Time) bool {
	if now.Sub(p.window) >= time.Second {
		p.window, p.probes = now, 0
	}
	p.probes++
	return p.probes <= maxProbesPerSecond
}

// unprobe counts a child that left as having answered every open probe it
// was asked, empty: nobody waits for a stream that is gone. The caller
// holds c.mu.
func (c *cohort) unprobe(m *member) {
	for _, pw := range c.probes {
		if answered, asked := pw.asked[m]; asked && !answered {
			pw.asked[m] = true
			if pw.left--; pw.left == 0 {
				close(pw.ready)
			}
		}
	}
}

// halfTaken reports whether half of the stream's queue or more is taken;
// a probe round leaves the rest to its deliveries (probeOnce).
func (ps *peerStream) halfTaken() bool {
	ps.wmu.Lock()
	defer ps.wmu.Unlock()
	return ps.queue.n >= ps.queue.max/2
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
