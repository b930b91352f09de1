// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"crypto/rand"
	"slices"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/proto"
)

// newLazyTree is newMTree with each relay's options from opts (i: the
// relay's index; relay capacity 2 unless opts sets another).
func newLazyTree(t *testing.T, n, brokerCap int, sp func(admin key) *bps.Spec, opts func(i int, o *bps.Options), netOpts ...streamtest.Option) *mtree {
	t.Helper()
	net := newNetwork(t, netOpts...)
	mt := &mtree{t: t, net: net, admin: newKey(t)}
	mt.sp = sp(mt.admin)
	mt.broker = newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: brokerCap}, Tree: bps.Tree{ProbeWait: 5 * time.Second}})
	all := []*tnode{mt.broker}
	for i := range n {
		o := relayOptions(2)
		if opts != nil {
			opts(i, &o)
		}
		nd := newNode(t, net, o)
		for _, other := range all {
			if err := net.Connect(nd.Node, other.Node); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, nd)
		mt.nodes = append(mt.nodes, nd)
	}
	return mt
}

// pushParents is sub's eager parent and its lazy one (zero if it has
// none in that mode).
func pushParents(sub *bps.Subscription) (eager, lazy swarm.Address) {
	for peer, lz := range lazyOf(sub) {
		if lz {
			lazy = swarm.NewAddress([]byte(peer))
		} else {
			eager = swarm.NewAddress([]byte(peer))
		}
	}
	return eager, lazy
}

// lazyOf is, for each parent of sub, whether it feeds sub lazily, by
// overlay.
func lazyOf(sub *bps.Subscription) map[string]bool {
	out := make(map[string]bool)
	ps, lz := sub.Parents(), sub.LazyParents()
	for i := range min(len(ps), len(lz)) {
		out[ps[i].ByteString()] = lz[i]
	}
	return out
}

// TestLazySecondParent: of a node's two parents one sends every update
// whole and the other only announces it; every update reaches every node
// once and in order, and a two-parented node is not sent a second copy of
// any (eager parenting drops one duplicate per update there). LazyWait is
// long, so that no copy is asked for on a busy machine.
func TestLazySecondParent(t *testing.T) {
	t.Parallel()
	mt := newLazyTree(t, 4, 2, func(a key) *bps.Spec { return feedSpec(t, "lazy-second-parent", a) }, func(_ int, o *bps.Options) {
		o.LazyWait = 10 * time.Second
	})
	mt.subscribeAll()
	for i, sub := range mt.subs[2:] {
		lz := sub.LazyParents()
		if len(lz) != 2 || lz[0] == lz[1] {
			t.Fatalf("node %d: lazy parents %v, want one eager and one lazy", i+2, lz)
		}
	}
	p := mt.adminPublisher()
	const n = 20
	mt.publishN(p, 0, n)
	for i, sub := range mt.subs {
		expectUpdates(t, sub, 0, n)
		if got := sub.Received(); got != n {
			t.Fatalf("node %d received %d, want %d", i, got, n)
		}
	}
	for i, sub := range mt.subs[2:] {
		if d := sub.Dropped(); d != 0 {
			t.Fatalf("node %d dropped %d copies of %d updates: the lazy parent sent them whole", i+2, d, n)
		}
	}
}

// TestLazyAskWhenEagerLate: the eager parent sends nothing (a peer that
// does not speak lazy push, so it stays eager); the lazy parent's
// announcements are asked for once LazyWait passed and served, so every
// update arrives; after lazySwapAfter served first in a row the lazy
// parent is set eager.
func TestLazyAskWhenEagerLate(t *testing.T) {
	t.Parallel()
	mt := newMTreeWith(t, 1, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}}, 2, func(a key) *bps.Spec { return feedSpec(t, "lazy-ask", a) })
	mt.subscribeAll()
	honest := mt.nodes[0]
	mute := statingParent(t, mt.net, 1) // OK, then nothing
	o := relayOptions(2)
	o.LazyWait = 20 * time.Millisecond
	joiner, sub := mt.joinFirstAt(mute, honest.Node, o)
	if lz := sub.LazyParents(); !slices.Equal(lz, []bool{false, true}) {
		t.Fatalf("lazy parents %v, want the mute one eager and the relay lazy", lz)
	}
	p := mt.adminPublisher()
	const n = 10
	for i := range uint64(n) {
		mt.publishN(p, i, i+1)
		expectUpdates(t, sub, i, i+1)
	}
	ask := joiner.rec.wait(t, "an ask to the lazy parent", kind(bps.EventAsk))
	if !ask.Peer.Equal(honest.Overlay()) {
		t.Fatalf("asked %s, want the relay %s", ask.Peer, honest.Overlay())
	}
	pr := joiner.rec.wait(t, "the lazy parent set eager", kind(bps.EventPromote))
	if !pr.Peer.Equal(honest.Overlay()) {
		t.Fatalf("promoted %s, want the relay %s", pr.Peer, honest.Overlay())
	}
	if lz := lazyOf(sub); lz[honest.Overlay().ByteString()] {
		t.Fatal("the relay is still lazy")
	}
}

