// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/internal/delay"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest/bpsnet"
	"github.com/ethersphere/bps/pkg/treeview"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// The attacking simulator (-byzantine F -attack NAME): a fraction F of the
// subscribers run the real pkg/bps Service and follow the protocol except
// for one attack. Nothing of it is in pkg/bps: an attacker's wire is
// altered by a wrapper around every stream its node holds
// (streamtest.Node.SetStreamWrapper) that decodes the frames the Service
// writes and reads, and drops, delays, rewrites, duplicates or injects
// frames. Attackers collude: each knows the others of its cohort, and what
// one node of the network saw of a publisher's claim.
//
// Brokers and publishers are never attackers. What the run reports
// (AttackResult) is about the honest subscribers.

// attackDef is one attack: its name on the command line and what it does.
type attackDef struct {
	name, help string
}

// attacks are the attacks -attack accepts.
var attacks = []attackDef{
	{"none", "the control: follow the protocol, as honest nodes do (the share captured by chance)"},
	{"candidates", "forged candidates: answer every probe with itself and a fellow attacker, both at the probe's depth (the shallowest a candidate may claim), room or not"},
	{"depth-lie", "depth lies: state depth 0 in the Ack to every child and in every candidate"},
	{"withhold", "selective withholding: drop every k-th message (-attack-k) to children"},
	{"withhold-publisher", "selective withholding: drop every update of the cohort's publisher to children, pass the service feed (and drop the root's heartbeat)"},
	{"withhold-publisher-hb", "withhold-publisher, passing the root's heartbeat too"},
	{"delay", "hold every message to children for -attack-delay"},
	{"replay", "replay genuine messages older than the dedup window: one with every message, down to children and up to parents"},
	{"reparent", "reparent hijack: a Reparent to every child, pointing at a fellow attacker or into the child's own subtree (a cycle)"},
	{"probe-flood", "send -attack-flood probes to each child with every message"},
	{"candidate-flood", "send -attack-flood unasked Candidates to each parent with every message"},
	{"refer-flood", "open -attack-flood refer Joins at each parent, once a second"},
	{"claim-replay", "present a publisher's claiming chunk (its first frame: an AUTH under its stream's challenge, as a node on its path saw it) on streams of its own at the root declaring the publisher's address, once a second (SWIP-74 Rev 8: signed under another stream's challenge, it claims nothing)"},
	{"squat", "slot hunting: plain multihop Joins to full nodes (each makes the node probe its subtree), 4 a second, and every free slot found filled with a stream declaring a made-up address that never pays, up to -attack-flood held (squat.go)"},
	{"squat-root", "slot hunting as squat, every hunting Join at the cohort's root (where the probe rations bind: one peer, one node)"},
}

// attackNames lists the attacks for -h.
func attackNames() string {
	var b strings.Builder
	for _, a := range attacks {
		fmt.Fprintf(&b, "\n  %s: %s", a.name, a.help)
	}
	return b.String()
}

func knownAttack(name string) bool {
	return slices.ContainsFunc(attacks, func(a attackDef) bool { return a.name == name })
}

// Bounds of what attackers keep.
const (
	replayKeep     = 512 // messages an attacker keeps to replay
	replayAge      = 300 // messages back it replays: past the dedup window (256)
	delayQueue     = 256 // frames held per delayed stream; more are dropped
	attackHandshak = 3 * time.Second
)

// adversary runs the attackers of a run and keeps the books on what they
// did to the honest nodes.
type adversary struct {
	sim   *sim
	kind  string
	k     int
	delay time.Duration
	flood int

	ctx    context.Context // ends with the run
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine of the attackers: delayed writers, floods, claim replays

	bad     map[string]bool        // overlay (ByteString) -> attacker; written before the run
	cohort  map[string]int         // attacker overlay -> its cohort
	byCoh   [][]swarm.Address      // attackers by cohort
	roots   map[string]int         // broker overlay -> cohort
	nodes   map[string]*attackNode // attacker overlay -> its state
	sniffed []atomic.Pointer[sniffedClaim]

	mu        sync.Mutex // guards the fields below
	lostAt    map[string]time.Time
	repairs   []time.Duration
	withheldH uint64               // honest nodes dropping honest parents for lag
	withheldA uint64               // honest nodes dropping attacker parents for lag
	starvedH  uint64               // of withheldH, parents that were captured themselves (every parent an attacker) or had none
	faults    uint64               // honest nodes losing both parents
	reparents uint64               // honest nodes moving on a Reparent
	escapes   [3]uint64            // honest nodes leaving a parent for a gap both passed over: [an attacker left, an honest one left, no new parent found]
	escapedAt map[string]time.Time // honest node -> when it last escaped (gained a parent from the root's probe)
	escapedH  uint64               // of starvedH, parents that were not captured at the drop but had escaped a capture shortly before
	captured  []float64
	twoPar    []float64         // fraction of honest nodes with two parents, per sample
	viol      [2]uint64         // violations honest nodes (roots included) found: [by an honest peer, by an attacker]
	framed    map[string]uint64 // why honest peers were found violating, by reason
	rootDrops map[string]uint64
	injected  map[string]uint64 // frames attackers sent, by kind

	squats    atomic.Uint64 // squat streams opened (-attack squat)
	squatted  atomic.Uint64 // deliveries read on squat streams: charged by their parents, never paid
	squatBeat atomic.Uint64 // the root's heartbeats read on squat streams: free, never charged

	rootRead  [2]atomic.Int64  // ns the roots' readers spent between reads of [honest, attacker] streams
	rootFrame [2]atomic.Uint64 // frames roots read from [honest, attacker]
	rootBytes [2]atomic.Uint64
}

// attackNode is what one attacker keeps.
type attackNode struct {
	nd       *bpsnet.Node
	mu       sync.Mutex
	replay   [][]byte // bare Message frames it was given, oldest first
	lastRef  time.Time
	lastClm  time.Time
	referBsy atomic.Bool
}

// sniffedClaim is a publisher's claiming chunk (its stream's first frame
// after the Join) as the node it went through saw it.
type sniffedClaim struct {
	join  *pb.Join
	claim *pb.Broadcast
}

