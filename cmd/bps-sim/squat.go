// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"crypto/rand"
	"strings"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest/bpsnet"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"
)

// The slot-hunting attack (-attack squat, issue 24): each attacker follows
// its cohort as an honest subscriber does, and beside that hunts free slots
// in the tree and squats them.
//
//   - Hunting: once a second it sends squatHunt plain multihop Joins (no
//     address, no refer) at once, each to a full node it knows — the root,
//     and every node it has learnt was full (a target that refused it, a
//     candidate it has filled); under -attack squat-root, the root only. It
//     starts once its own subscription has a parent. A full node that answers a plain multihop
//     Join probes its subtree for free slots (SWIP-61) and answers FULL with
//     the candidates it found. A Join a node has room for is taken: its
//     stream is a squat like the ones below.
//   - Squatting: at each candidate it opens a stream whose Join declares a
//     made-up address (a publisher that never claims: a subscriber under
//     explicit authorship, bounded by the cohort's seats only, not by the
//     two plain streams a peer may hold). It reads and discards what the
//     stream carries, answers no probe, never acknowledges a delivery (no
//     receipt, issue 24) and never pays — its node's accounting never hears
//     of the stream — and holds the slot until the parent ends the stream
//     or the run ends. A priced parent writes it at most the receipts'
//     window's slow start (one delivery before a receipt) and ends the stream when no receipt comes. At most -attack-flood such streams at
//     once per attacker; it keeps hunting past that, to replace the ones it
//     loses and to keep full nodes probing.
//
// What the run reports beside the attack table's rows: the probes the
// whole network sent (originated or forwarded) and the Joins answered from
// the pool by the probe rations, the squats held, and the deliveries the
// squats read — each delivered at its parent's cost and never paid: the
// squatter acknowledges none, so its parent charges none (receipt.go).

// Bounds of the hunt.
const (
	squatHunt = 4  // hunting Joins an attacker sends a second, at once
	squatKnow = 64 // full nodes an attacker remembers as targets
)

// squatState is what one attacker keeps for the hunt.
type squatState struct {
	mu    sync.Mutex
	known []swarm.Address // full nodes to hunt at; the root first
	held  int             // squat streams open
	keep  int             // at most (-attack-flood)
	// rootOnly: every hunting Join goes to the root (squat-root), the
	// first known; the nodes learnt are not hunted at.
	rootOnly bool
}

// learn adds ov to the targets, unless known or it is the attacker itself;
// the oldest learnt (not the root) goes past squatKnow.
func (q *squatState) learn(self, ov swarm.Address) {
	if ov.Equal(self) {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, k := range q.known {
		if k.Equal(ov) {
			return
		}
	}
	if len(q.known) >= squatKnow {
		q.known = append(q.known[:1], q.known[2:]...)
	}
	q.known = append(q.known, ov)
}

// targets picks n of the known full nodes, at random (the root among them
// as often as any), or the root n times (rootOnly).
func (q *squatState) targets(n int) []swarm.Address {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]swarm.Address, 0, n)
	for range n {
		if len(q.known) == 0 {
			break
		}
		i := 0
		if !q.rootOnly {
			i = int(nonce() % uint64(len(q.known)))
		}
		out = append(out, q.known[i])
	}
	return out
}

// room reports whether the attacker may hold one more squat.
func (q *squatState) room() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.held < q.keep
}

// take reserves a squat; false if the attacker holds keep.
func (q *squatState) take() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.held >= q.keep {
		return false
	}
	q.held++
	return true
}

func (q *squatState) give() {
	q.mu.Lock()
	q.held--
	q.mu.Unlock()
}

// hunt runs an attacker's hunt until the run ends. It starts once the
// attacker's own subscription has a parent: a member of the cohort, which
// knows the root is full, as a node that joined to attack would.
func (a *adversary) hunt(an *attackNode) {
	defer a.wg.Done()
	c, ok := a.cohort[an.overlay().ByteString()]
	if !ok {
		return
	}
	cs := a.sim.cohorts[c]
	q := &squatState{keep: a.flood, rootOnly: a.kind == "squat-root"}
	q.learn(an.overlay(), cs.currentBroker().Overlay())
	spec, key := cs.c.Spec.PB(), cs.c.Spec.String()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	member := false
	for {
		nd := an.node()
		if !member {
			p, ok := positionOf(nd.Service(), key)
			member = ok && len(p.Parents) > 0
		}
		if member {
			var wg sync.WaitGroup
			for _, to := range q.targets(squatHunt) {
				wg.Add(1)
				go func() {
					defer wg.Done()
					a.huntAt(q, nd, to, spec)
				}()
			}
			wg.Wait()
		}
		select {
		case <-t.C:
		case <-a.ctx.Done():
			return
		}
	}
}