// TestLazySlowParentNotDropped: the eager parent sends nothing, so every
// update is asked of the lazy parent, an honest relay behind a slow link:
// its frames come 2.4 s after the asks, past lazyServeWait. It is slow,
// not withholding, and is not dropped: a parent misses at most one ask a
// wait, and the wait follows how long it took to serve. Before, each of
// the asks out at once was a miss, and MaxLag of them dropped it (honest
// parents dropped for lag in bps-sim -lazy-parents on a loaded machine).
func TestLazySlowParentNotDropped(t *testing.T) {
	t.Parallel()
	const slow = 1200 * time.Millisecond // one way
	mt := newMTreeWith(t, 1, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}}, 2, func(a key) *bps.Spec { return feedSpec(t, "lazy-slow", a) })
	mt.subscribeAll()
	honest := mt.nodes[0]
	mute := statingParent(t, mt.net, 1) // OK, then nothing
	o := relayOptions(2)
	o.LazyWait = 20 * time.Millisecond
	o.MaxLag = 4
	joiner, sub := mt.joinFirstAt(mute, honest.Node, o)
	if lz := sub.LazyParents(); !slices.Equal(lz, []bool{false, true}) {
		t.Fatalf("lazy parents %v, want the mute one eager and the relay lazy", lz)
	}
	if err := mt.net.SetLink(honest.Node, joiner.Node, streamtest.LinkConfig{Latency: slow}); err != nil {
		t.Fatal(err)
	}
	p := mt.adminPublisher()
	const n = 8 // asked at once, twice MaxLag
	mt.publishN(p, 0, n)
	expectUpdates(t, sub, 0, n)
	if n := joiner.rec.count(kind(bps.EventWithheld)); n != 0 {
		t.Fatalf("%d parents dropped for lag: the slow relay served every ask", n)
	}
	if !slices.ContainsFunc(sub.Parents(), honest.Overlay().Equal) {
		t.Fatalf("parents %v: the slow relay is gone", sub.Parents())
	}
}

// TestLazyFailover: a node's eager parent dies mid-stream; its lazy parent
// is set eager at once and what it announced meanwhile is asked for at
// once — with LazyWait an hour, only that can deliver — so no update is
// missing, and the node is fed whole again within one round trip of the
// loss.
func TestLazyFailover(t *testing.T) {
	t.Parallel()
	mt := newLazyTree(t, 4, 2, func(a key) *bps.Spec { return feedSpec(t, "lazy-failover", a) }, func(i int, o *bps.Options) {
		o.LazyWait = time.Hour
	})
	mt.subscribeAll()
	p := mt.adminPublisher()
	mt.publishN(p, 0, 5)
	for _, sub := range mt.subs {
		expectUpdates(t, sub, 0, 5)
	}
	child, sub := mt.nodes[2], mt.subs[2]
	eager, lazy := pushParents(sub)
	if eager.IsZero() || lazy.IsZero() {
		t.Fatalf("lazy parents %v, want one of each", sub.LazyParents())
	}
	mt.net.Remove(findNode(mt.nodes, eager).Node)
	child.rec.wait(t, "lost the eager parent", func(e bps.Event) bool { return e.Kind == bps.EventParentLost && e.Peer.Equal(eager) })
	start := time.Now()
	mt.publishN(p, 5, 15)
	expectUpdates(t, sub, 5, 15)
	t.Logf("10 updates after the failover in %s", time.Since(start))
	pr := child.rec.wait(t, "the lazy parent set eager", kind(bps.EventPromote))
	if !pr.Peer.Equal(lazy) {
		t.Fatalf("promoted %s, want %s", pr.Peer, lazy)
	}
	if sub.LivenessFaults() != 0 {
		t.Fatal("a liveness fault")
	}
}

