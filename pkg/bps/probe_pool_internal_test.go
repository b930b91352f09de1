// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestProbePoolWakesWhatItCanServe: a round's close wakes the oldest joins
// held, one per candidate it pooled and one for its probe slot, not the
// whole crowd; a join that stopped waiting is skipped, and the queue sheds
// the entries of those that left.
func TestProbePoolWakesWhatItCanServe(t *testing.T) {
	t.Parallel()
	var p probePool
	ws := make([]*poolWaiter, 10)
	for i := range ws {
		ws[i] = p.wait()
	}
	woken := func() (n []int) {
		for i, w := range ws {
			select {
			case <-w.woken:
				n = append(n, i)
			default:
			}
		}
		return n
	}
	p.leave(ws[1]) // stopped waiting: skipped
	until := time.Now().Add(time.Minute)
	p.add([]found{{from: &member{}, c: &pb.Candidate{Overlay: bytes.Repeat([]byte{1}, 32), Depth: 2}},
		{from: &member{}, c: &pb.Candidate{Overlay: bytes.Repeat([]byte{2}, 32), Depth: 2}}}, until)
	if got := woken(); len(got) != 3 || got[0] != 0 || got[1] != 2 || got[2] != 3 {
		t.Fatalf("woken %v, want the three oldest still waiting: [0 2 3]", got)
	}
	p.add(nil, until) // two still pooled, and the slot: three more
	if got := woken(); len(got) != 6 || got[5] != 6 {
		t.Fatalf("woken %v, want [0 2 3 4 5 6]", got)
	}
	for _, w := range ws {
		p.leave(w)
	}
	if len(p.waiting) > 3 {
		t.Fatalf("%d entries queued after every join left, want at most 3", len(p.waiting))
	}
	p.wake(5)
	if len(p.waiting) != 0 || p.gone != 0 {
		t.Fatalf("queue %d, gone %d after waking past its end; want empty", len(p.waiting), p.gone)
	}
}

// TestProbePoolHoldsLongerWhileTheCrowdProgresses: a join is held past the
// probe wait only while a round closed with candidates within the last
// probe wait, one join per joiner, and at most maxLongHeld at once; a
// place given back is taken again.
func TestProbePoolHoldsLongerWhileTheCrowdProgresses(t *testing.T) {
	t.Parallel()
	const wait = 2 * time.Second
	var p probePool
	now := time.Now()
	joiner := func(i int) swarm.Address {
		b := make([]byte, swarm.HashSize)
		binary.BigEndian.PutUint64(b, uint64(i)+1)
		return swarm.NewAddress(b)
	}
	if p.holdLonger(now, joiner(0), wait) {
		t.Fatal("held longer with no round ever closed with candidates")
	}
	p.progress = now.Add(-wait)
	if p.holdLonger(now, joiner(0), wait) {
		t.Fatal("held longer with the last progress a probe wait ago")
	}
	p.progress = now.Add(-wait / 2)
	if p.holdLonger(now, swarm.ZeroAddress, wait) {
		t.Fatal("held longer for a join that names no joiner")
	}
	if !p.holdLonger(now, joiner(0), wait) {
		t.Fatal("not held longer while the crowd progresses")
	}
	if p.holdLonger(now, joiner(0), wait) {
		t.Fatal("a second join of the same joiner held longer")
	}
	for i := 1; i < maxLongHeld; i++ {
		if !p.holdLonger(now, joiner(i), wait) {
			t.Fatalf("joiner %d not held longer, below the bound", i)
		}
	}
	if p.holdLonger(now, joiner(maxLongHeld), wait) {
		t.Fatalf("%d joins held longer, want at most %d", maxLongHeld+1, maxLongHeld)
	}
	p.unhold(joiner(3))
	if !p.holdLonger(now, joiner(maxLongHeld), wait) {
		t.Fatal("a place given back was not taken again")
	}
	for i := range maxLongHeld + 1 {
		p.unhold(joiner(i))
	}
	if p.long != nil {
		t.Fatalf("%d joiners held longer after every one gave its place back", len(p.long))
	}
}

