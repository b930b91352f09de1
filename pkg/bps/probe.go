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
	maxOpenProbes   = 16  // per cohort at one node: joins probing at once
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
)

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
// (SWIP-61): Probe{childDepth, nonce, joiner} to every child that speaks
// the envelope and may relay (a subscriber stream; never exclude's — the
// joiner's — whose subtree the probe does not enter), and the
// two shallowest candidates among their answers, collected until every
// child answered or wait passed.
func (s *Service) probe(c *cohort, childDepth uint32, exclude swarm.Address, wait time.Duration) []*pb.Candidate {
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
		return nil
	}
	pw := &probeWait{asked: make(map[*member]bool), depth: childDepth, ready: make(chan struct{})}
	var peers []swarm.Address // one stream per peer is asked: more identities buy no more say
	for m := range c.children {
		if m.codec != codecEnvelope || m.role != roleSubscriber || m.declared != nil || m.silent || m.peer.Equal(exclude) || isDone(m.quit) ||
			slices.ContainsFunc(peers, m.peer.Equal) {
			continue
		}
		if len(pw.asked) == maxProbeFanout {
			break
		}
		if m.offer(outFrame{b: frame, kind: kindProbe}) {
			pw.asked[m] = false
			peers = append(peers, m.peer)
		}
	}
	pw.left = len(pw.asked)
	if pw.left == 0 {
		c.mu.Unlock()
		return nil
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
	found := pw.found
	c.mu.Unlock()
	best := bestCandidates(found, exclude)
	s.trace(Event{Kind: EventProbe, Cohort: c.spec.String(), Peer: exclude, Index: uint64(len(best))})
	return best
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
	free := s.opts.RelayCapacity
	if c != nil {
		c.mu.Lock()
		free -= c.fanout
		c.mu.Unlock()
	}
	if free > 0 {
		var under [][]byte
		if s.opts.Underlays != nil {
			under = s.opts.Underlays()
			under = under[:min(len(under), maxUnderlays)]
		}
		answer([]*pb.Candidate{{Overlay: s.overlay.Bytes(), Depth: depth, Underlays: under}})
		return
	}
	if c == nil || p.probing.Add(1) > maxProbesInFlight {
		p.probing.Add(-1)
		answer(nil)
		return
	}
	if len(pr.Joiner) == 0 {
		joiner = swarm.ZeroAddress
	}
	if !s.goOwned(func() {
		defer p.probing.Add(-1)
		answer(s.probe(c, depth+1, joiner, s.opts.ProbeWait/2))
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

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