// TestLazyFailoverWithinRoundTrip: on links of 40 ms, a node's eager
// parent dies right after taking an update, its frame to the node lost with
// it; the update reaches the node through the lazy parent — set eager and
// asked at once, LazyWait being an hour — at most one round trip (80 ms)
// later than updates reach it in the steady state, with one round trip of
// slack and the machine's own delay (the steady state's excess over its
// three links) on top. Not parallel: it measures time.
func TestLazyFailoverWithinRoundTrip(t *testing.T) {
	const link = 40 * time.Millisecond
	mt := newLazyTree(t, 3, 2, func(a key) *bps.Spec { return feedSpec(t, "lazy-failover-rtt", a) }, func(i int, o *bps.Options) {
		o.LazyWait = time.Hour
	}, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: link}))
	mt.subscribeAll()
	child, sub := mt.nodes[2], mt.subs[2]
	var eager swarm.Address
	for peer, lz := range lazyOf(sub) {
		if !lz {
			eager = swarm.NewAddress([]byte(peer))
		}
	}
	if len(sub.Parents()) != 2 || eager.IsZero() {
		t.Fatalf("parents %v, lazy %v: want two, one eager", sub.Parents(), sub.LazyParents())
	}
	var eagerSub *bps.Subscription
	for i, nd := range mt.nodes {
		if nd.Overlay().Equal(eager) {
			eagerSub = mt.subs[i]
		}
	}
	p := mt.adminPublisher()
	// The steady state: the slowest of three updates.
	var steady time.Duration
	for i := range uint64(3) {
		start := time.Now()
		mt.publishN(p, i, i+1)
		expectUpdates(t, sub, i, i+1)
		steady = max(steady, time.Since(start))
		expectUpdates(t, eagerSub, i, i+1)
	}
	start := time.Now()
	mt.publishN(p, 3, 4)
	expectUpdates(t, eagerSub, 3, 4) // the eager parent took it and queued it to the node
	mt.net.Remove(findNode(mt.nodes, eager).Node)
	expectUpdates(t, sub, 3, 4)
	took := time.Since(start)
	t.Logf("steady %s; the update the eager parent died with %s (+%s; a round trip is %s)", steady, took, took-steady, 2*link)
	if noise := max(steady-3*link, 0); took > steady+2*2*link+noise {
		t.Fatalf("the update the eager parent died with took %s, steady %s: more than a round trip later", took, steady)
	}
	child.rec.wait(t, "the lazy parent set eager", kind(bps.EventPromote))
}

// TestLazyFailoverAnnouncedBefore: the lazy parent's announcement of an
// update has reached the node, which waits for the eager parent's frame
// (its link is slow), when the eager parent dies: the node sets the lazy
// parent eager and asks for what it announced at once — LazyWait is an
// hour — so the update comes one round trip (80 ms) after the loss, with
// one round trip of slack and the machine's own delay (the steady state's
// excess over its three links) on top. Not parallel: it measures time.
func TestLazyFailoverAnnouncedBefore(t *testing.T) {
	const link = 40 * time.Millisecond
	mt := newLazyTree(t, 3, 2, func(a key) *bps.Spec { return feedSpec(t, "lazy-failover-announced", a) }, func(i int, o *bps.Options) {
		o.LazyWait = time.Hour
	}, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: link}))
	mt.subscribeAll()
	sub := mt.subs[2]
	var eager swarm.Address
	for peer, lz := range lazyOf(sub) {
		if !lz {
			eager = swarm.NewAddress([]byte(peer))
		}
	}
	if len(sub.Parents()) != 2 || eager.IsZero() {
		t.Fatalf("parents %v, lazy %v: want two, one eager", sub.Parents(), sub.LazyParents())
	}
	e := findNode(mt.nodes, eager)
	p := mt.adminPublisher()
	begin := time.Now()
	mt.publishN(p, 0, 1)
	expectUpdates(t, sub, 0, 1)
	noise := max(time.Since(begin)-3*link, 0)
	if err := mt.net.SetLink(e.Node, mt.nodes[2].Node, streamtest.LinkConfig{Latency: time.Minute}); err != nil {
		t.Fatal(err)
	}
	before := mt.nodes[2].rec.count(kind(bps.EventAnnounced))
	mt.publishN(p, 1, 2)
	mt.nodes[2].rec.waitN(t, before+1, "the lazy parent's announcement", kind(bps.EventAnnounced))
	if n := sub.LazyPending(); n != 1 {
		t.Fatalf("%d announcements waiting, want 1", n)
	}
	start := time.Now()
	mt.net.Remove(e.Node)
	expectUpdates(t, sub, 1, 2)
	took := time.Since(start)
	t.Logf("the update came %s after the eager parent died (a round trip is %s; this machine added %s to the steady state)", took, 2*link, noise)
	if took > 2*2*link+noise {
		t.Fatalf("the update came %s after the loss: more than a round trip", took)
	}
}