// newAdversary picks the attackers among the subscribers of s and wraps
// their nodes' streams; it wraps the brokers' streams to meter what they
// read, and the publishers' to see their claims.
func newAdversary(ctx context.Context, s *sim) *adversary {
	sc := s.sc
	ctx, cancel := context.WithCancel(ctx)
	a := &adversary{sim: s, ctx: ctx, cancel: cancel, kind: sc.Attack, k: max(sc.AttackK, 2), delay: time.Duration(sc.AttackDelay), flood: max(sc.AttackFlood, 1),
		bad: map[string]bool{}, cohort: map[string]int{}, roots: map[string]int{}, nodes: map[string]*attackNode{},
		byCoh: make([][]swarm.Address, len(s.cohorts)), sniffed: make([]atomic.Pointer[sniffedClaim], len(s.cohorts)),
		lostAt: map[string]time.Time{}, rootDrops: map[string]uint64{}, injected: map[string]uint64{}}
	n := int(sc.Byzantine*float64(len(s.slots)) + 0.5)
	s.mu.Lock()
	perm := s.rng.Perm(len(s.slots))[:min(n, len(s.slots))]
	s.mu.Unlock()
	for _, j := range perm {
		sl := s.slots[j]
		ov := sl.node.Overlay()
		a.bad[ov.ByteString()] = true
		a.cohort[ov.ByteString()] = sl.cohort
		a.byCoh[sl.cohort] = append(a.byCoh[sl.cohort], ov)
		an := &attackNode{nd: sl.node}
		a.nodes[ov.ByteString()] = an
		sl.attacker = true
	}
	for _, an := range a.nodes {
		a.arm(an)
		if a.kind == "squat" || a.kind == "squat-root" {
			a.wg.Add(1)
			go a.hunt(an)
		}
	}
	for i, st := range s.cohorts {
		a.roots[st.c.Broker.Overlay().ByteString()] = i
		root := st.c.Broker
		root.SetStreamWrapper(func(st p2p.Stream, peer swarm.Address, dialed bool) p2p.Stream {
			if dialed {
				return st
			}
			return &meterStream{Stream: st, a: a, bad: a.isBad(peer)}
		})
		for _, pub := range st.c.Publishers {
			pub.SetStreamWrapper(func(st p2p.Stream, _ swarm.Address, dialed bool) p2p.Stream {
				if !dialed {
					return st
				}
				return &sniffStream{Stream: st, a: a, cohort: i}
			})
		}
	}
	return a
}

// arm wraps an attacker's streams (again after a restart).
func (a *adversary) arm(an *attackNode) {
	an.nd.SetStreamWrapper(func(st p2p.Stream, peer swarm.Address, dialed bool) p2p.Stream {
		return &attackStream{Stream: st, a: a, an: an, peer: peer, dialed: dialed, done: make(chan struct{})}
	})
}

// rearm re-wraps the streams of a slot's new incarnation if it is an
// attacker.
func (a *adversary) rearm(old, fresh *bpsnet.Node) {
	if a == nil {
		return
	}
	if an := a.nodes[old.Overlay().ByteString()]; an != nil {
		an.mu.Lock()
		an.nd = fresh
		an.mu.Unlock()
		a.arm(an)
	}
}

func (a *adversary) isBad(ov swarm.Address) bool { return a.bad[ov.ByteString()] }

func (a *adversary) count(kind string, n int) {
	a.mu.Lock()
	a.injected[kind] += uint64(n)
	a.mu.Unlock()
}

// buddy is a fellow attacker of self's cohort, other than self: the one
// after it.
func (a *adversary) buddy(self swarm.Address) (swarm.Address, bool) {
	c, ok := a.cohort[self.ByteString()]
	if !ok || len(a.byCoh[c]) < 2 {
		return swarm.ZeroAddress, false
	}
	l := a.byCoh[c]
	i := slices.IndexFunc(l, self.Equal)
	return l[(i+1)%len(l)], true
}

// stop ends the attacks; what they started ends with the streams it
// writes to (wg).
func (a *adversary) stop() { a.cancel() }

// trace books the events of honest nodes: lag drops, parents lost and
// regained, liveness faults, reparents; and the roots' violations and
// drops.
func (a *adversary) trace(nd *bpsnet.Node, e bps.Event) {
	if a == nil {
		return
	}
	self := nd.Overlay().ByteString()
	if a.bad[self] {
		return
	}
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.Kind == bps.EventViolation {
		if a.isBad(e.Peer) {
			a.viol[1]++
		} else {
			a.viol[0]++
			if a.framed == nil {
				a.framed = map[string]uint64{}
			}
			why := fmt.Sprint(e.Err)
			if len(why) > 120 {
				why = why[:120]
			}
			a.framed[why]++
		}
		return
	}
	if _, root := a.roots[self]; root {
		if e.Kind == bps.EventDrop {
			a.rootDrops[e.Counter.String()]++
		}
		return
	}
	switch e.Kind {
	case bps.EventWithheld:
		if a.isBad(e.Peer) {
			a.withheldA++
		} else {
			a.withheldH++
			if a.ctx.Err() == nil { // not once the attackers are being waited for
				a.wg.Add(1)
				go a.starved(e.Peer, e.Cohort)
			}
		}
		if _, ok := a.lostAt[self]; !ok {
			a.lostAt[self] = now
		}
	case bps.EventParentLost:
		if _, ok := a.lostAt[self]; !ok {
			a.lostAt[self] = now
		}
	case bps.EventFault:
		a.faults++
	case bps.EventReparent:
		if e.Err == nil {
			a.reparents++
		}
	case bps.EventEscape:
		switch {
		case e.Err != nil:
			a.escapes[2]++
		case a.isBad(e.Peer):
			a.escapes[0]++
		default:
			a.escapes[1]++
		}
		if e.Err == nil {
			if a.escapedAt == nil {
				a.escapedAt = map[string]time.Time{}
			}
			a.escapedAt[self] = now
		}
	case bps.EventParent:
		if e.Status != pb.Status_OK.String() {
			return
		}
		if t, ok := a.lostAt[self]; ok {
			a.repairs = append(a.repairs, now.Sub(t))
			delete(a.lostAt, self)
		}
	}
}

