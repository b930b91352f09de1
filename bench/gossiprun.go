// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	pubsub "github.com/libp2p/go-libp2p-pubsub"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

const gossipTopic = "bench-compare"

// meshTracer counts, for one host, its mesh peers on the topic and the
// messages it received (first copies and duplicates alike). gossipsub calls
// it from its event loop: it only adds to counters.
type meshTracer struct {
	mesh atomic.Int64
	*counters
}

// counters are shared by every host of a run.
type counters struct {
	received  atomic.Uint64 // messages on the topic, in RPCs
	dropped   atomic.Uint64 // RPCs dropped for a full peer queue
	rejected  atomic.Uint64 // messages rejected (self-origin included)
	throttled atomic.Uint64 // peers throttled by validation
}

func (t *meshTracer) Graft(peer.ID, string) { t.mesh.Add(1) }
func (t *meshTracer) Prune(peer.ID, string) { t.mesh.Add(-1) }
func (t *meshTracer) RecvRPC(rpc *pubsub.RPC) {
	for _, m := range rpc.GetPublish() {
		if m.GetTopic() == gossipTopic {
			t.received.Add(1)
		}
	}
}

func (t *meshTracer) AddPeer(peer.ID, protocol.ID)                         {}
func (t *meshTracer) RemovePeer(peer.ID)                                   {}
func (t *meshTracer) OnNewOutboundStream(peer.ID, protocol.ID)             {}
func (t *meshTracer) OnClosedOutboundStream(peer.ID)                       {}
func (t *meshTracer) Join(string)                                          {}
func (t *meshTracer) Leave(string)                                         {}
func (t *meshTracer) ValidateMessage(*pubsub.Message)                      {}
func (t *meshTracer) DeliverMessage(*pubsub.Message)                       {}
func (t *meshTracer) RejectMessage(*pubsub.Message, string)                {}
func (t *meshTracer) DuplicateMessage(*pubsub.Message)                     {}
func (t *meshTracer) ThrottlePeer(peer.ID)                                 {}
func (t *meshTracer) SendRPC(*pubsub.RPC, peer.ID)                         {}
func (t *meshTracer) SendRPCCompleted(*pubsub.RPC, peer.ID, time.Duration) {}
func (t *meshTracer) DropRPC(*pubsub.RPC, peer.ID)                         {}
func (t *meshTracer) UndeliverableMessage(*pubsub.Message)                 {}

var _ pubsub.RawTracer = (*meshTracer)(nil)

// runGossipsub runs gossipsub with its default parameters on n+1 hosts —
// the publisher and n subscribers, all subscribed to one topic — each
// dialing cfg.dials random others, on the same transport as runBPS.
func runGossipsub(ctx context.Context, cfg config, n int) (res result, err error) {
	res = result{name: "gossipsub", n: n, messages: cfg.messages, expected: n * cfg.messages}
	mn := newMocknet(cfg.latency)
	m := new(meter)
	psCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
		if cerr := mn.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("close mocknet: %w", cerr)
		}
	}()

	hosts, err := addHosts(mn, n+1)
	if err != nil {
		return res, err
	}
	cnt := new(counters)
	tracers := make([]*meshTracer, len(hosts))
	topics := make([]*pubsub.Topic, len(hosts))
	subs := make([]*pubsub.Subscription, len(hosts))
	for i, h := range hosts {
		tracers[i] = &meshTracer{counters: cnt}
		ps, err := pubsub.NewGossipSub(psCtx, &countingHost{Host: h, meter: m}, pubsub.WithRawTracer(tracers[i]))
		if err != nil {
			return res, fmt.Errorf("gossipsub %d: %w", i, err)
		}
		if topics[i], err = ps.Join(gossipTopic); err != nil {
			return res, err
		}
		if subs[i], err = topics[i].Subscribe(); err != nil {
			return res, err
		}
	}
	defer func() {
		for _, s := range subs {
			s.Cancel()
		}
	}()

	// A random graph: every host dials cfg.dials distinct others.
	rng := rand.New(rand.NewPCG(uint64(cfg.seed), uint64(n)))
	linked := make(map[[2]int]bool)
	for i := range hosts {
		for made, tries := 0, 0; made < min(cfg.dials, len(hosts)-1) && tries < 100*cfg.dials; tries++ {
			j := rng.IntN(len(hosts))
			if j == i || linked[[2]int{min(i, j), max(i, j)}] {
				continue
			}
			linked[[2]int{min(i, j), max(i, j)}] = true
			if err := connect(mn, hosts[i], hosts[j]); err != nil {
				return res, err
			}
			made++
		}
	}

	// Let the mesh form: every host grafted at least D_lo peers (or as many
	// as it has), within a bound.
	dlo := pubsub.DefaultGossipSubParams().Dlo
	deadline := time.Now().Add(cfg.meshWait)
	for {
		short := 0
		for i, t := range tracers {
			if t.mesh.Load() < int64(min(dlo, len(hosts[i].Network().Peers()))) {
				short++
			}
		}
		if short == 0 {
			break
		}
		if time.Now().After(deadline) {
			res.notes = append(res.notes, fmt.Sprintf("%d hosts below D_lo after %s", short, cfg.meshWait))
			break
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}

	t := newTally(cfg, n)
	for i, sub := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := t.receiver()
			defer r.flush()
			for {
				msg, err := sub.Next(psCtx)
				if err != nil {
					return
				}
				if i == 0 || len(msg.Data) < 8 { // the publisher's own copy
					continue
				}
				r.deliver(binary.BigEndian.Uint64(msg.Data[:8]))
			}
		}()
	}

	var (
		before, after meterSnapshot
		recv0, recv1  uint64
		cpu0, cpu1    time.Duration
		t0            time.Time
		wall          time.Duration
	)
	err = t.publish(ctx, cfg, func(i int) error {
		return topics[0].Publish(ctx, newPayload(cfg.size, i))
	}, func() {
		before, recv0, cpu0, t0 = m.snapshot(), cnt.received.Load(), cpuTime(), time.Now()
	}, func() {
		cpu1, wall, after, recv1 = cpuTime(), time.Since(t0), m.snapshot(), cnt.received.Load()
	})
	if err != nil {
		return res, err
	}
	res.delivered = t.delivered()
	res.cpu, res.wall = cpu1-cpu0, wall
	res.bytes, res.writes = after.bytes-before.bytes, after.writes-before.writes
	if got := recv1 - recv0; got > uint64(res.delivered) {
		res.duplicates = got - uint64(res.delivered)
	}
	stop()
	wg.Wait()
	res.p50, res.p99 = t.lat.quantile(0.50), t.lat.quantile(0.99)
	res.notes = append(res.notes, t.notes...)
	res.idleLoad = t.idleLoad
	if d := cnt.dropped.Load(); d > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%d RPCs dropped for full peer queues", d))
	}
	if d := cnt.throttled.Load(); d > 0 {
		res.notes = append(res.notes, fmt.Sprintf("%d validation throttles", d))
	}
	return res, nil
}
