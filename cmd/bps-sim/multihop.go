// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"slices"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest/bpsnet"
	"github.com/ethersphere/bps/pkg/treeview"
)

// What a run says about its trees (SWIP-61): the tree each cohort formed,
// relays failing, join round trips, latency against the tree's floor, and
// what the nodes that kept a parent lost.

// joinTrace is what the nodes that answered a joiner's first Joins said.
type joinTrace struct {
	answers int  // Join answers before (and including) the first OK
	ok      bool // it was admitted somewhere
}

// traceJoin counts the answers to a joiner's Joins up to its first OK: a
// FULL (with candidates or without) and then an OK is two round trips.
// Joins answered in parallel (two candidates at once) are one round trip,
// and the answer after the first OK is not counted.
func (s *sim) traceJoin(e bps.Event) {
	if e.Peer.IsZero() {
		return
	}
	k := e.Peer.ByteString()
	s.failMu.Lock()
	defer s.failMu.Unlock()
	jt := s.joinRTs[k]
	if jt == nil {
		jt = &joinTrace{}
		s.joinRTs[k] = jt
	}
	if jt.ok {
		return
	}
	jt.answers++
	jt.ok = e.Status == "OK"
}

// traceParent counts the outcomes of a subscriber's attempts to attach to
// a parent, up to its first OK, from its own side (SWIP-61's parent event):
// FULL with candidates at the broker, then OK at the first candidate, is
// two. Where the events exist they replace the brokers' answers above.
func (s *sim) traceParent(nd *bpsnet.Node, e bps.Event) {
	k := nd.Overlay().ByteString()
	s.failMu.Lock()
	defer s.failMu.Unlock()
	jt := s.parentRTs[k]
	if jt == nil {
		jt = &joinTrace{}
		s.parentRTs[k] = jt
	}
	if !jt.ok {
		jt.answers++
		jt.ok = e.Status == "OK"
	}
}

// members lists the nodes of cohort i as they are now.
func (s *sim) members(i int) []member {
	st := s.cohorts[i]
	out := []member{{overlay: st.currentBroker().Overlay(), role: treeview.RoleBroker, svc: st.currentBroker().Service()}}
	for _, nd := range st.c.Publishers {
		out = append(out, member{overlay: nd.Overlay(), role: treeview.RolePublisher, svc: nd.Service()})
	}
	for _, sl := range st.slots {
		sl.mu.Lock()
		m := member{overlay: sl.node.Overlay(), role: treeview.RoleSubscriber}
		if !sl.down {
			m.svc = sl.node.Service()
		}
		sl.mu.Unlock()
		out = append(out, m)
	}
	return out
}

// failRelays kills a fraction of the relays after d: the subscribers with a
// child, neither brokers nor publishers. They stay down; their children
// keep their other parent and rejoin for a second.
func (s *sim) failRelays(d time.Duration) {
	defer s.wg.Done()
	if !s.sleep(d) {
		return
	}
	type victim struct {
		cohort int
		sl     *slot
		pos    bps.Position
	}
	var relays []victim
	for i, st := range s.cohorts {
		key := st.c.Spec.String()
		for _, sl := range st.slots {
			sl.mu.Lock()
			nd, down := sl.node, sl.down
			sl.mu.Unlock()
			if down {
				continue
			}
			if p, ok := positionOf(nd.Service(), key); ok && len(p.Children) > 0 {
				relays = append(relays, victim{cohort: i, sl: sl, pos: p})
			}
		}
	}
	k := int(s.sc.FailRelays*float64(len(relays)) + 0.5)
	s.mu.Lock()
	perm := s.rng.Perm(len(relays))[:k]
	s.mu.Unlock()
	s.failMu.Lock()
	s.failedAt = time.Now()
	s.failMu.Unlock()
	for _, j := range perm {
		v := relays[j]
		v.sl.mu.Lock()
		nd := v.sl.node
		v.sl.down, v.sl.failed, v.sl.follower = true, true, nil
		v.sl.mu.Unlock()
		v.sl.ended()
		_ = s.net.Kill(nd)
		s.failMu.Lock()
		s.failed[v.cohort] = append(s.failed[v.cohort], failedRelay{overlay: nd.Overlay(), pos: v.pos})
		s.failMu.Unlock()
	}
	s.failMu.Lock()
	s.relaysSeen, s.relaysFailed = len(relays), k
	s.failMu.Unlock()
}

// snapshot records every cohort's tree and every node's depth.
func (s *sim) snapshot(res *Result) {
	s.failMu.Lock()
	failed := make(map[int][]failedRelay, len(s.failed))
	for k, v := range s.failed {
		failed[k] = slices.Clone(v)
	}
	s.failMu.Unlock()
	res.Trees = make([]treeview.Tree, len(s.cohorts))
	for i, st := range s.cohorts {
		res.Trees[i] = buildTree(st.c.Spec.String(), s.members(i), failed[i])
	}
}