// starved books an honest parent that an honest node dropped for lag as
// starved if its own parents are all attackers (or it has none): it
// lacked what it did not pass on, and was not framed.
func (a *adversary) starved(peer swarm.Address, cohort string) {
	defer a.wg.Done()
	nd, ok := a.sim.net.Lookup(peer)
	if !ok {
		return
	}
	p, ok := positionOf(nd.Service(), cohort)
	if ok && slices.ContainsFunc(p.Parents, func(x swarm.Address) bool { return !a.isBad(x) }) {
		// Not captured now; but one that escaped a capture (a gap
		// escape) within the last two lag windows — the misses that
		// dropped it are counted when they leave a window of 64
		// deliveries — lacked them while it was captured.
		a.mu.Lock()
		defer a.mu.Unlock()
		window := time.Duration(2 * 64 / a.sim.sc.Rate * float64(time.Second))
		if t, ok := a.escapedAt[peer.ByteString()]; ok && time.Since(t) < window {
			a.starvedH++
			a.escapedH++
		}
		return
	}
	a.mu.Lock()
	a.starvedH++
	a.mu.Unlock()
}

// sample records the fraction of honest subscribers whose every parent is
// an attacker (captured), and of those with two parents.
func (a *adversary) sample() {
	var honest, captured, two int
	for _, st := range a.sim.cohorts {
		key := st.c.Spec.String()
		for _, sl := range st.slots {
			sl.mu.Lock()
			nd, down, bad := sl.node, sl.down, sl.attacker
			sl.mu.Unlock()
			if down || bad {
				continue
			}
			p, ok := positionOf(nd.Service(), key)
			if !ok || len(p.Parents) == 0 {
				continue
			}
			honest++
			if len(p.Parents) >= 2 {
				two++
			}
			if !slices.ContainsFunc(p.Parents, func(x swarm.Address) bool { return !a.isBad(x) }) {
				captured++
			}
		}
	}
	if honest == 0 {
		return
	}
	a.mu.Lock()
	a.captured = append(a.captured, float64(captured)/float64(honest))
	a.twoPar = append(a.twoPar, float64(two)/float64(honest))
	a.mu.Unlock()
}

// sampler samples every second until the run ends.
func (a *adversary) sampler() {
	defer a.sim.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			a.sample()
		case <-a.sim.ctx.Done():
			return
		}
	}
}

// AttackResult is what the attackers did to the honest subscribers.
type AttackResult struct {
	Attack    string  `json:"attack"`
	Byzantine float64 `json:"byzantine"` // the fraction asked
	Attackers int     `json:"attackers"`
	Honest    int     `json:"honest"` // honest subscribers

	// Delivery while attached: of the updates the roots accepted while an
	// honest subscriber was attached (its subscription up, less the quiet
	// time at its end), the fraction it received.
	Expected      uint64  `json:"expected"`
	Delivered     uint64  `json:"delivered"`
	DeliveryRatio float64 `json:"delivery_ratio"`
	NodesLosing   int     `json:"nodes_losing"` // honest subscribers that missed any
	NeverJoined   int     `json:"never_joined"` // honest subscribers that never had a subscription
	// The same at the honest subscribers not captured at the end (some
	// parent of theirs honest): what the protocol promises whatever the
	// attackers withhold.
	ExpectedFree      uint64  `json:"expected_free"`
	DeliveredFree     uint64  `json:"delivered_free"`
	DeliveryRatioFree float64 `json:"delivery_ratio_free"`
	// The honest subscribers that missed any, by their parents at the end:
	// "a/p" is a of p parents attackers.
	LosingByParents map[string]uint64 `json:"losing_by_parents"`
	// Cut off: honest subscribers in the tree at the end (they have a
	// parent) with no path of parents up to the root — in a cycle, or
	// under one.
	CutOff int `json:"cut_off"`

	// Captured: honest subscribers whose every parent is an attacker, sampled
	// every second while publishing and at the end.
	CapturedMean float64 `json:"captured_mean"`
	CapturedMax  float64 `json:"captured_max"`
	CapturedEnd  float64 `json:"captured_end"`
	TwoParents   float64 `json:"two_parents"` // mean fraction of honest subscribers with two parents

	HonestDropped   uint64 `json:"honest_dropped"`   // honest parents an honest node dropped for lagging
	HonestStarved   uint64 `json:"honest_starved"`   // of those, parents whose own parents were all attackers then (not framed: starved)
	HonestEscaped   uint64 `json:"honest_escaped"`   // of the starved, parents not captured at the drop that had escaped a capture within two lag windows
	AttackerDropped uint64 `json:"attacker_dropped"` // attacker parents an honest node dropped for lagging
	Faults          uint64 `json:"faults"`           // honest nodes that lost both parents
	Reparents       uint64 `json:"reparents"`        // honest nodes that followed a Reparent
	// Escapes: honest nodes that left one of two parents that both passed
	// over an update — [an attacker left, an honest parent left, no new
	// parent found].
	Escapes [3]uint64 `json:"escapes"`

	// Repairs: from an honest node losing or dropping a parent to its next
	// attachment.
	Repairs   int `json:"repairs"`
	RepairP50 Dur `json:"repair_p50"`
	RepairP99 Dur `json:"repair_p99"`
	RepairMax Dur `json:"repair_max"`

	// At the roots: what they read from attackers' streams and the time
	// their readers spent on it (from a read's return to the next read:
	// decoding, checks, fan-out), per attacker and per second of the run,
	// beside the same for honest streams; violations by whom; drops by
	// counter; frames the attackers injected or altered, by kind.
	RootFramesAttacker    uint64            `json:"root_frames_attacker"`
	RootFramesHonest      uint64            `json:"root_frames_honest"`
	RootTimeAttacker      Dur               `json:"root_time_attacker"`
	RootTimeHonest        Dur               `json:"root_time_honest"`
	RootTimePerAttackerPS Dur               `json:"root_time_per_attacker_per_s"`
	ViolationsAttacker    uint64            `json:"violations_attacker"` // streams honest nodes reset and blocklisted: by attackers
	ViolationsHonest      uint64            `json:"violations_honest"`   // the same, by honest peers (framed: must be 0)
	Framed                map[string]uint64 `json:"framed,omitempty"`    // why, by reason
	RootDrops             map[string]uint64 `json:"root_drops"`
	Injected              map[string]uint64 `json:"injected"`

	// The network's probes (originated or forwarded, from the build to the
	// end of the run) and the Joins the probe rations answered from the
	// pool; the streams attackers squatted (-attack squat) and the
	// deliveries they read on them, each charged by its parent at the
	// delivery price and never paid (UnpaidUnits), and the root's
	// heartbeats they read beside (free: nobody charges one).
	Probes          uint64 `json:"probes"`
	ProbesRationed  uint64 `json:"probes_rationed"`
	Squats          uint64 `json:"squats"`
	SquatDeliveries uint64 `json:"squat_deliveries"`
	SquatHeartbeats uint64 `json:"squat_heartbeats"`
	UnpaidUnits     uint64 `json:"unpaid_units"`
}