// TestLazyFailoverInFlight: the eager parent dies while the lazy
// parent's announcements of the next updates are on their way (its link
// is slow). The node sets the lazy parent eager at once, telling it how
// many announcements it has read (SetPush.from); the parent sends the
// frames of the announcements after those whole as it turns eager, ahead
// of what it sends after, and the node asks for none of them. Before,
// each announcement read after the loss was asked for — a second round
// trip, behind the frames sent whole after it, which on a loaded host
// came later than the reorder wait: updates lost at a node that kept a
// parent (TestMultihopHundredsLazy).
func TestLazyFailoverInFlight(t *testing.T) {
	t.Parallel()
	const slow = 500 * time.Millisecond
	mt := newLazyTree(t, 3, 2, func(a key) *bps.Spec { return feedSpec(t, "lazy-failover-in-flight", a) }, func(i int, o *bps.Options) {
		o.LazyWait = time.Hour // only the failover's own path can deliver
	})
	mt.subscribeAll()
	child, sub := mt.nodes[2], mt.subs[2]
	eager, lazy := pushParents(sub)
	if len(sub.Parents()) != 2 || eager.IsZero() || lazy.IsZero() {
		t.Fatalf("parents %v, lazy %v: want two, one eager", sub.Parents(), sub.LazyParents())
	}
	p := mt.adminPublisher()
	mt.publishN(p, 0, 1)
	expectUpdates(t, sub, 0, 1)
	if err := mt.net.SetLink(findNode(mt.nodes, lazy).Node, child.Node, streamtest.LinkConfig{Latency: slow}); err != nil {
		t.Fatal(err)
	}
	announced := child.rec.count(kind(bps.EventAnnounced))
	mt.net.Remove(findNode(mt.nodes, eager).Node)
	child.rec.wait(t, "the lazy parent set eager", kind(bps.EventPromote))
	start := time.Now()
	mt.publishN(p, 1, 3) // announced before the lazy parent learns it is eager
	if took := time.Since(start); took >= slow {
		t.Skipf("publishing took %s, the link's latency %s: the announcements were not in flight", took, slow)
	}
	expectUpdates(t, sub, 1, 3)
	if n := child.rec.count(kind(bps.EventAnnounced)) - announced; n != 2 {
		t.Fatalf("%d announcements read after the loss, want the 2 in flight", n)
	}
	if n := child.rec.count(kind(bps.EventAsk)); n != 0 {
		t.Fatalf("%d asks: what was in flight when the parent was set eager is served unasked", n)
	}
	if n := sub.LazyPending(); n != 0 {
		t.Fatalf("%d announcements still waiting", n)
	}
}

// TestLazyPassedOver: the eager parent's stream is ordered, so when it
// delivers an update the lazy parent announced after another the node
// still lacks, that one was skipped (and, a feed update, past the next
// index expected): the node asks for it at once — with LazyWait an hour,
// only this delivers it — while the reorder wait holds the later one.
func TestLazyPassedOver(t *testing.T) {
	t.Parallel()
	lazyPassedOver(t, "lazy-passed-over", 0)
}

