// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// Slot hunting (issue 24, bps-sim -attack squat): peers send plain
// multihop Joins to full nodes, each a probe round into the node's
// subtree, to learn free slots and fill them. These tests hold the rules
// of ration.go over the wire; each fails with its rule removed.

// answerProbes answers every probe the raw child r reads with cands(probe),
// the first after delay (a slow child), until its stream ends (the test's
// cleanup resets it; a child that reads nothing for the raw read's
// deadline is reset too, so a test keeps its probes within it).
func answerProbes(t *testing.T, r *raw, delay time.Duration, cands func(*pb.Probe) []*pb.Candidate) {
	t.Helper()
	done := make(chan struct{})
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		_ = r.s.Reset()
		<-done
	})
	go func() {
		defer close(done)
		for {
			f := new(pb.Frame)
			if err := r.read(f); err != nil {
				return
			}
			pr := f.GetProbe()
			if pr == nil {
				continue
			}
			if delay > 0 {
				tm := time.NewTimer(delay)
				select {
				case <-tm.C:
				case <-stop:
					tm.Stop()
					return
				}
				delay = 0
			}
			if _, err := r.s.Write(bps.EncodeFrame(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: pr.Nonce, Candidates: cands(pr)}}})); err != nil {
				return
			}
		}
	}()
}

// noCandidates answers a probe with nothing: a subtree with no free slot.
func noCandidates(*pb.Probe) []*pb.Candidate { return nil }

// strangerAt is a node at an overlay whose first byte is prefix, with no
// BPS service (it only sends raw Joins), connected to to.
func strangerAt(t *testing.T, net *streamtest.Network, prefix byte, to *tnode) *tnode {
	t.Helper()
	ov := swarm.RandAddress(t).Bytes()
	ov[0] = prefix
	nd := net.NewNodeWithOverlay(swarm.NewAddress(ov))
	if err := net.Connect(nd, to.Node); err != nil {
		t.Fatal(err)
	}
	return &tnode{Node: nd}
}

// fullRoot is a root with one slot, taken by a raw child that answers
// every probe with cands after delay; other options as o.
func fullRoot(t *testing.T, net *streamtest.Network, sp *bps.Spec, o bps.Options, delay time.Duration, cands func(*pb.Probe) []*pb.Candidate) *tnode {
	t.Helper()
	o.Bounds.MaxStreamsPerCohort = 1
	root := newNode(t, net, o)
	kid := newNode(t, net, bps.Options{})
	if err := net.Connect(kid.Node, root.Node); err != nil {
		t.Fatal(err)
	}
	child := openRaw(t, kid, root)
	if a := child.join(listenJoin(sp)); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	answerProbes(t, child, delay, cands)
	return root
}

// TestHostileStrangersShareOneRound: at a relay (a node following the
// cohort, full), plain multihop Joins (a child asks with a refer-Join) —
// here from 16 peers holding no stream in the cohort there, each from its
// own prefix, one Join each, so that no per-peer or per-prefix bucket
// binds — start at most the node's bucket of rounds between them (a burst
// of 2, then one every 10 s); the rest are answered from the pool (here
// empty: a bare FULL) and counted as rationed. Without the rule
// (strangerRound) the relay probes its subtree 16 times.
func TestHostileStrangersShareOneRound(t *testing.T) {
	t.Parallel()
	const strangers = 16
	wait := 5 * time.Second
	net := newNetwork(t)
	sp := feedSpec(t, "strangers share one round", newKey(t))
	broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Tree: bps.Tree{ProbeWait: wait}})
	relay := newNode(t, net, bps.Options{Tree: bps.Tree{RelayCapacity: 1, SingleParent: true, ProbeWait: wait}})
	kid := newNode(t, net, bps.Options{})
	for _, pair := range [][2]*tnode{{relay, broker}, {kid, relay}} {
		if err := net.Connect(pair[0].Node, pair[1].Node); err != nil {
			t.Fatal(err)
		}
	}
	subscribe(t, relay, broker, sp)
	child := openRaw(t, kid, relay)
	if a := child.join(listenJoin(sp)); a.Status != pb.Status_OK {
		t.Fatalf("the relay's child: %v", a.Status)
	}
	answerProbes(t, child, 0, noCandidates)

	began := time.Now()
	for i := range strangers {
		s := strangerAt(t, net, byte(i), relay)
		if a := openRaw(t, s, relay).join(listenJoin(sp)); a.Status != pb.Status_FULL || len(a.Candidates) != 0 {
			t.Fatalf("stranger %d's join: %v, want a bare FULL", i, a)
		}
	}
	most := bps.StrangerBurst + int(time.Since(began)/relay.svc.StrangerEvery())
	if n := relay.rec.count(kind(bps.EventProbe)); n > most {
		t.Fatalf("%d strangers' joins made the relay probe %d times, want at most %d", strangers, n, most)
	}
	if n := relay.svc.Rationed(); n < strangers-most {
		t.Fatalf("%d joins rationed, want at least %d", n, strangers-most)
	}
}