// collect fills res.Attack; the run is over and the slots are still.
func (a *adversary) collect(res *Result, end time.Time) {
	ar := &AttackResult{Attack: a.kind, Byzantine: a.sim.sc.Byzantine, Attackers: len(a.bad), LosingByParents: map[string]uint64{}}
	quiet := a.sim.sc.quiet()
	parents := map[string]string{} // hex overlay -> "a/p" at the end
	captured := map[string]bool{}  // hex overlay -> every parent an attacker at the end
	for _, t := range res.Trees {
		for _, n := range t.Nodes {
			bad := 0
			for _, j := range n.Parents {
				if a.isBad(swarm.MustParseHexAddress(t.Nodes[j].Overlay)) {
					bad++
				}
			}
			parents[n.Overlay] = fmt.Sprintf("%d/%d", bad, len(n.Parents))
			captured[n.Overlay] = bad > 0 && bad == len(n.Parents)
		}
		ar.CutOff += a.cutOff(t)
	}
	for _, st := range a.sim.cohorts {
		st.mu.Lock()
		accepted := make(map[uint64]time.Time, len(st.accepted))
		for k, v := range st.accepted {
			accepted[k] = v
		}
		st.mu.Unlock()
		for _, sl := range st.slots {
			sl.mu.Lock()
			if sl.attacker {
				sl.mu.Unlock()
				continue
			}
			ar.Honest++
			if len(sl.intervals) == 0 {
				ar.NeverJoined++
			}
			free := !captured[sl.node.Overlay().String()]
			var lost uint64
			for _, iv := range sl.intervals {
				to := iv.to
				if to.IsZero() || to.After(end) {
					to = end
				}
				to = to.Add(-quiet)
				for idx, at := range accepted {
					if at.Before(iv.from) || at.After(to) {
						continue
					}
					ar.Expected++
					got := sl.seen.test(idx)
					if got {
						ar.Delivered++
					} else {
						lost++
					}
					if free {
						ar.ExpectedFree++
						if got {
							ar.DeliveredFree++
						}
					}
				}
			}
			if lost > 0 {
				ar.NodesLosing++
				ar.LosingByParents[parents[sl.node.Overlay().String()]]++
			}
			sl.mu.Unlock()
		}
	}
	if ar.Expected > 0 {
		ar.DeliveryRatio = float64(ar.Delivered) / float64(ar.Expected)
	}
	if ar.ExpectedFree > 0 {
		ar.DeliveryRatioFree = float64(ar.DeliveredFree) / float64(ar.ExpectedFree)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n := len(a.captured); n > 0 {
		var sum, two float64
		for i, c := range a.captured {
			sum += c
			two += a.twoPar[i]
			ar.CapturedMax = max(ar.CapturedMax, c)
		}
		ar.CapturedMean, ar.TwoParents, ar.CapturedEnd = sum/float64(n), two/float64(n), a.captured[n-1]
	}
	ar.HonestDropped, ar.AttackerDropped, ar.Faults, ar.Reparents = a.withheldH, a.withheldA, a.faults, a.reparents
	ar.HonestStarved, ar.HonestEscaped, ar.Escapes = a.starvedH, a.escapedH, a.escapes
	rs := slices.Clone(a.repairs)
	sort.Slice(rs, func(i, j int) bool { return rs[i] < rs[j] })
	if n := len(rs); n > 0 {
		ar.Repairs = n
		ar.RepairP50, ar.RepairP99, ar.RepairMax = Dur(rs[n/2]), Dur(rs[min(int(0.99*float64(n)), n-1)]), Dur(rs[n-1])
	}
	ar.RootFramesHonest, ar.RootFramesAttacker = a.rootFrame[0].Load(), a.rootFrame[1].Load()
	ar.RootTimeHonest, ar.RootTimeAttacker = Dur(a.rootRead[0].Load()), Dur(a.rootRead[1].Load())
	if n, rt := len(a.bad), time.Duration(res.RunTime); n > 0 && rt > 0 {
		ar.RootTimePerAttackerPS = Dur(time.Duration(float64(ar.RootTimeAttacker) / float64(n) / rt.Seconds()))
	}
	ar.ViolationsHonest, ar.ViolationsAttacker = a.viol[0], a.viol[1]
	ar.Framed = maps(a.framed)
	ar.RootDrops = maps(a.rootDrops)
	ar.Injected = maps(a.injected)
	ar.Probes, ar.ProbesRationed = probeCounts(a.sim.metrics)
	ar.Squats, ar.SquatDeliveries, ar.SquatHeartbeats = a.squats.Load(), a.squatted.Load(), a.squatBeat.Load()
	ar.UnpaidUnits = ar.SquatDeliveries * a.sim.sc.DeliveryPrice
	res.Attack = ar
}

// cutOff counts the honest nodes of t that have a parent and no path of
// parents up to the root (node 0).
func (a *adversary) cutOff(t treeview.Tree) int {
	children := make([][]int, len(t.Nodes))
	for i, n := range t.Nodes {
		for _, j := range n.Parents {
			children[j] = append(children[j], i)
		}
	}
	reached := make([]bool, len(t.Nodes))
	queue := []int{0}
	reached[0] = true
	for len(queue) > 0 {
		i := queue[0]
		queue = queue[1:]
		for _, c := range children[i] {
			if !reached[c] {
				reached[c] = true
				queue = append(queue, c)
			}
		}
	}
	k := 0
	for i, n := range t.Nodes {
		if !reached[i] && len(n.Parents) > 0 && !n.Failed && !a.isBad(swarm.MustParseHexAddress(n.Overlay)) {
			k++
		}
	}
	return k
}

func maps(m map[string]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// frames splits buf into whole uvarint-delimited frames (prefix included)
// and returns them and what is left of a partial one.
func frames(buf []byte) (whole [][]byte, rest []byte) {
	for len(buf) > 0 {
		n, k := protowire.ConsumeVarint(buf)
		if k < 0 {
			break // the prefix itself is incomplete (or garbage: kept)
		}
		if uint64(len(buf)-k) < n {
			break
		}
		// Each frame capped at its own end: an attack appends what it
		// adds to the frame it returns (toChild), which must not write
		// over the next frame of the same write.
		whole = append(whole, buf[:k+int(n):k+int(n)])
		buf = buf[k+int(n):]
	}
	return whole, buf
}

// body is a frame without its length prefix.
func body(f []byte) []byte {
	_, k := protowire.ConsumeVarint(f)
	return f[k:]
}

// frame encodes m with its length prefix.
func frame(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		panic(err) // our own messages always marshal
	}
	return append(protowire.AppendVarint(nil, uint64(len(b))), b...)
}

// envelope wraps m in the multihop envelope if env, else frames it bare.
func envelope(env bool, f *pb.Frame) []byte {
	if env {
		return frame(f)
	}
	switch k := f.Kind.(type) {
	case *pb.Frame_Broadcast:
		return frame(k.Broadcast)
	}
	return nil // control frames exist only in the envelope
}

// subscriberJoin reports whether join is a subscriber's: under SWIP-74 Rev
// 8 every Join declares an address, a subscriber the zero address (and, on
// a multihop stream, listen).
func subscriberJoin(join *pb.Join) bool {
	return join.GetListen() || bytes.Equal(join.GetAddr(), make([]byte, 20)) || len(join.GetAddr()) == 0
}

func nonce() uint64 {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint64(b[:])
}

// attackStream is one stream of an attacker's node. The Service reads and
// writes it as ever; what it writes is split into frames, and each frame
// passes, or is dropped, held, rewritten or joined by frames of the
// attack's own.
type attackStream struct {
	p2p.Stream
	a      *adversary
	an     *attackNode
	peer   swarm.Address
	dialed bool // the attacker joined peer (peer is its parent); else peer joined it

	wmu  sync.Mutex // whole frames on the wire
	out  []byte     // a partial frame written
	in   []byte     // a partial frame read
	done chan struct{}
	once sync.Once

	mu     sync.Mutex // guards the fields below
	nOut   int        // frames written
	nIn    int        // frames read
	join   *pb.Join   // the stream's Join (sent or received)
	env    bool       // the envelope was negotiated
	depth  uint32     // the depth the attacker states to the child
	probes map[uint64]uint32
	sent   int  // messages written to the child
	moved  bool // a Reparent was sent
	held   chan heldFrame
}

type heldFrame struct {
	at time.Time
	b  []byte
}

func (s *attackStream) finish() { s.once.Do(func() { close(s.done) }) }

func (s *attackStream) Close() error     { s.finish(); return s.Stream.Close() }
func (s *attackStream) FullClose() error { s.finish(); return s.Stream.FullClose() }
func (s *attackStream) Reset() error     { s.finish(); return s.Stream.Reset() }

func (s *attackStream) CloseWrite() error {
	s.finish()
	if cw, ok := s.Stream.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return s.Stream.Close()
}

// write puts b on the wire whole.
func (s *attackStream) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	_, err := s.Stream.Write(b)
	return err
}

