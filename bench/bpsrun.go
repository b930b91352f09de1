// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/libp2p/go-libp2p/core/host"
)

// bpsNode is a libp2p host running a bps.Service through the adapter.
type bpsNode struct {
	st  *streamer
	svc *bps.Service
}

func newBPSNode(h host.Host, dir *directory, m *meter, o bps.Options) (*bpsNode, error) {
	st, err := newStreamer(h, dir, m)
	if err != nil {
		return nil, err
	}
	svc, err := bps.New(st, st.overlay, o)
	if err != nil {
		return nil, err
	}
	st.AddProtocol(svc.Protocol())
	return &bpsNode{st: st, svc: svc}, nil
}

func (nd *bpsNode) close() error {
	err := nd.svc.Close()
	nd.st.Close()
	return err
}

// runBPS runs BPS with one broker, one publisher node and n subscriber
// nodes. Singlehop (tree false): every subscriber is connected to the
// broker only, and the broker's fan-out bound is raised to n: one broker's
// fan-out, not a tree. Multihop (tree true, SWIP-61): the broker takes
// cfg.fanout children, every subscriber relays for up to cfg.relayCap
// children and keeps cfg.parents parents; a joiner that finds the broker
// full attaches where its probe sends it, connecting to the candidates on
// demand (the mocknet links them with the same latency).
func runBPS(ctx context.Context, cfg config, n int, tree bool) (res result, err error) {
	res = result{name: "BPS star", n: n, messages: cfg.messages, expected: n * cfg.messages}
	if tree {
		res.name = "BPS tree"
	}
	mn := newMocknet(cfg.latency)
	m := new(meter)
	dir := newDirectory()
	lk := &linker{mn: mn}

	var nodes []*bpsNode
	defer func() {
		// The broker last: subscribers and the publisher leave cleanly first.
		for i := len(nodes) - 1; i >= 0; i-- {
			if cerr := nodes[i].close(); cerr != nil && err == nil {
				err = fmt.Errorf("close: %w", cerr)
			}
		}
		if cerr := mn.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close mocknet: %w", cerr)
		}
	}()

	hosts, err := addHosts(mn, n+2)
	if err != nil {
		return res, err
	}
	var queueResets atomic.Uint64
	tracer := bps.TracerFunc(func(e bps.Event) {
		if e.Kind == bps.EventQueueReset {
			queueResets.Add(1)
		}
	})
	brokerOpts := bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: n}, Deps: bps.Deps{Tracer: tracer}}
	if tree {
		brokerOpts.MaxStreamsPerCohort = cfg.fanout
		brokerOpts.NoLazyPush = !cfg.lazy
	}
	broker, err := newBPSNode(hosts[0], dir, m, brokerOpts)
	if err != nil {
		return res, err
	}
	nodes = append(nodes, broker)
	for i, h := range hosts[1:] {
		o := bps.Options{Deps: bps.Deps{Tracer: tracer}}
		if tree && i > 0 { // the subscribers; the publisher does not relay
			o.RelayCapacity = cfg.relayCap
			o.NoLazyPush = !cfg.lazy
			o.SingleParent = cfg.parents == 1
			o.Underlays = func() [][]byte {
				if a := h.Addrs(); len(a) > 0 {
					return [][]byte{a[0].Bytes()}
				}
				return nil
			}
			dial := lk.dialer(h)
			o.Connect = func(ctx context.Context, p swarm.Address, _ [][]byte) error {
				id, ok := dir.peer(p)
				if !ok {
					return fmt.Errorf("unknown overlay %s", p)
				}
				return dial(ctx, id)
			}
		}
		nd, err := newBPSNode(h, dir, m, o)
		if err != nil {
			return res, err
		}
		if tree {
			nd.st.dial = lk.dialer(h)
		}
		nodes = append(nodes, nd)
		if err := connect(mn, h, hosts[0]); err != nil {
			return res, err
		}
	}
	pubNode, subNodes := nodes[1], nodes[2:]

	key, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		return res, err
	}
	signer := crypto.NewDefaultSigner(key)
	admin, err := signer.EthereumAddress()
	if err != nil {
		return res, err
	}
	topic, err := crypto.LegacyKeccak256([]byte("bench-compare"))
	if err != nil {
		return res, err
	}
	spec, err := bps.NewFeedSpec(topic, admin.Bytes())
	if err != nil {
		return res, err
	}

	// Subscribe everyone (a few at a time), then start one receiver per
	// subscription. In a tree a join that lost every candidate to a race
	// is retried.
	subs := make([]*bps.Subscription, len(subNodes))
	var retries atomic.Int64
	joinStart := time.Now()
	if err := parallel(ctx, len(subNodes), cfg.joinPar, func(ctx context.Context, i int) error {
		for attempt := 0; ; attempt++ {
			sub, err := subNodes[i].svc.Subscribe(ctx, broker.st.overlay, spec)
			if err == nil {
				subs[i] = sub
				return nil
			}
			if !tree || attempt >= maxJoinAttempts-1 || ctx.Err() != nil {
				return fmt.Errorf("subscribe %d: %w", i, err)
			}
			retries.Add(1)
			// A bare FULL (no candidate came from the probe in time)
			// imposes the client's backoff: wait it out, as an
			// application would.
			wait := max(time.Until(subNodes[i].svc.BackoffUntil(broker.st.overlay, spec)), 50*time.Millisecond)
			t := time.NewTimer(min(wait, 30*time.Second))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
	}); err != nil {
		return res, err
	}
	if tree {
		res.notes = append(res.notes, fmt.Sprintf("joined in %s", time.Since(joinStart).Round(100*time.Millisecond)))
		res.notes = append(res.notes, settle(ctx, cfg, subs, subNodes, broker.st.overlay)...)
		if r := retries.Load(); r > 0 {
			res.notes = append(res.notes, fmt.Sprintf("%d joins retried", r))
		}
	}
	var wg sync.WaitGroup // the receivers
	defer func() {
		// A receiver returns when its subscription's channel closes.
		for _, s := range subs {
			if s != nil {
				_ = s.Close()
			}
		}
		wg.Wait()
	}()

	t := newTally(cfg, n)
	for _, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := t.receiver()
			defer r.flush()
			for d := range sub.C() {
				r.deliver(d.Index)
			}
		}()
	}

	pub, err := pubNode.svc.Publish(ctx, broker.st.overlay, spec, bps.PublishOptions{
		Addr:   admin.Bytes(),
		Signer: signer,
	})
	if err != nil {
		return res, fmt.Errorf("publish: %w", err)
	}
	defer func() { _ = pub.Close() }()

	var (
		before, after meterSnapshot
		cpu0, cpu1    time.Duration
		t0            time.Time
		wall          time.Duration
		dropped0      uint64
	)
	err = t.publish(ctx, cfg, func(i int) error {
		return pub.PublishUpdate(ctx, uint64(i), newPayload(cfg.size, i))
	}, func() {
		for _, s := range subs {
			dropped0 += s.Dropped()
		}
		before, cpu0, t0 = m.snapshot(), cpuTime(), time.Now()
	}, func() {
		cpu1, wall, after = cpuTime(), time.Since(t0), m.snapshot()
	})
	if err != nil {
		return res, err
	}

	res.delivered = t.delivered()
	for _, s := range subs {
		res.duplicates += s.Dropped()
	}
	res.duplicates -= dropped0
	res.cpu, res.wall = cpu1-cpu0, wall
	res.bytes, res.writes = after.bytes-before.bytes, after.writes-before.writes
	for _, s := range subs {
		_ = s.Close()
	}
	wg.Wait()
	res.p50, res.p99 = t.lat.quantile(0.50), t.lat.quantile(0.99)
	res.notes = append(res.notes, t.notes...)
	res.idleLoad = t.idleLoad
	if r := queueResets.Load(); r > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%d queue resets", r))
	}
	if b := m.blocked.Load(); b > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%d peers blocked", b))
	}
	return res, nil
}