// TestLazyPassedOverSlow is TestLazyPassedOver with the lazy parent
// behind a slow link: the update the eager parent skipped comes, asked
// for, 1.2 s after the one after it — past the reorder wait (1 s). The
// reorder holds that one while the ask that may fill the gap is out, so
// the node gets all three in order. Before, the reorder passed over the
// gap at its wait and the update came too late: lost at a node that kept
// both its parents.
func TestLazyPassedOverSlow(t *testing.T) {
	t.Parallel()
	lazyPassedOver(t, "lazy-passed-over-slow", 600*time.Millisecond)
}

// lazyPassedOver runs a node whose eager parent delivers updates 0 and 2
// and passes over 1, which only its lazy parent — an honest relay, behind
// a link of latency slow one way if set — announced: the node gets all
// three, in order.
func lazyPassedOver(t *testing.T, topic string, slow time.Duration) {
	t.Helper()
	mt := newMTreeWith(t, 1, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}}, 2, func(a key) *bps.Spec { return feedSpec(t, topic, a) })
	mt.subscribeAll()
	honest := mt.nodes[0]
	down, up := make(chan *pb.Frame, 4), make(chan *pb.Frame, 64)
	skipper := lazyFakeParent(t, mt.net, 1, down, up)
	o := relayOptions(2)
	o.LazyWait = time.Hour
	joiner, sub := mt.joinFirstAt(skipper, honest.Node, o)
	if lz := sub.LazyParents(); !slices.Equal(lz, []bool{false, true}) {
		t.Fatalf("lazy parents %v, want the skipper eager, the relay lazy", lz)
	}
	if slow > 0 {
		if err := mt.net.SetLink(honest.Node, joiner.Node, streamtest.LinkConfig{Latency: slow}); err != nil {
			t.Fatal(err)
		}
	}
	msgs := mt.sendN(mt.adminPublisher(), 3, "passed over")
	joiner.rec.waitN(t, 3, "three announcements", kind(bps.EventAnnounced))
	down <- &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: msgs[0]}}
	down <- &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: msgs[2]}}
	expectUpdates(t, sub, 0, 3)
}

// TestLazyMixedTree: nodes that speak no lazy push (NoLazyPush) beside
// nodes that do: a stream is lazy only where both ends speak it, every
// node keeps an eager parent, and every update reaches every node once and
// in order.
func TestLazyMixedTree(t *testing.T) {
	t.Parallel()
	old := func(i int) bool { return i%2 == 1 }
	mt := newLazyTree(t, 8, 2, func(a key) *bps.Spec { return feedSpec(t, "lazy-mixed", a) }, func(i int, o *bps.Options) {
		o.NoLazyPush = old(i)
	})
	mt.subscribeAll()
	p := mt.adminPublisher()
	const n = 12
	mt.publishN(p, 0, n)
	speaks := func(a swarm.Address) bool {
		if a.Equal(mt.broker.Overlay()) {
			return true
		}
		for i, nd := range mt.nodes {
			if nd.Overlay().Equal(a) {
				return !old(i)
			}
		}
		t.Fatalf("no node %s", a)
		return false
	}
	mixed := 0
	for i, sub := range mt.subs {
		expectUpdates(t, sub, 0, n)
		ps, lz := sub.Parents(), sub.LazyParents()
		lazies := 0
		for j := range ps {
			if lz[j] {
				lazies++
				if old(i) || !speaks(ps[j]) {
					t.Fatalf("node %d: parent %s lazy, but one end does not speak lazy push", i, ps[j])
				}
			}
		}
		switch {
		case lazies == len(ps):
			t.Fatalf("node %d: no eager parent among %v", i, ps)
		case len(ps) == 2 && !old(i) && speaks(ps[0]) && speaks(ps[1]) && lazies != 1:
			t.Fatalf("node %d: %d lazy parents of two that speak it, want 1", i, lazies)
		case len(ps) == 2 && (old(i) || !speaks(ps[0]) || !speaks(ps[1])):
			mixed++
		}
	}
	if mixed == 0 {
		t.Fatal("no two-parented node with a parent or itself not speaking lazy push: the tree is not mixed")
	}
}