func (s *attackStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	if n > 0 {
		s.in = append(s.in, p[:n]...)
		var whole [][]byte
		whole, s.in = frames(s.in)
		s.in = slices.Clip(s.in)
		for _, f := range whole {
			s.onRead(body(f))
		}
	}
	return n, err
}

// onRead sees a frame the attacker's Service is about to read.
func (s *attackStream) onRead(b []byte) {
	s.mu.Lock()
	s.nIn++
	first := s.nIn == 1
	s.mu.Unlock()
	if first {
		if s.dialed {
			ack := new(pb.Ack)
			if proto.Unmarshal(b, ack) == nil {
				s.mu.Lock() // the Join was written before the Ack came
				s.env = s.join.GetMultihop() && ack.GetMultihop()
				s.mu.Unlock()
			}
		} else {
			join := new(pb.Join)
			if proto.Unmarshal(b, join) == nil {
				s.mu.Lock()
				s.join = join
				s.mu.Unlock()
			}
		}
		return
	}
	if !s.dialed {
		return
	}
	s.mu.Lock()
	env := s.env
	s.mu.Unlock()
	var msg *pb.Broadcast
	if env {
		f := new(pb.Frame)
		if proto.Unmarshal(b, f) != nil {
			return
		}
		if pr := f.GetProbe(); pr != nil {
			s.mu.Lock()
			if s.probes == nil {
				s.probes = make(map[uint64]uint32)
			}
			if len(s.probes) < 64 {
				s.probes[pr.GetNonce()] = pr.GetDepth()
			}
			s.mu.Unlock()
		}
		msg = f.GetBroadcast()
	} else {
		msg = new(pb.Broadcast)
		if proto.Unmarshal(b, msg) != nil {
			return
		}
	}
	if msg == nil {
		return
	}
	s.fromParent(msg, env)
}

