// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// TestKillsCostOnlyTheKilled is issue 26's soak in memory: relays die one
// after another, 8 s apart, in a tree of capacity 2 (the broker's too)
// while the admin publishes 10 updates a second, and the nodes back off as
// bee-bps's do (1 s at least). Every node not killed — cut off or not —
// gets every update, once. Before replay on every join and by time, 2 of
// 40 runs lost the updates of a cut-off longer than 48 frames.
func TestKillsCostOnlyTheKilled(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		mt := newMTreeWithOpts(t, n, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}, Timing: bps.Timing{Inactivity: time.Hour}},
			func(o *bps.Options) {
				o.BackoffMin = time.Second
				o.BackoffMax = 5 * time.Second
				o.Inactivity = time.Hour
			},
			func(a key) *bps.Spec { return feedSpec(t, "kills-cost-only-the-killed", a) })
		mt.subscribeAll()
		var mu sync.Mutex
		got := make([]map[uint64]int, n)
		var readers sync.WaitGroup
		for i, sub := range mt.subs {
			got[i] = make(map[uint64]int)
			readers.Add(1)
			go func() {
				defer readers.Done()
				for d := range sub.C() {
					if d.Service != nil {
						continue
					}
					mu.Lock()
					got[i][d.Index]++
					mu.Unlock()
				}
			}()
		}
		p := mt.adminPublisher()
		next := uint64(0)
		pub := func(d time.Duration) {
			for end := time.Now().Add(d); time.Now().Before(end); {
				mt.publishN(p, next, next+1)
				next++
				time.Sleep(100 * time.Millisecond)
			}
		}
		pub(2 * time.Second)
		var dead []int
		for round := range 4 {
			victim := -1
			for i, nd := range mt.nodes {
				if slices.Contains(dead, i) {
					continue
				}
				if pos := mt.position(nd); len(pos.Children) > 0 && len(pos.Parents) > 0 {
					victim = i
					break
				}
			}
			if victim < 0 {
				break
			}
			t.Logf("round %d: kill n%d at update %d, t=%s", round, victim, next, time.Now().Format("15:04:05.000"))
			for i, nd := range mt.nodes {
				if !slices.Contains(dead, i) {
					pos := mt.position(nd)
					t.Logf("  n%d depth %d parents %v children %v", i, pos.Depth, mt.names(pos.Parents), mt.names(pos.Children))
				}
			}
			dead = append(dead, victim)
			mt.net.Remove(mt.nodes[victim].Node)
			pub(8 * time.Second)
		}
		pub(5 * time.Second)
		time.Sleep(5 * time.Second) // the last repairs' replays
		synctest.Wait()
		for _, sub := range mt.subs {
			_ = sub.Close()
		}
		readers.Wait()
		if len(dead) < 3 {
			t.Fatalf("only %d relays died: the tree is too shallow", len(dead))
		}
		for i := range mt.nodes {
			if slices.Contains(dead, i) {
				continue
			}
			var miss []uint64
			for k := range next {
				if got[i][k] == 0 {
					miss = append(miss, k)
				}
				if got[i][k] > 1 {
					t.Errorf("node %d: %d twice", i, k)
				}
			}
			if len(miss) > 0 {
				t.Errorf("node %d (%s) lost %d: %v", i, mt.nodes[i].Overlay(), len(miss), miss)
				dumpEvents(t, mt, i)
			}
		}
	})
}

// stamped is a tracer that keeps each event with the time it came and
// passes it on.
type stamped struct {
	mu   sync.Mutex
	at   []time.Time
	evs  []bps.Event
	next bps.Tracer
}

func (s *stamped) Trace(e bps.Event) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	s.evs = append(s.evs, e)
	s.mu.Unlock()
	s.next.Trace(e)
}

var stamps sync.Map // *tnode -> *stamped: the events of a test's nodes, for dumpEvents

// newMTreeWithOpts is newMTreeWith whose relays' options tune sets.
func newMTreeWithOpts(t *testing.T, n int, brokerOpts bps.Options, tune func(*bps.Options), sp func(admin key) *bps.Spec) *mtree {
	return newMTreeTuned(t, n, brokerOpts, 2, func(_ int, o *bps.Options) { tune(o) }, sp)
}

// newMTreeTuned is newMTreeWith whose node i's options tune sets.
func newMTreeTuned(t *testing.T, n int, brokerOpts bps.Options, relayCap int, tune func(int, *bps.Options), sp func(admin key) *bps.Spec) *mtree {
	t.Helper()
	net := newNetwork(t)
	mt := &mtree{t: t, net: net, admin: newKey(t)}
	mt.sp = sp(mt.admin)
	brokerOpts.ProbeWait = 5 * time.Second
	mt.broker = newStampedNode(t, net, brokerOpts)
	all := []*tnode{mt.broker}
	for i := range n {
		o := relayOptions(relayCap)
		tune(i, &o)
		nd := newStampedNode(t, net, o)
		for _, o := range all {
			if err := net.Connect(nd.Node, o.Node); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, nd)
		mt.nodes = append(mt.nodes, nd)
	}
	return mt
}