// TestHostileLazyParentNeverServes: a lazy parent announces what it never
// serves. The node asks each announcement once; each ask not served in
// time is a miss, and MaxLag misses drop the parent as withholding; the
// eager parent delivers throughout.
func TestHostileLazyParentNeverServes(t *testing.T) {
	t.Parallel()
	mt := newMTreeWith(t, 1, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 2}}, 2, func(a key) *bps.Spec { return feedSpec(t, "lazy-never-serves", a) })
	mt.subscribeAll()
	honest := mt.nodes[0]
	down, up := make(chan *pb.Frame, 1), make(chan *pb.Frame, 64)
	evil := lazyFakeParent(t, mt.net, 1, down, up)
	o := relayOptions(2)
	o.MaxLag = 3
	o.LazyWait = 10 * time.Millisecond
	joiner, sub := mt.joinFirstAt(honest.Node, evil, o)
	if lz := sub.LazyParents(); !slices.Equal(lz, []bool{false, true}) {
		t.Fatalf("lazy parents %v, want the relay eager, the fake lazy", lz)
	}
	const announced = 3
	for range announced {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		down <- &pb.Frame{Kind: &pb.Frame_Announce{Announce: &pb.Announce{Key: key}}}
	}
	asked := make(map[uint64]bool)
	for len(asked) < announced {
		select {
		case f := <-up:
			for _, q := range f.GetAsk().GetSeqs() {
				if asked[q] || q >= announced {
					t.Fatalf("asked for announcement %d (asked before: %v) of %d", q, asked[q], announced)
				}
				asked[q] = true
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("asked for %d of %d announcements", len(asked), announced)
		}
	}
	ev := joiner.rec.wait(t, "the lazy parent that never serves dropped", kind(bps.EventWithheld))
	if !ev.Peer.Equal(evil.Overlay()) {
		t.Fatalf("dropped %s, want %s", ev.Peer, evil.Overlay())
	}
	p := mt.adminPublisher()
	mt.publishN(p, 0, 3)
	expectUpdates(t, sub, 0, 3)
	if slices.ContainsFunc(sub.Parents(), evil.Overlay().Equal) {
		t.Fatal("the parent that never serves is a parent again")
	}
}

// readEnvelope reads one enveloped frame from r.
func readEnvelope(t *testing.T, r *raw) *pb.Frame {
	t.Helper()
	f := new(pb.Frame)
	if err := r.read(f); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	return f
}

// lazyChild is a raw lazy child of a broker (cl[0]'s stream) and a
// publisher of the admin's at it (cl[1]'s), in a cluster of three clients.
func lazyChild(t *testing.T, topic string) (broker *tnode, cl []*tnode, child *raw, pub *bps.Publisher, sp *bps.Spec, admin key) {
	t.Helper()
	_, broker, cl = cluster(t, bps.Options{}, 3)
	admin = newKey(t)
	sp = feedSpec(t, topic, admin)
	child = openRaw(t, cl[0], broker)
	if ack := child.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Listen: true, Multihop: true, Push: pb.PushMode_LAZY}); ack.Push != pb.PushMode_LAZY {
		t.Fatalf("ack push %s, want LAZY", ack.Push)
	}
	return broker, cl, child, publish(t, cl[1], broker, sp, admin, 0), sp, admin
}