// newPayload is message i's payload: size bytes, its index first (big
// endian), then a pattern. Each message gets its own: gossipsub keeps the
// slice it publishes.
func newPayload(size, i int) []byte {
	p := make([]byte, max(size, 8))
	for j := range p {
		p[j] = byte(i + j)
	}
	binary.BigEndian.PutUint64(p, uint64(i))
	return p
}

// parallel runs f(0..n-1) with at most k at a time and returns the first
// error; the others are cancelled.
func parallel(parent context.Context, n, k int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	sem := make(chan struct{}, k)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return parent.Err()
}

// maxJoinAttempts bounds the harness's own retries of a tree join (each
// Subscribe already re-asks the broker up to 3 rounds).
const maxJoinAttempts = 10

// settle waits, at most cfg.meshWait, until every subscription that is not
// the broker's own child has as many parents as it wants (the broker's
// children stay single-parented, SWIP-61), and describes the tree: the
// subscriptions' parent counts and the deepest node.
func settle(ctx context.Context, cfg config, subs []*bps.Subscription, nodes []*bpsNode, root swarm.Address) []string {
	want := max(cfg.parents, 1)
	short := func() (n int) {
		for _, s := range subs {
			ps := s.Parents()
			if len(ps) < want && !(len(ps) == 1 && ps[0].Equal(root)) {
				n++
			}
		}
		return n
	}
	start := time.Now()
	deadline := start.Add(cfg.meshWait)
	var notes []string
	for short() > 0 {
		if time.Now().After(deadline) {
			notes = append(notes, fmt.Sprintf("%d nodes short of %d parents after %s", short(), want, cfg.meshWait))
			break
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return notes
		}
	}
	var counts [3]int // subscriptions with 0, 1, 2+ parents
	rootChildren := 0
	for _, s := range subs {
		ps := s.Parents()
		counts[min(len(ps), 2)]++
		for _, p := range ps {
			if p.Equal(root) {
				rootChildren++
			}
		}
	}
	depth := 0
	for _, nd := range nodes {
		for _, pos := range nd.svc.Tree() {
			depth = max(depth, int(pos.Depth))
		}
	}
	return append(notes, fmt.Sprintf("second parents in %s", time.Since(start).Round(100*time.Millisecond)),
		fmt.Sprintf("tree: %d at the root, depth ≤ %d, parents 2/1/0: %d/%d/%d", rootChildren, depth, counts[2], counts[1], counts[0]))
}