// fromParent acts on a message the attacker's parent delivered.
func (s *attackStream) fromParent(msg *pb.Broadcast, env bool) {
	an := s.an
	switch s.a.kind {
	case "replay":
		an.mu.Lock()
		an.replay = append(an.replay, frame(msg))
		if len(an.replay) > replayKeep {
			an.replay = slices.Delete(an.replay, 0, len(an.replay)-replayKeep)
		}
		old := an.old()
		an.mu.Unlock()
		if old != nil && env {
			// Up, as a publication of its subtree: each costs the
			// relays above it and the root a check.
			m := new(pb.Broadcast)
			if proto.Unmarshal(body(old), m) == nil && s.write(envelope(env, &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: m}})) == nil {
				s.a.count("replay up", 1)
			}
		}
	case "candidate-flood":
		if !env {
			return
		}
		var b []byte
		for range s.a.flood {
			b = append(b, frame(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: nonce(),
				Candidates: []*pb.Candidate{{Overlay: an.overlay().Bytes(), Depth: 1}}}}})...)
		}
		if s.write(b) == nil {
			s.a.count("candidates", s.a.flood)
		}
	case "refer-flood":
		s.referFlood()
	case "claim-replay":
		s.claimReplay()
	}
}

// old is the message to replay: replayAge back, or the oldest kept. The
// caller holds an.mu.
func (an *attackNode) old() []byte {
	if len(an.replay) < 2 {
		return nil
	}
	return an.replay[max(len(an.replay)-1-replayAge, 0)]
}

func (an *attackNode) overlay() swarm.Address {
	an.mu.Lock()
	defer an.mu.Unlock()
	return an.nd.Overlay()
}

func (an *attackNode) node() *bpsnet.Node {
	an.mu.Lock()
	defer an.mu.Unlock()
	return an.nd
}

// Write takes what the Service writes, frame by frame.
func (s *attackStream) Write(p []byte) (int, error) {
	s.out = append(s.out, p...)
	var whole [][]byte
	whole, s.out = frames(s.out)
	s.out = slices.Clip(s.out)
	var b []byte
	for _, f := range whole {
		b = append(b, s.onWrite(f)...)
	}
	if err := s.write(b); err != nil {
		return 0, err
	}
	return len(p), nil
}

// onWrite returns what goes on the wire for frame f, which the attacker's
// Service wrote.
func (s *attackStream) onWrite(f []byte) []byte {
	s.mu.Lock()
	s.nOut++
	first := s.nOut == 1
	s.mu.Unlock()
	b := body(f)
	if first {
		if s.dialed {
			join := new(pb.Join)
			if proto.Unmarshal(b, join) == nil {
				s.mu.Lock()
				s.join = join
				s.mu.Unlock()
			}
			return f
		}
		ack := new(pb.Ack)
		if proto.Unmarshal(b, ack) != nil {
			return f
		}
		s.mu.Lock()
		s.env = s.join.GetMultihop() && ack.GetMultihop()
		s.depth = ack.GetDepth()
		s.mu.Unlock()
		if s.a.kind == "depth-lie" && ack.GetStatus() == pb.Status_OK && ack.GetDepth() > 0 {
			ack.Depth = 0
			s.a.count("ack depth", 1)
			return frame(ack)
		}
		return f
	}
	s.mu.Lock()
	env := s.env
	s.mu.Unlock()
	var fr *pb.Frame
	if env {
		fr = new(pb.Frame)
		if proto.Unmarshal(b, fr) != nil {
			return f
		}
	} else {
		m := new(pb.Broadcast)
		if proto.Unmarshal(b, m) != nil {
			return f
		}
		fr = &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: m}}
	}
	if cs := fr.GetCandidates(); cs != nil && s.dialed {
		return s.forge(f, cs)
	}
	s.mu.Lock()
	child := !s.dialed && s.join != nil && subscriberJoin(s.join)
	s.mu.Unlock()
	if m := fr.GetBroadcast(); m != nil && child {
		return s.toChild(f, m, env)
	}
	return f
}

// forge rewrites the attacker's answer to a probe.
func (s *attackStream) forge(f []byte, cs *pb.Candidates) []byte {
	an := s.an
	s.mu.Lock()
	depth, asked := s.probes[cs.GetNonce()]
	delete(s.probes, cs.GetNonce())
	s.mu.Unlock()
	switch s.a.kind {
	case "candidates":
		if !asked {
			return f
		}
		self := an.overlay()
		out := []*pb.Candidate{{Overlay: self.Bytes(), Depth: depth, Underlays: [][]byte{self.Bytes()}}}
		if b, ok := s.a.buddy(self); ok {
			out = append(out, &pb.Candidate{Overlay: b.Bytes(), Depth: depth, Underlays: [][]byte{b.Bytes()}})
		}
		s.a.count("candidates", 1)
		return frame(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: cs.GetNonce(), Candidates: out}}})
	case "depth-lie":
		out := cs.GetCandidates()
		if len(out) == 0 {
			self := an.overlay()
			out = []*pb.Candidate{{Overlay: self.Bytes(), Underlays: [][]byte{self.Bytes()}}}
		}
		for _, c := range out {
			c.Depth = 0
		}
		s.a.count("candidates", 1)
		return frame(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: cs.GetNonce(), Candidates: out}}})
	}
	return f
}

// toChild returns what goes to a child instead of message frame f.
func (s *attackStream) toChild(f []byte, m *pb.Broadcast, env bool) []byte {
	s.mu.Lock()
	s.sent++
	n := s.sent
	first := !s.moved
	s.moved = true
	depth := s.depth
	s.mu.Unlock()
	switch s.a.kind {
	case "withhold":
		if n%s.a.k == 0 {
			s.a.count("withheld", 1)
			return nil
		}
	case "withhold-publisher", "withhold-publisher-hb":
		if !s.service(m) && !(s.a.kind == "withhold-publisher-hb" && m.GetKind() == pb.Kind_HEARTBEAT) {
			s.a.count("withheld", 1)
			return nil
		}
	case "delay":
		s.hold(f)
		return nil
	case "replay":
		s.an.mu.Lock()
		old := s.an.old()
		s.an.mu.Unlock()
		if old != nil {
			s.a.count("replay down", 1)
			if env {
				om := new(pb.Broadcast)
				if proto.Unmarshal(body(old), om) == nil {
					return append(f, envelope(true, &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: om}})...)
				}
			}
			return append(f, old...)
		}
	case "reparent":
		if first && env {
			if to, ok := s.hijack(); ok {
				s.a.count("reparent", 1)
				rp := frame(&pb.Frame{Kind: &pb.Frame_Reparent{Reparent: &pb.Reparent{To: to.Bytes(), Underlays: [][]byte{to.Bytes()}}}})
				return append(f, rp...)
			}
		}
	case "probe-flood":
		if env {
			b := f
			for range s.a.flood {
				b = append(b, frame(&pb.Frame{Kind: &pb.Frame_Probe{Probe: &pb.Probe{Depth: depth + 1, Nonce: nonce(), Joiner: s.a.randomOverlay()}}})...)
			}
			s.a.count("probes", s.a.flood)
			return b
		}
	}
	return f
}