// announced publishes update index and reads its announcement on child.
func announced(t *testing.T, child *raw, pub *bps.Publisher, sp *bps.Spec, admin key, index uint64) *pb.Broadcast {
	t.Helper()
	m := update(t, admin, sp, pub.Challenge(), index, "flood")
	if err := pub.Send(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
	f := readEnvelope(t, child)
	for f.GetBroadcast().GetKind() == pb.Kind_HEARTBEAT {
		f = readEnvelope(t, child) // the root's, every 2 s, whole on every stream: a run past 2 s (under -race) reads one
	}
	a := f.GetAnnounce()
	if a == nil {
		t.Fatal("a lazy stream was sent a frame other than an announcement")
	}
	if k := bps.FrameKey(m); !bytes.Equal(a.Key, k[:]) {
		t.Fatalf("announcement %d names %x, want the frame key %x", index, a.Key, k)
	}
	return m
}

// expectAskViolation: the ask just sent on child (cl[0]'s) is a violation:
// the stream reset, its peer blocklisted, wrong_stream counted once more
// than before.
func expectAskViolation(t *testing.T, broker *tnode, cl []*tnode, child *raw, sp *bps.Spec, before uint64) {
	t.Helper()
	expectReset(t, child)
	waitBlocklisted(t, broker, cl[0])
	if got := cohortInfo(t, broker, sp).Counters[bps.CounterWrongStream.String()]; got != before+1 {
		t.Fatalf("wrong_stream %d, want %d", got, before+1)
	}
}

// TestHostileLazyAskFlood: a lazy child may ask for each announcement
// once, and is served each whole; asking for one again is a violation:
// reset, blocklisted, counted. The ask again is within the total an ask
// may reach (one per announcement: TestHostileLazyAskCount), so only the
// rule that each announcement is asked once refuses it.
func TestHostileLazyAskFlood(t *testing.T) {
	t.Parallel()
	broker, cl, child, pub, sp, admin := lazyChild(t, "lazy-ask-flood")
	const n = 4
	var sent []*pb.Broadcast
	for i := range uint64(n) {
		sent = append(sent, announced(t, child, pub, sp, admin, i))
	}
	child.send(&pb.Frame{Kind: &pb.Frame_Ask{Ask: &pb.Ask{Seqs: []uint64{0, 1, 2}}}})
	for i := range n - 1 {
		m := readEnvelope(t, child).GetBroadcast()
		if m == nil || !proto.Equal(m, sent[i]) {
			t.Fatalf("ask %d served %v, want the update", i, m)
		}
	}
	before := cohortInfo(t, broker, sp).Counters[bps.CounterWrongStream.String()]
	child.send(&pb.Frame{Kind: &pb.Frame_Ask{Ask: &pb.Ask{Seqs: []uint64{1}}}})
	expectAskViolation(t, broker, cl, child, sp, before)
}

// TestHostileLazyAskNeverMade: an ask for an announcement never made is a
// violation, even one within the total an ask may reach (two made, one
// asked): not a late ask for one that fell out of the parent's ring.
func TestHostileLazyAskNeverMade(t *testing.T) {
	t.Parallel()
	broker, cl, child, pub, sp, admin := lazyChild(t, "lazy-ask-never-made")
	for i := range uint64(2) {
		announced(t, child, pub, sp, admin, i)
	}
	before := cohortInfo(t, broker, sp).Counters[bps.CounterWrongStream.String()]
	child.send(&pb.Frame{Kind: &pb.Frame_Ask{Ask: &pb.Ask{Seqs: []uint64{5}}}})
	expectAskViolation(t, broker, cl, child, sp, before)
}

// TestHostileLazyAskCount: more asks than announcements are a violation,
// whatever they name. An announcement that fell out of the parent's ring
// (lazyRing, 128, behind) is not served and its ask not held against the
// child (a late ask), so only this count bounds a child asking for it again
// and again: here 131 asks for announcement 0 after 130 were made.
func TestHostileLazyAskCount(t *testing.T) {
	t.Parallel()
	broker, cl, child, pub, sp, admin := lazyChild(t, "lazy-ask-count")
	const made = 129 // one past the ring
	for i := range uint64(made) {
		announced(t, child, pub, sp, admin, i)
	}
	before := cohortInfo(t, broker, sp).Counters[bps.CounterWrongStream.String()]
	for _, n := range []int{64, 64, made - 128} { // made asks: not one too many
		child.send(&pb.Frame{Kind: &pb.Frame_Ask{Ask: &pb.Ask{Seqs: make([]uint64, n)}}})
	}
	// Nothing is served for them, and the stream stays: the next update's
	// announcement comes (130 made), and two asks more — 131 — are the
	// violation.
	announced(t, child, pub, sp, admin, made)
	if got := cohortInfo(t, broker, sp).Counters[bps.CounterWrongStream.String()]; got != before {
		t.Fatalf("wrong_stream %d after asks within the count, want %d", got, before)
	}
	child.send(&pb.Frame{Kind: &pb.Frame_Ask{Ask: &pb.Ask{Seqs: []uint64{0, 0}}}})
	expectAskViolation(t, broker, cl, child, sp, before)
}