func newStampedNode(t *testing.T, net *streamtest.Network, o bps.Options) *tnode {
	t.Helper()
	var st *stamped
	tn := newTracedNode(t, net, o, func(rec *recorder) bps.Tracer {
		st = &stamped{next: rec}
		return st
	})
	stamps.Store(tn, st)
	t.Cleanup(func() { stamps.Delete(tn) })
	return tn
}

// dumpEvents logs node i's events but deliveries, and its deliveries as ranges.
func dumpEvents(t *testing.T, mt *mtree, i int) {
	v, _ := stamps.Load(mt.nodes[i])
	st := v.(*stamped)
	st.mu.Lock()
	defer st.mu.Unlock()
	name := func(a swarm.Address) string {
		if a.Equal(mt.broker.Overlay()) {
			return "broker"
		}
		for j, nd := range mt.nodes {
			if nd.Overlay().Equal(a) {
				return fmt.Sprintf("n%d", j)
			}
		}
		return a.String()[:8]
	}
	t0 := st.at[0]
	for k, e := range st.evs {
		if e.Kind == bps.EventDeliver || e.Kind == bps.EventAnnounced || e.Kind == bps.EventForward || e.Kind == bps.EventAccept {
			continue
		}
		t.Logf("  n%d %8.3fs %s peer=%s status=%s idx=%d err=%v", i, st.at[k].Sub(t0).Seconds(), e.Kind, name(e.Peer), e.Status, e.Index, e.Err)
	}
}

func (mt *mtree) names(as []swarm.Address) []string {
	var out []string
	for _, a := range as {
		if a.Equal(mt.broker.Overlay()) {
			out = append(out, "broker")
			continue
		}
		for j, nd := range mt.nodes {
			if nd.Overlay().Equal(a) {
				out = append(out, fmt.Sprintf("n%d", j))
			}
		}
	}
	return out
}

// TestRoutineJoinAfterACutReplays: v hangs on a, a on k, k on the broker,
// each by its one parent (capacity 1 everywhere). k dies: a and v receive
// nothing. a's link to the broker is slow, so before a is attached again
// v's routine request for a second parent (it has one, and wants two)
// finds k's slot at the broker free and takes it. That join is no repair —
// v lost no parent — yet what was published since k died passed every
// live node but a and v. a, whose only way back is then under v (a node
// with a child takes no parent below it), lets v go and attaches under it.
// v and a get every update, once, in order.
func TestRoutineJoinAfterACutReplays(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mt := newMTreeTuned(t, 3, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Timing: bps.Timing{Inactivity: time.Hour}}, 1,
			func(_ int, o *bps.Options) {
				o.BackoffMin = time.Second
				o.BackoffMax = 2 * time.Second
				o.Inactivity = time.Hour
			},
			func(a key) *bps.Spec { return feedSpec(t, "routine-join-replay", a) })
		mt.subscribeAll()
		k, a := mt.nodes[0], mt.nodes[1]
		defer func() {
			if t.Failed() {
				dumpEvents(t, mt, 1)
				dumpEvents(t, mt, 2)
			}
		}()
		for i, want := range []*tnode{mt.broker, k, a} {
			if ps := mt.subs[i].Parents(); len(ps) != 1 || !ps[0].Equal(want.Overlay()) {
				t.Fatalf("n%d's parents %v, want %s alone", i, mt.names(ps), mt.names([]swarm.Address{want.Overlay()}))
			}
		}
		if err := mt.net.SetLink(a.Node, mt.broker.Node, streamtest.LinkConfig{Latency: 500 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		p := mt.adminPublisher()
		mt.publishN(p, 0, 5)
		expectUpdates(t, mt.subs[1], 0, 5)
		expectUpdates(t, mt.subs[2], 0, 5)
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		t.Logf("kill k at %s", time.Now().Format("05.000"))
		mt.net.Remove(k.Node)
		mt.publishN(p, 5, 10) // a and v are cut off
		// Usually v's routine request takes k's slot first; where a's
		// rejoin wins the race (under -race, 5 of 20), a is sent the replay
		// and passes it on: either way nothing is lost.
		time.Sleep(5 * time.Second) // the repairs and requests run on their own timers
		synctest.Wait()
		mt.publishN(p, 10, 15)
		for _, i := range []int{2, 1} {
			expectUpdates(t, mt.subs[i], 5, 15)
		}
		synctest.Wait()
		for i := 1; i <= 2; i++ {
			if got := mt.subs[i].Received(); got != 15 {
				t.Errorf("n%d received %d updates, want 15", i, got)
			}
		}
	})
}