// huntAt sends one plain multihop Join from nd to a full node and squats
// the candidates it is answered with.
func (a *adversary) huntAt(q *squatState, nd *bpsnet.Node, to swarm.Address, spec *pb.CohortSpec) {
	a.count("hunting joins", 1)
	cands, kept := a.squatJoin(q, nd, to, &pb.Join{Cohort: spec, Multihop: true, Addr: make([]byte, 20), Listen: true})
	if kept {
		return
	}
	q.learn(nd.Overlay(), to) // it refused: full
	for _, cand := range cands {
		ov := swarm.NewAddress(cand.GetOverlay())
		if ov.Equal(nd.Overlay()) || len(ov.Bytes()) != swarm.HashSize {
			continue
		}
		if !q.room() {
			return
		}
		addr := make([]byte, bps.AddressSize)
		_, _ = rand.Read(addr)
		more, kept := a.squatJoin(q, nd, ov, &pb.Join{Cohort: spec, Multihop: true, Addr: addr})
		q.learn(nd.Overlay(), ov) // filled, or full already: a target either way
		if !kept {
			for _, m := range more {
				q.learn(nd.Overlay(), swarm.NewAddress(m.GetOverlay()))
			}
		}
	}
}

// squatJoin opens a stream from nd to peer with join and reads the Ack. An
// OK keeps the stream as a squat (if the attacker may hold one more: else
// it is reset), read by a goroutine of its own until it ends; it returns
// the candidates of a FULL.
func (a *adversary) squatJoin(q *squatState, nd *bpsnet.Node, peer swarm.Address, join *pb.Join) ([]*pb.Candidate, bool) {
	ctx, cancel := context.WithTimeout(a.ctx, attackHandshak)
	defer cancel()
	if me, ok := a.sim.net.Lookup(nd.Overlay()); ok {
		if them, ok := a.sim.net.Lookup(peer); ok {
			_ = a.sim.net.Connect(me, them)
		}
	}
	st, err := nd.NewStream(ctx, peer, nil, "pubsub", "1.0.0", "stream")
	if err != nil {
		return nil, false
	}
	stop := context.AfterFunc(ctx, func() { _ = st.Reset() })
	ack := new(pb.Ack)
	_, err = st.Write(frame(join))
	if err == nil {
		err = readFrame(st, ack)
	}
	if !stop() || err != nil || ack.GetStatus() != pb.Status_OK || !q.take() {
		_ = st.Reset()
		return ack.GetCandidates(), false
	}
	a.count("squats", 1)
	a.squats.Add(1)
	a.wg.Add(1)
	go a.squat(q, st, ack.GetMultihop())
	return nil, true
}

// squat reads a squatted stream until it ends, counting the deliveries on
// it, and gives its place back.
func (a *adversary) squat(q *squatState, st p2p.Stream, env bool) {
	defer a.wg.Done()
	defer q.give()
	stop := context.AfterFunc(a.ctx, func() { _ = st.Reset() })
	defer stop()
	defer func() { _ = st.Reset() }()
	for {
		var m proto.Message = new(pb.Broadcast)
		if env {
			m = new(pb.Frame)
		}
		if err := readFrame(st, m); err != nil {
			return
		}
		if f, ok := m.(*pb.Frame); ok && f.GetBroadcast() == nil {
			continue // a probe, a lazy announcement: unanswered
		}
		if b, ok := m.(*pb.Frame); ok && b.GetBroadcast().GetKind() == pb.Kind_HEARTBEAT {
			a.squatBeat.Add(1) // the root's: free (heartbeat.go), no delivery
			continue
		}
		a.squatted.Add(1)
	}
}

// probeCounts reads the network's probes and rationed Joins from the
// collectors every node shares.
func probeCounts(ms *bps.Metrics) (probes, rationed uint64) {
	if ms == nil {
		return 0, 0
	}
	reg := prometheus.NewRegistry()
	if reg.Register(collectors(ms.Collectors())) != nil {
		return 0, 0
	}
	mfs, err := reg.Gather()
	if err != nil {
		return 0, 0
	}
	for _, mf := range mfs {
		var v float64
		for _, m := range mf.GetMetric() {
			v += m.GetCounter().GetValue()
		}
		switch {
		case strings.HasSuffix(mf.GetName(), "_probes_rationed"):
			rationed = uint64(v)
		case strings.HasSuffix(mf.GetName(), "_probes"):
			probes = uint64(v)
		}
	}
	return probes, rationed
}

// collectors is a set of collectors registered as one.
type collectors []prometheus.Collector

func (cs collectors) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range cs {
		c.Describe(ch)
	}
}

func (cs collectors) Collect(ch chan<- prometheus.Metric) {
	for _, c := range cs {
		c.Collect(ch)
	}
}