// TestProbeHoldBoundedWhileTheCrowdProgresses: a join held while the crowd
// makes progress is held a probe wait past the last round that found
// candidates — but never past maxHold after it came, however long the
// progress goes on (joiners, or a child feeding the root's rounds, make it
// go on: docs/protocol.md, "Threat model"), so that it is answered well
// within the joiner's own handshake timeout.
func TestProbeHoldBoundedWhileTheCrowdProgresses(t *testing.T) {
	t.Parallel()
	const wait = 2 * time.Second
	s := &Service{opts: Options{Tree: Tree{ProbeWait: wait}, Timing: Timing{HandshakeTimeout: 30 * time.Second}}}
	most := s.maxHold()
	if most != 10*time.Second {
		t.Fatalf("maxHold %v, want a third of the handshake timeout", most)
	}
	c := &cohort{}
	j := s.newRootJoin(c, 1, swarm.NewAddress(bytes.Repeat([]byte{1}, swarm.HashSize)), wait)
	for _, age := range []time.Duration{wait, most / 2, most - wait/2, most, 3 * most} {
		j.start = time.Now().Add(-age) // came age ago
		c.mu.Lock()
		c.pool.progress = time.Now() // a round found candidates just now
		c.mu.Unlock()
		j.extend()
		if !j.long {
			t.Fatalf("a join %v old not held on while the crowd progresses", age)
		}
		if end := j.start.Add(most); j.deadline.After(end) {
			t.Fatalf("a join %v old held until %v past it came, want at most %v", age, j.deadline.Sub(j.start), most)
		}
	}
}

// TestProbePoolHeldJoinsBeforeAHunter: a hunter's Join (past
// maxRepeatJoins, ration.go) takes nothing from the pool while a join is
// held for it — the held join, an honest joiner's or an orphan's, comes
// first — and takes from it once nobody is held. Failed with the rule
// removed: the hunter took the candidate the held join waited for.
func TestProbePoolHeldJoinsBeforeAHunter(t *testing.T) {
	t.Parallel()
	s := &Service{opts: Options{Tree: Tree{ProbeWait: 2 * time.Second}}}
	c := &cohort{}
	c.pool.add([]found{{from: &member{}, c: &pb.Candidate{Overlay: bytes.Repeat([]byte{1}, 32), Depth: 2}}}, time.Now().Add(time.Minute))
	held := c.pool.wait()
	hunter := s.newRootJoin(c, 1, swarm.NewAddress(bytes.Repeat([]byte{9}, swarm.HashSize)), time.Second)
	hunter.class, hunter.need = joinHunter, 1 // the one pooled candidate answers it
	if best, next, _ := hunter.look(); best != nil || next != turnAnswered {
		t.Fatalf("a hunter with a join held: %v, turn %d; want nothing, answered", best, next)
	}
	if len(c.pool.found) != 1 {
		t.Fatalf("%d pooled after the hunter looked, want the held join's 1", len(c.pool.found))
	}
	c.pool.leave(held)
	if best, next, _ := hunter.look(); len(best) != 1 || next != turnAnswered {
		t.Fatalf("a hunter with nobody held: %v, turn %d; want the pooled candidate", best, next)
	}
}

// TestRepeatRoundFreedWhenItOpensNothing: a repeat join that takes the
// root's repeat round and finds no child to ask leaves the round free — the
// next repeat join sends the next one — and a repeat round another join
// holds is not ended by a join whose own round ends. Fails with openRound
// not freeing it. (The round is freed only under the cohort's mu, where it
// opens nothing or closes: freed by the join that sent it after the close
// had woken the joins held for it, it ended the next repeat round one of
// them had opened meanwhile.)
func TestRepeatRoundFreedWhenItOpensNothing(t *testing.T) {
	t.Parallel()
	s := &Service{opts: Options{Tree: Tree{ProbeWait: 2 * time.Second}}}
	c := &cohort{}
	joiner := swarm.NewAddress(bytes.Repeat([]byte{9}, swarm.HashSize))
	first := s.newRootJoin(c, 1, joiner, time.Second)
	first.class = joinRepeat
	if _, next, _ := first.look(); next != turnRound || !c.pool.rep.open {
		t.Fatalf("the first repeat join: turn %d, repeat round open %v; want a round, open", next, c.pool.rep.open)
	}
	if best, answered := first.round(); best != nil || !answered {
		t.Fatalf("a round with nobody to ask: %v, answered %v", best, answered)
	}
	if c.pool.rep.open {
		t.Fatal("the repeat round is still taken after it opened nothing")
	}

	// Another join holds the repeat round; a first join's round (not the
	// repeat round) ends: the repeat round stays taken.
	c.pool.rep.open = true
	own := s.newRootJoin(c, 1, joiner, time.Second)
	own.class = joinFirst
	if _, next, _ := own.look(); next != turnRound {
		t.Fatalf("a first join: turn %d, want a round of its own", next)
	}
	own.round()
	if !c.pool.rep.open {
		t.Fatal("a join's own round ended the repeat round another join holds")
	}
}