// TestCutOffLongerThanTheQueue: v hangs on a by its one parent, a dies,
// and x, a node that relays nothing, takes a's slot at the broker first
// (v's link to the broker is slower): the broker tells v FULL with no
// candidate, which imposes a 6 s backoff on v's next join there. x leaves
// at 3 s; v's join after the backoff finds the slot, and asks, as its Join
// leaves, for the 6 s it missed while the admin published 10 updates a
// second: the broker replays all of them — more than the 48 frames (three
// quarters of a stream's queue) a replay was capped at — beside the
// stream's queue, before the live ones. v gets every update, once, in order.
func TestCutOffLongerThanTheQueue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		mt, got, done := cutOff(t, "cut-off-past-the-queue", 6*time.Second, func(mt *mtree, i uint64) func() {
			if i != 10 {
				return nil
			}
			// a is gone (at 1 s): once the broker let its slot go, x
			// takes it before v's repair arrives.
			synctest.Wait()
			x := newNode(t, mt.net, bps.Options{})
			if err := mt.net.Connect(x.Node, mt.broker.Node); err != nil {
				t.Fatal(err)
			}
			sub, err := x.svc.Subscribe(ctxT(t), mt.broker.Overlay(), mt.sp)
			if err != nil {
				t.Fatal(err)
			}
			return func() { _ = sub.Close() } // at 3 s
		})
		done()
		if len(got()) != cutOffTotal {
			t.Errorf("v received %d updates, want %d", len(got()), cutOffTotal)
		}
		if n := metricValue(t, mt.broker.svc, "replayed"); n < 49 {
			t.Errorf("the broker replayed %v deliveries, want more than 48", n)
		}
	})
}

// TestParentlessRejoinSkipsTheBackoff: v hangs on a by its one parent and
// has asked the broker for a second one for a while (each FULL doubling
// its backoff there, up to 15 s here; BackoffMax is 30 s by default). a
// dies: v's rejoin at the broker, where a's slot is free, goes at once —
// waiting out the backoff it would be cut off longer than a replay
// covers (10 s), as on the soak (a node single-parented under a killed
// relay 19 s without a parent, 132 updates lost). v gets every update.
func TestParentlessRejoinSkipsTheBackoff(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, got, done := cutOff(t, "parentless-rejoin-skips-the-backoff", 15*time.Second, func(*mtree, uint64) func() { return nil })
		done()
		if len(got()) != cutOffTotal {
			t.Errorf("v received %d updates, want %d", len(got()), cutOffTotal)
		}
	})
}

// cutOffTotal is the updates cutOff publishes, 10 a second.
const cutOffTotal = 120

// cutOff is broker (1 stream) → a → v, every node's backoff min and max
// backoff, v's link to the broker 100 ms; a dies at 1 s (update 10) while the admin publishes cutOffTotal
// updates 10 a second; at each update at(mt, i) may act, and the func it
// returns runs 20 updates later. done waits for v's last delivery and
// checks v's order; got is what v received.
func cutOff(t *testing.T, topic string, backoff time.Duration, at func(mt *mtree, i uint64) func()) (mt *mtree, got func() []uint64, done func()) {
	t.Helper()
	mt = newMTreeTuned(t, 2, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Timing: bps.Timing{Inactivity: time.Hour}}, 1,
		func(_ int, o *bps.Options) { o.BackoffMin, o.BackoffMax, o.Inactivity = backoff, backoff, time.Hour },
		func(a key) *bps.Spec { return feedSpec(t, topic, a) })
	mt.subscribeAll()
	a, v, sub := mt.nodes[0], mt.nodes[1], mt.subs[1]
	if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(a.Overlay()) {
		t.Fatalf("v's parents %v, want a alone", mt.names(ps))
	}
	// v's rejoin reaches the broker after the broker let a's slot go.
	if err := mt.net.SetLink(v.Node, mt.broker.Node, streamtest.LinkConfig{Latency: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var recvd []uint64
	read := make(chan struct{})
	go func() {
		defer close(read)
		for d := range sub.C() {
			if d.Service == nil {
				recvd = append(recvd, d.Index)
			}
		}
	}()
	p := mt.adminPublisher()
	later := make(map[uint64]func())
	for i := uint64(0); i < cutOffTotal; i++ {
		if i == 10 {
			mt.net.Remove(a.Node)
		}
		if f := at(mt, i); f != nil {
			later[i+20] = f
		}
		if f := later[i]; f != nil {
			f()
		}
		mt.publishN(p, i, i+1)
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Second)
	synctest.Wait()
	if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(mt.broker.Overlay()) {
		t.Fatalf("v's parents %v, want the broker", mt.names(ps))
	}
	_ = sub.Close()
	<-read
	for i, idx := range recvd {
		if idx != uint64(i) {
			t.Fatalf("v's delivery %d is update %d: %v", i, idx, recvd)
		}
	}
	return mt, func() []uint64 { return recvd }, func() {}
}
