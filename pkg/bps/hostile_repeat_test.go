// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"crypto/rand"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// huntedRoot is a full root (slot hunting, issue 24: ration.go's repeat
// joiners) whose kids raw children answer every probe at once, each with
// maxCandidates made-up candidates at the probe's depth (none if
// candidates is 0), and the strangers connected to it, over 25 ms links
// (a round takes a round trip: what it pools is kept as long). The
// per-peer and per-prefix rations are out of reach: what binds is the
// rule under test.
func huntedRoot(t *testing.T, wait time.Duration, kids, candidates, strangers int) (*tnode, []*tnode, *bps.Spec) {
	t.Helper()
	net := newNetwork(t, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: 25 * time.Millisecond}))
	sp := feedSpec(t, "hunted", newKey(t))
	broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: kids, PeerProbeRounds: 10000, PrefixProbeRounds: 10000}, Tree: bps.Tree{ProbeWait: wait}})
	var ss []*tnode
	for i := range kids + strangers {
		n := newNode(t, net, bps.Options{})
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
		if i >= kids {
			ss = append(ss, n)
			continue
		}
		child := openRaw(t, n, broker)
		if a := child.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true}); a.Status != pb.Status_OK {
			t.Fatalf("kid %d: %v", i, a.Status)
		}
		go child.answerProbes(func(pr *pb.Probe) []*pb.Candidate {
			var cs []*pb.Candidate
			for range candidates {
				ov := make([]byte, swarm.HashSize)
				_, _ = rand.Read(ov)
				cs = append(cs, &pb.Candidate{Overlay: ov, Depth: pr.Depth})
			}
			return cs
		})
	}
	return broker, ss, sp
}

// answerProbes answers every probe r reads with what name makes of it,
// until the stream ends (the test is over: its cleanup reset it); other
// frames (heartbeats) it skips.
func (r *raw) answerProbes(name func(*pb.Probe) []*pb.Candidate) {
	for {
		f := new(pb.Frame)
		if r.read(f) != nil {
			return
		}
		pr := f.GetProbe()
		if pr == nil {
			continue
		}
		if _, err := r.s.Write(bps.EncodeFrame(&pb.Frame{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: pr.Nonce, Candidates: name(pr)}}})); err != nil {
			return
		}
	}
}

// plainJoin sends a plain multihop Join from n to the root and returns its
// answer.
func plainJoin(t *testing.T, n, root *tnode, sp *bps.Spec) *pb.Ack {
	t.Helper()
	r := openRaw(t, n, root)
	a := r.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true})
	_ = r.s.Reset()
	return a
}

// TestHostileRepeatJoinersShareOneRound: strangers that Joined a full root
// as a joiner does (bps.FirstJoins: one Subscribe's rounds) come back, all
// at once (a hunt spread over many peers, which no per-peer or per-prefix
// bucket binds: here they are out of reach). Their repeat Joins share the
// root's one repeat round — held while it is open, answered from what it
// pooled, the next sent once it closed — so the rounds follow what they
// serve (two joiners each here), not the Joins; and every repeat joiner
// is answered with candidates, none refused for the bound. Failed with
// the rule removed (a repeat Join served as a first one): 7 rounds for 8
// Joins at once.
func TestHostileRepeatJoinersShareOneRound(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const strangers = 8
		wait := 4 * time.Second
		broker, ss, sp := huntedRoot(t, wait, 2, 2, strangers)
		for _, s := range ss {
			for range bps.FirstJoins {
				if a := plainJoin(t, s, broker, sp); a.Status != pb.Status_FULL || len(a.Candidates) == 0 {
					t.Fatalf("a first join: %v, want FULL with candidates", a)
				}
			}
		}
		synctest.Wait()
		before := broker.rec.count(kind(bps.EventProbe))
		if before != strangers*bps.FirstJoins {
			t.Fatalf("%d first joins made %d rounds, want one each", strangers*bps.FirstJoins, before)
		}
		began := time.Now()
		acks := make([]*pb.Ack, strangers)
		errs := make([]error, strangers)
		var wg sync.WaitGroup
		for i, s := range ss {
			r := openRaw(t, s, broker)
			wg.Go(func() {
				defer func() { _ = r.s.Reset() }()
				if _, errs[i] = r.s.Write(bps.EncodeFrame(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Multihop: true, Listen: true})); errs[i] == nil {
					acks[i] = new(pb.Ack)
					errs[i] = r.read(acks[i])
				}
			})
		}
		wg.Wait()
		took := time.Since(began)
		rounds := broker.rec.count(kind(bps.EventProbe)) - before
		for i, a := range acks {
			if errs[i] != nil {
				t.Fatalf("stranger %d's repeat join: %v", i, errs[i])
			}
			if a.Status != pb.Status_FULL || len(a.Candidates) == 0 {
				t.Fatalf("stranger %d's repeat join: %v, want FULL with candidates", i, a)
			}
		}
		if rounds > strangers/2 {
			t.Fatalf("%d repeat joins at once made %d rounds, want at most %d (two served by each)", strangers, rounds, strangers/2)
		}
		if took > wait {
			t.Fatalf("the repeat joins were answered in %v, past the probe wait %v", took, wait)
		}
	})
}

// TestHostileHunterAnsweredFromThePool: a stranger Joins a full root again
// and again, as a hunter does (4 a second in bps-sim's -attack
// squat-root). Past bps.MaxRepeatJoins in a minute its Joins start no
// round, are held for none and are answered at once (from the pool: here
// bare FULL), each counted as rationed. Failed with the rule removed: 10
// more rounds.
func TestHostileHunterAnsweredFromThePool(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		wait := 400 * time.Millisecond
		broker, ss, sp := huntedRoot(t, wait, 1, 0, 1)
		hunter := ss[0]
		for i := range bps.MaxRepeatJoins {
			if a := plainJoin(t, hunter, broker, sp); a.Status != pb.Status_FULL {
				t.Fatalf("join %d: %v, want FULL", i, a)
			}
		}
		synctest.Wait()
		rounds, rationed := broker.rec.count(kind(bps.EventProbe)), broker.svc.Rationed()
		if rounds != bps.MaxRepeatJoins || rationed != 0 {
			t.Fatalf("%d joins: %d rounds, %d rationed; want a round each", bps.MaxRepeatJoins, rounds, rationed)
		}
		const more = 10
		for i := range more {
			began := time.Now()
			if a := plainJoin(t, hunter, broker, sp); a.Status != pb.Status_FULL || len(a.Candidates) != 0 {
				t.Fatalf("join %d past the bound: %v, want a bare FULL", i, a)
			}
			// A stream's open and the Join's answer: two round trips of
			// the links, with nothing held between.
			if took := time.Since(began); took > 4*25*time.Millisecond {
				t.Fatalf("join %d past the bound was answered in %v, want within two round trips", i, took)
			}
		}
		synctest.Wait()
		if n := broker.rec.count(kind(bps.EventProbe)) - rounds; n != 0 {
			t.Fatalf("%d joins past the bound made %d rounds, want none", more, n)
		}
		if n := broker.svc.Rationed() - rationed; n != more {
			t.Fatalf("%d joins past the bound, %d counted as rationed", more, n)
		}
	})
}