// TreeResult is what a run's trees say, over all cohorts.
type TreeResult struct {
	NodesByDepth map[int]int `json:"nodes_by_depth"` // live nodes in a tree at the end, brokers at 0
	MaxDepth     int         `json:"max_depth"`
	Parents      map[int]int `json:"parents"`       // live subscribers and publishers by number of parents at the end
	Detached     int         `json:"detached"`      // subscribers alive at the end with no place in their cohort
	Skewed       int         `json:"skewed"`        // nodes whose stated depth is not one below their shallowest parent's now (a parent moved up since)
	Relays       int         `json:"relays"`        // nodes other than brokers with a child at the end
	MaxFanout    int         `json:"max_fanout"`    // of a relay
	RelaysSeen   int         `json:"relays_seen"`   // relays when -fail-relays struck
	RelaysFailed int         `json:"relays_failed"` // of those, killed

	// Latency against the tree's floor: each delivery's latency divided by
	// (the publisher's depth + the subscriber's depth) × the link latency,
	// the time its hops take on the links alone (depths as the run left
	// them).
	FloorRatioP50 float64 `json:"floor_ratio_p50"`
	FloorRatioP99 float64 `json:"floor_ratio_p99"`
	FloorDeepest  Dur     `json:"floor_deepest"` // the floor at the deepest subscriber
	// Latency by the subscriber's depth, with that depth's floor.
	LatencyByDepth []DepthLatency `json:"latency_by_depth"`

	SOCSize   int     `json:"soc_size"`   // bytes of an update's SOC (id, signature, span, payload)
	WireRatio float64 `json:"wire_ratio"` // wire bytes per delivery ÷ SOC size

	// Joins: the answers a subscriber's first Join took up to its first OK
	// (FULL, then OK at a candidate: 2), and the time from its first
	// Subscribe to its first subscription, also in link round trips.
	JoinRoundTrips    map[int]int `json:"join_round_trips"`
	JoinSide          string      `json:"join_side"` // who reported the answers: the subscriber (SWIP-61's parent events) or the broker
	JoinRoundTripsP50 int         `json:"join_round_trips_p50"`
	JoinTimeP50       Dur         `json:"join_time_p50"`
	JoinTimeP99       Dur         `json:"join_time_p99"`

	// Subscribers that kept a parent: attached from their first join to
	// the end in one subscription that saw no liveness fault. Lost is what
	// was accepted after they joined and never reached them.
	KeptParent  int    `json:"kept_parent"`
	LostKept    uint64 `json:"lost_kept"`
	MaxLostKept uint64 `json:"max_lost_kept"`
	NodesLosing int    `json:"nodes_losing"` // of the nodes that kept a parent, those that lost any
	// The other subscribers alive at the end that joined: their
	// subscription ended (every parent lost, a reset) or saw a liveness
	// fault at some point; what they missed after their first join, while
	// attached or not.
	Rejoined     int    `json:"rejoined"`
	LostRejoined uint64 `json:"lost_rejoined"`
	NeverJoined  int    `json:"never_joined"` // alive at the end, never subscribed
}

// DepthLatency is the latency of the deliveries at one depth.
type DepthLatency struct {
	Depth   int `json:"depth"`
	Samples int `json:"samples"`
	P50     Dur `json:"p50"`
	P99     Dur `json:"p99"`
	Floor   Dur `json:"floor"` // (publisher depth + depth) × link latency
	// CPUFloor adds what one process pays that a network does not: every
	// node at a depth verifies the same update at the same moment on the
	// same cores, so a depth of n nodes waits about n × the CPU per
	// delivery ÷ cores, and the depths above it add theirs.
	CPUFloor Dur `json:"cpu_floor"`
}