// randomOverlay is an overlay no node has.
func (a *adversary) randomOverlay() []byte {
	b := make([]byte, swarm.HashSize)
	_, _ = rand.Read(b)
	return b
}

// service reports whether m is a chunk of the admin's service feeds
// (SWIP-60 rev 14: ROSTER and EOS are kinds of their own).
func (s *attackStream) service(m *pb.Broadcast) bool {
	return m.GetKind() == pb.Kind_ROSTER || m.GetKind() == pb.Kind_EOS
}

// hijack picks where to Reparent the child: into its own subtree (a child
// of it, to make a cycle) every other time, else at a fellow attacker.
func (s *attackStream) hijack() (swarm.Address, bool) {
	a := s.a
	c, ok := a.cohort[s.an.overlay().ByteString()]
	if !ok {
		return swarm.ZeroAddress, false
	}
	if nonce()%2 == 0 {
		if nd, ok := a.sim.net.Lookup(s.peer); ok {
			if p, ok := positionOf(nd.Service(), a.sim.cohorts[c].c.Spec.String()); ok && len(p.Children) > 0 {
				return p.Children[0], true
			}
		}
	}
	return a.buddy(s.an.overlay())
}

// hold delays frame f by the attack's delay, on a writer of the stream's
// own.
func (s *attackStream) hold(f []byte) {
	s.mu.Lock()
	if s.held == nil {
		s.held = make(chan heldFrame, delayQueue)
		s.a.wg.Add(1)
		go s.release(s.held)
	}
	held := s.held
	s.mu.Unlock()
	select {
	case held <- heldFrame{at: time.Now().Add(s.a.delay), b: f}:
		s.a.count("delayed", 1)
	default:
		s.a.count("dropped (delay queue full)", 1)
	}
}

// release writes the held frames when they are due, until the stream or
// the run ends.
func (s *attackStream) release(held chan heldFrame) {
	defer s.a.wg.Done()
	t := time.NewTimer(delay.Positive(0))
	defer t.Stop()
	<-t.C
	for {
		var h heldFrame
		select {
		case h = <-held:
		case <-s.done:
			return
		case <-s.a.ctx.Done():
			return
		}
		t.Reset(delay.Positive(time.Until(h.at)))
		select {
		case <-t.C:
		case <-s.done:
			return
		case <-s.a.ctx.Done():
			return
		}
		if s.write(h.b) != nil {
			return
		}
	}
}

// referFlood opens flood refer Joins at the parent, at most once a second
// per attacker, and reads their answers.
func (s *attackStream) referFlood() {
	an := s.an
	s.mu.Lock()
	spec := s.join.GetCohort()
	s.mu.Unlock()
	now := time.Now()
	an.mu.Lock()
	if spec == nil || now.Sub(an.lastRef) < time.Second || !an.referBsy.CompareAndSwap(false, true) {
		an.mu.Unlock()
		return
	}
	an.lastRef = now
	nd := an.nd
	an.mu.Unlock()
	a := s.a
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer an.referBsy.Store(false)
		var wg sync.WaitGroup
		for range a.flood {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if a.handshake(nd, s.peer, &pb.Join{Cohort: spec, Multihop: true, Refer: true}, nil) {
					a.count("refer joins", 1)
				}
			}()
		}
		wg.Wait()
	}()
}

// claimReplay presents the claiming chunk a publisher sent (as a node on
// its path saw it) on a stream of the attacker's own at its cohort's root,
// declaring the publisher's address, at most once a second: under Rev 8 it
// is signed for the publisher's stream's challenge, not this one's.
func (s *attackStream) claimReplay() {
	a, an := s.a, s.an
	c, ok := a.cohort[an.overlay().ByteString()]
	if !ok {
		return
	}
	sn := a.sniffed[c].Load()
	now := time.Now()
	an.mu.Lock()
	if sn == nil || now.Sub(an.lastClm) < time.Second || !an.referBsy.CompareAndSwap(false, true) {
		an.mu.Unlock()
		return
	}
	an.lastClm = now
	nd := an.nd
	an.mu.Unlock()
	root := a.sim.cohorts[c].currentBroker().Overlay()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer an.referBsy.Store(false)
		join := &pb.Join{Cohort: sn.join.GetCohort(), Addr: sn.join.GetAddr(), Multihop: true}
		if a.handshake(nd, root, join, sn.claim) {
			a.count("claims", 1)
		}
	}()
}

// handshake opens a stream from nd to peer, sends join, reads the Ack and,
// if the stream was accepted and claim is set, sends the chunk and waits
// for the peer's verdict; all within attackHandshak. It reports whether
// the Join went out.
func (a *adversary) handshake(nd *bpsnet.Node, peer swarm.Address, join *pb.Join, claim *pb.Broadcast) bool {
	ctx, cancel := context.WithTimeout(a.ctx, attackHandshak)
	defer cancel()
	st, err := nd.NewStream(ctx, peer, nil, "pubsub", "1.0.0", "stream")
	if err != nil {
		return false
	}
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	defer stop()
	defer func() { _ = st.Reset() }()
	if _, err := st.Write(frame(join)); err != nil {
		return false
	}
	ack := new(pb.Ack)
	if err := readFrame(st, ack); err != nil || ack.GetStatus() != pb.Status_OK || claim == nil {
		return true
	}
	if _, err := st.Write(envelope(ack.GetMultihop(), &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: claim}})); err != nil {
		return true
	}
	// The verdict: a reset (refused) or, were it taken, deliveries.
	var b [512]byte
	_, _ = st.Read(b[:])
	return true
}