// TestHostileRepeatJoinerFromPool: at the root, a stranger's Join is
// answered by a round of its own; its next Join in the cohort within the
// window is answered from the pool while it holds candidates (what the
// first round found beyond the two it was told), and past the pool its
// Joins start rounds until it has sent FreeJoins (a join, a second parent,
// an orphan's rejoins; one more a minute), then at most the node's bucket
// of rounds (a burst of 2, then one every 10 s); the rest are answered
// with a bare FULL and counted as rationed. A joiner that comes for the
// first time still gets its round (the root is where a flash crowd joins).
// Without the rule (the root's gate on repeat joiners) each of the repeat
// joiner's Joins starts a round of its own.
func TestHostileRepeatJoinerFromPool(t *testing.T) {
	t.Parallel()
	const repeats = bps.FreeJoins + bps.StrangerBurst + 3
	net := newNetwork(t)
	sp := feedSpec(t, "a repeat joiner", newKey(t))
	// Two children, each naming two slots of its subtree in the first
	// round and none after: the first round finds four, tells the joiner
	// two (one from each subtree) and pools two. The second child answers
	// that round slowly, so that it takes a while and the pool keeps what
	// it found as long (poolTTL: as long as the round took, at most a
	// quarter of the probe wait).
	wait := 8 * time.Second
	// The per-peer bucket wide enough not to bind.
	root := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2, PeerProbeRounds: 64}, Tree: bps.Tree{ProbeWait: wait}})
	for i, delay := range []time.Duration{0, wait / 4} {
		kid := newNode(t, net, bps.Options{})
		if err := net.Connect(kid.Node, root.Node); err != nil {
			t.Fatal(err)
		}
		child := openRaw(t, kid, root)
		if a := child.join(listenJoin(sp)); a.Status != pb.Status_OK {
			t.Fatalf("child %d: %v", i, a.Status)
		}
		first := true
		answerProbes(t, child, delay, func(pr *pb.Probe) []*pb.Candidate {
			if !first {
				return nil
			}
			first = false
			return []*pb.Candidate{candidateAt(t, pr.Depth), candidateAt(t, pr.Depth+1)}
		})
	}
	hunter := strangerAt(t, net, 1, root)

	began := time.Now()
	if a := openRaw(t, hunter, root).join(listenJoin(sp)); a.Status != pb.Status_FULL || len(a.Candidates) != 2 {
		t.Fatalf("the first join: %v, want FULL with two candidates", a)
	}
	if n := root.rec.count(kind(bps.EventProbe)); n != 1 {
		t.Fatalf("the first join: %d rounds, want 1", n)
	}
	if a := openRaw(t, hunter, root).join(listenJoin(sp)); a.Status != pb.Status_FULL || len(a.Candidates) != 2 {
		t.Fatalf("the second join: %v, want FULL with the two pooled candidates", a)
	}
	if n := root.rec.count(kind(bps.EventProbe)); n != 1 {
		t.Fatalf("the second join, answered from the pool: %d rounds in all, want 1", n)
	}
	for i := range repeats {
		if a := openRaw(t, hunter, root).join(listenJoin(sp)); a.Status != pb.Status_FULL || len(a.Candidates) != 0 {
			t.Fatalf("repeat join %d, the pool empty: %v, want a bare FULL", i, a)
		}
	}
	// FreeJoins free (one answered from the pool), one more a minute; then
	// the node's bucket, one more every 10 s.
	took := time.Since(began)
	most := bps.FreeJoins - 1 + int(took/bps.FreeJoinsEvery) + bps.StrangerBurst + int(took/root.svc.StrangerEvery())
	if n := root.rec.count(kind(bps.EventProbe)); n > most {
		t.Fatalf("a repeat joiner's %d joins made the root probe %d times, want at most %d", repeats, n, most)
	}
	if n := root.svc.Rationed(); n < repeats-most {
		t.Fatalf("%d joins rationed, want at least %d", n, repeats-most)
	}
	before := root.rec.count(kind(bps.EventProbe))
	if a := openRaw(t, strangerAt(t, net, 2, root), root).join(listenJoin(sp)); a.Status != pb.Status_FULL {
		t.Fatalf("a newcomer's join: %v, want FULL", a)
	}
	if n := root.rec.count(kind(bps.EventProbe)); n != before+1 {
		t.Fatalf("a newcomer's join made the root probe %d times, want 1", n-before)
	}
}

// TestHostileSybilsFromOnePrefix: sybils whose overlays share a leading
// byte (cheap to mine one by one, costly to spread) — 12 peers, one Join
// each, so that no per-peer bucket binds — start at most
// Bounds.PrefixProbeRounds rounds at the root between them; the rest are
// rationed; a joiner from another prefix still gets its round. Without
// the prefix bucket (ration) the root probes 12 times.
func TestHostileSybilsFromOnePrefix(t *testing.T) {
	t.Parallel()
	const bound, sybils = 3, 12
	net := newNetwork(t)
	sp := feedSpec(t, "sybils from one prefix", newKey(t))
	root := fullRoot(t, net, sp, bps.Options{Bounds: bps.Bounds{PrefixProbeRounds: bound}, Tree: bps.Tree{ProbeWait: 2 * time.Second}}, 0, noCandidates)
	began := time.Now()
	for i := range sybils {
		if a := openRaw(t, strangerAt(t, net, 0x42, root), root).join(listenJoin(sp)); a.Status != pb.Status_FULL {
			t.Fatalf("sybil %d's join: %v, want FULL", i, a)
		}
	}
	// The prefix's bucket refills at the bound per 10 s.
	most := bound + int(float64(bound)*time.Since(began).Seconds()/10)
	if n := root.rec.count(kind(bps.EventProbe)); n > most {
		t.Fatalf("%d sybils from one prefix made the root probe %d times, want at most %d", sybils, n, most)
	}
	if n := root.svc.Rationed(); n < sybils-most {
		t.Fatalf("%d joins rationed, want at least %d", n, sybils-most)
	}
	before := root.rec.count(kind(bps.EventProbe))
	if a := openRaw(t, strangerAt(t, net, 0x43, root), root).join(listenJoin(sp)); a.Status != pb.Status_FULL {
		t.Fatalf("a joiner from another prefix: %v, want FULL", a)
	}
	if n := root.rec.count(kind(bps.EventProbe)); n != before+1 {
		t.Fatalf("a joiner from another prefix made the root probe %d times, want 1", n-before)
	}
}