// collectTree computes the TreeResult and the deliveries by depth.
func (s *sim) collectTree(res *Result, wireBytes uint64, end time.Time) {
	tr := &res.Tree
	tr.NodesByDepth, tr.Parents, tr.JoinRoundTrips = map[int]int{}, map[int]int{}, map[int]int{}
	depthOf := make(map[string]int)
	pubDepth := make([]int, len(res.Trees))
	for c, t := range res.Trees {
		st := t.Stats()
		for d, n := range st.Depth {
			tr.NodesByDepth[d] += n
		}
		tr.MaxDepth = max(tr.MaxDepth, st.MaxDepth)
		tr.Relays += st.Relays
		tr.MaxFanout = max(tr.MaxFanout, st.MaxFanout)
		tr.Skewed += st.Skewed
		pubDepth[c] = -1
		for _, n := range t.Nodes {
			depthOf[n.Overlay] = n.Depth
			switch {
			case n.Failed:
			case n.Depth < 0:
				if n.Role == treeview.RoleSubscriber {
					tr.Detached++
				}
			case n.Depth > 0:
				tr.Parents[len(n.Parents)]++
			}
			if n.Role == treeview.RolePublisher && n.Depth > 0 && (pubDepth[c] < 0 || n.Depth < pubDepth[c]) {
				pubDepth[c] = n.Depth
			}
		}
	}

	link := s.sc.hop() // the link, and in virtual time one check
	var ratios []float64
	var joinTimes []time.Duration
	byDepth, floors := map[int][]time.Duration{}, map[int]time.Duration{}
	res.Depth = map[int]uint64{}
	for c, st := range s.cohorts {
		st.mu.Lock()
		accepted := make(map[uint64]time.Time, len(st.accepted))
		for k, v := range st.accepted {
			accepted[k] = v
		}
		st.mu.Unlock()
		pd := max(pubDepth[c], 1)
		for _, sl := range st.slots {
			sl.mu.Lock()
			ov := sl.node.Overlay().String()
			d, known := depthOf[ov]
			if !known {
				d = -1
			}
			res.Depth[d] += sl.received - sl.dups
			if d > 0 {
				byDepth[d] = append(byDepth[d], sl.latencies...)
				floors[d] = time.Duration(pd+d) * link
			}
			if link > 0 && d > 0 {
				floor := time.Duration(pd+d) * link
				for _, l := range sl.latencies {
					ratios = append(ratios, float64(l)/float64(floor))
				}
				tr.FloorDeepest = Dur(max(time.Duration(tr.FloorDeepest), floor))
			}
			if len(sl.intervals) > 0 {
				joinTimes = append(joinTimes, sl.joinTime)
			}
			if !sl.failed && !sl.down && len(sl.intervals) == 0 {
				tr.NeverJoined++
			}
			if !sl.failed && !sl.down && len(sl.intervals) > 0 {
				iv := sl.intervals[0]
				kept := len(sl.intervals) == 1 && (iv.to.IsZero() || !iv.to.Before(end)) &&
					sl.sub != nil && sl.sub.LivenessFaults() == 0
				var lost uint64
				for idx, at := range accepted {
					if !at.Before(iv.from) && !sl.seen.test(idx) {
						lost++
					}
				}
				if kept {
					tr.KeptParent++
					tr.LostKept += lost
					tr.MaxLostKept = max(tr.MaxLostKept, lost)
					if lost > 0 {
						tr.NodesLosing++
					}
				} else {
					tr.Rejoined++
					tr.LostRejoined += lost
				}
			}
			sl.mu.Unlock()
		}
	}
	slices.Sort(ratios)
	if n := len(ratios); n > 0 {
		tr.FloorRatioP50 = ratios[min(n/2, n-1)]
		tr.FloorRatioP99 = ratios[min(int(0.99*float64(n)), n-1)]
	}
	var burst time.Duration
	for d := 1; d <= tr.MaxDepth; d++ {
		if res.Cores > 0 && !s.sc.Virtual {
			burst += time.Duration(tr.NodesByDepth[d]) * time.Duration(res.CPUPerDelivery) / time.Duration(res.Cores)
		}
		ls := byDepth[d]
		if len(ls) == 0 {
			continue
		}
		slices.Sort(ls)
		tr.LatencyByDepth = append(tr.LatencyByDepth, DepthLatency{Depth: d, Samples: len(ls),
			P50: Dur(ls[len(ls)/2]), P99: Dur(ls[min(int(0.99*float64(len(ls))), len(ls)-1)]),
			Floor: Dur(floors[d]), CPUFloor: Dur(floors[d] + burst)})
	}
	slices.Sort(joinTimes)
	if n := len(joinTimes); n > 0 {
		tr.JoinTimeP50 = Dur(joinTimes[min(n/2, n-1)])
		tr.JoinTimeP99 = Dur(joinTimes[min(int(0.99*float64(n)), n-1)])
	}

	s.mu.Lock()
	tr.SOCSize = s.socSize
	s.mu.Unlock()
	if tr.SOCSize > 0 && res.Deliveries > 0 {
		tr.WireRatio = float64(wireBytes) / float64(res.Deliveries) / float64(tr.SOCSize)
	}

	s.failMu.Lock()
	tr.RelaysSeen, tr.RelaysFailed = s.relaysSeen, s.relaysFailed
	var rts []int
	traces := s.joinRTs
	if len(s.parentRTs) > 0 {
		traces, tr.JoinSide = s.parentRTs, "subscriber"
	} else {
		tr.JoinSide = "broker"
	}
	for _, sl := range s.slots {
		if jt := traces[sl.node.Overlay().ByteString()]; jt != nil && jt.ok {
			tr.JoinRoundTrips[jt.answers]++
			rts = append(rts, jt.answers)
		}
	}
	s.failMu.Unlock()
	slices.Sort(rts)
	if len(rts) > 0 {
		tr.JoinRoundTripsP50 = rts[len(rts)/2]
	}
}