// readFrame reads one uvarint-delimited frame into m.
func readFrame(r io.Reader, m proto.Message) error {
	var pre []byte
	var one [1]byte
	for {
		if _, err := io.ReadFull(r, one[:]); err != nil {
			return err
		}
		pre = append(pre, one[0])
		if one[0] < 0x80 {
			break
		}
		if len(pre) > 3 {
			return fmt.Errorf("frame too large")
		}
	}
	n, _ := protowire.ConsumeVarint(pre)
	if n > bps.MaxFrameSize {
		return fmt.Errorf("frame too large")
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return proto.Unmarshal(b, m)
}

// sniffStream sees the claiming chunk a publisher node writes: what the
// node it attaches through, or the bridge that carried it, sees.
type sniffStream struct {
	p2p.Stream
	a      *adversary
	cohort int

	mu   sync.Mutex
	out  []byte
	n    int
	join *pb.Join
	done bool
}

func (s *sniffStream) CloseWrite() error {
	if cw, ok := s.Stream.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return s.Stream.Close()
}

func (s *sniffStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	if !s.done {
		s.out = append(s.out, p...)
		var whole [][]byte
		whole, s.out = frames(s.out)
		for _, f := range whole {
			s.n++
			b := body(f)
			if s.n == 1 {
				s.join = new(pb.Join)
				if proto.Unmarshal(b, s.join) != nil || subscriberJoin(s.join) {
					s.done = true
					break
				}
				continue
			}
			var claim *pb.Broadcast
			if fr := new(pb.Frame); proto.Unmarshal(b, fr) == nil && len(fr.GetBroadcast().GetSoc()) > 0 {
				claim = fr.GetBroadcast()
			} else if c := new(pb.Broadcast); proto.Unmarshal(b, c) == nil && len(c.GetSoc()) > 0 {
				claim = c
			}
			if claim != nil {
				s.a.sniffed[s.cohort].Store(&sniffedClaim{join: s.join, claim: claim})
				s.done = true
				break
			}
			if s.n > 4 {
				s.done = true
				break
			}
		}
		if s.done {
			s.out = nil
		}
	}
	s.mu.Unlock()
	return s.Stream.Write(p)
}

// meterStream measures what a root reads from a child: frames, bytes, and
// the time its reader spends between reads (decoding, checking, fanning
// out what it read).
type meterStream struct {
	p2p.Stream
	a    *adversary
	bad  bool
	last time.Time // when the previous read returned
	in   []byte
}

func (s *meterStream) CloseWrite() error {
	if cw, ok := s.Stream.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return s.Stream.Close()
}

func (s *meterStream) Read(p []byte) (int, error) {
	i := 0
	if s.bad {
		i = 1
	}
	if !s.last.IsZero() {
		s.a.rootRead[i].Add(int64(time.Since(s.last)))
	}
	n, err := s.Stream.Read(p)
	s.last = time.Now()
	if n > 0 {
		s.a.rootBytes[i].Add(uint64(n))
		s.in = append(s.in, p[:n]...)
		var whole [][]byte
		whole, s.in = frames(s.in)
		s.in = slices.Clip(s.in)
		s.a.rootFrame[i].Add(uint64(len(whole)))
	}
	return n, err
}

// writeAttack writes the attack's rows of the table.
func writeAttack(row func(k, format string, a ...any), ar *AttackResult) {
	row("attack", "%s by %d attackers (%.3g of the subscribers); %d honest subscribers", ar.Attack, ar.Attackers, ar.Byzantine, ar.Honest)
	row("  honest delivery", "%.4f of %d while attached (%d nodes missed any); %.4f at the nodes not captured at the end; %d never joined",
		ar.DeliveryRatio, ar.Expected, ar.NodesLosing, ar.DeliveryRatioFree, ar.NeverJoined)
	if len(ar.LosingByParents) > 0 {
		row("  losing nodes", "by attackers/parents at the end: %s", mapString(ar.LosingByParents))
	}
	if ar.CutOff > 0 {
		row("  cut off", "%d honest nodes with parents but no path up to the root at the end (a cycle)", ar.CutOff)
	}
	row("  captured", "every parent an attacker: mean %.2f%%, max %.2f%%, at the end %.2f%%; two parents: %.1f%% of honest nodes",
		100*ar.CapturedMean, 100*ar.CapturedMax, 100*ar.CapturedEnd, 100*ar.TwoParents)
	row("  dropped for lag", "%d honest parents (%d of them starved: every parent of theirs an attacker, or escaped from that shortly before: %d), %d attacker parents; %d liveness faults; %d reparents followed",
		ar.HonestDropped, ar.HonestStarved, ar.HonestEscaped, ar.AttackerDropped, ar.Faults, ar.Reparents)
	row("  repairs", "%d: p50 %s, p99 %s, max %s", ar.Repairs, ar.RepairP50, ar.RepairP99, ar.RepairMax)
	row("  gap escapes", "%d attacker parents left, %d honest ones, %d found no new parent", ar.Escapes[0], ar.Escapes[1], ar.Escapes[2])
	row("  violations", "honest nodes reset and blocklisted %d attacker streams, %d honest ones", ar.ViolationsAttacker, ar.ViolationsHonest)
	if len(ar.Framed) > 0 {
		row("  honest found violating", "%s", mapString(ar.Framed))
	}
	row("  at the root", "read from attackers: %d frames, %s reader time (%s per attacker per second); from honest nodes: %d frames, %s",
		ar.RootFramesAttacker, ar.RootTimeAttacker, ar.RootTimePerAttackerPS, ar.RootFramesHonest, ar.RootTimeHonest)
	row("  root drops", "%s", mapString(ar.RootDrops))
	row("  injected", "%s", mapString(ar.Injected))
	row("  probes", "%d sent in the network (originated or forwarded), %d Joins answered from the pool by the probe rations", ar.Probes, ar.ProbesRationed)
	if ar.Squats > 0 {
		row("  squats", "%d streams squatted; %d deliveries read on them: %d units charged and never paid; %d heartbeats beside (free)", ar.Squats, ar.SquatDeliveries, ar.UnpaidUnits, ar.SquatHeartbeats)
	}
}
