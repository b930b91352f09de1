// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// meter counts what every node of a run writes on the measured protocol's
// streams (BPS's, or gossipsub's): bytes and write calls. A byte is counted
// once, by the node that sends it.
type meter struct {
	bytes   atomic.Uint64
	writes  atomic.Uint64
	blocked atomic.Uint64 // BPS: handlers that returned a BlockPeerError
}

func (m *meter) wrote(n int) {
	if n > 0 {
		m.bytes.Add(uint64(n))
		m.writes.Add(1)
	}
}

type meterSnapshot struct{ bytes, writes uint64 }

func (m *meter) snapshot() meterSnapshot {
	return meterSnapshot{bytes: m.bytes.Load(), writes: m.writes.Load()}
}

// countingHost hands gossipsub streams that count their writes: the host's
// stream handlers and the streams it opens are wrapped; everything else is
// the mocknet host.
type countingHost struct {
	host.Host
	meter *meter
}

func (h *countingHost) NewStream(ctx context.Context, p peer.ID, pids ...protocol.ID) (network.Stream, error) {
	s, err := h.Host.NewStream(ctx, p, pids...)
	if err != nil {
		return nil, err
	}
	return &countingStream{Stream: s, meter: h.meter}, nil
}

func (h *countingHost) SetStreamHandler(pid protocol.ID, handler network.StreamHandler) {
	h.Host.SetStreamHandler(pid, h.wrap(handler))
}

func (h *countingHost) SetStreamHandlerMatch(pid protocol.ID, match func(protocol.ID) bool, handler network.StreamHandler) {
	h.Host.SetStreamHandlerMatch(pid, match, h.wrap(handler))
}

func (h *countingHost) wrap(handler network.StreamHandler) network.StreamHandler {
	return func(s network.Stream) { handler(&countingStream{Stream: s, meter: h.meter}) }
}

type countingStream struct {
	network.Stream
	meter *meter
}

func (s *countingStream) Write(p []byte) (int, error) {
	n, err := s.Stream.Write(p)
	s.meter.wrote(n)
	return n, err
}

// cpuTime is the CPU time (user + system, all threads) the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// latencies collects delivery latencies from many receivers.
type latencies struct {
	mu sync.Mutex // guards d
	d  []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// quantile returns the q-quantile (nearest rank) of the collected latencies.
func (l *latencies) quantile(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	i := int(q*float64(len(l.d))+0.5) - 1
	return l.d[min(max(i, 0), len(l.d)-1)]
}

// sendTimes records when the publisher started publishing each message.
type sendTimes struct {
	mu sync.Mutex // guards t
	t  []time.Time
}

func newSendTimes(n int) *sendTimes { return &sendTimes{t: make([]time.Time, n)} }

func (s *sendTimes) set(i int, t time.Time) {
	s.mu.Lock()
	s.t[i] = t
	s.mu.Unlock()
}

// since is how long ago message i was published; false for an unknown or
// unpublished index.
func (s *sendTimes) since(i uint64, now time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= uint64(len(s.t)) || s.t[i].IsZero() {
		return 0, false
	}
	return now.Sub(s.t[i]), true
}

// countdown closes done once n deliveries were counted.
type countdown struct {
	left atomic.Int64
	once sync.Once
	done chan struct{}
}

func newCountdown(n int) *countdown {
	c := &countdown{done: make(chan struct{})}
	c.left.Store(int64(n))
	if n <= 0 {
		close(c.done)
	}
	return c
}

func (c *countdown) dec() {
	if c.left.Add(-1) == 0 {
		c.once.Do(func() { close(c.done) })
	}
}

// tally accounts one run's deliveries. Messages 0..warmup-1 are a warm-up,
// published and delivered before the measurement starts; the measured
// messages follow.
type tally struct {
	warmup, messages int
	sent             *sendTimes
	lat              latencies
	warm, measured   *countdown
	count            atomic.Int64 // measured first deliveries
	idleLoad         float64      // cores used with no traffic, before the measurement
	notes            []string
}

func newTally(cfg config, n int) *tally {
	return &tally{
		warmup:   cfg.warmup,
		messages: cfg.messages,
		sent:     newSendTimes(cfg.warmup + cfg.messages),
		warm:     newCountdown(n * cfg.warmup),
		measured: newCountdown(n * cfg.messages),
	}
}

func (t *tally) delivered() int { return int(t.count.Load()) }

// receiver is one subscriber's side of a tally; one goroutine uses it.
type receiver struct {
	t   *tally
	own []time.Duration
}

func (t *tally) receiver() *receiver {
	return &receiver{t: t, own: make([]time.Duration, 0, t.messages)}
}

// deliver counts the first delivery of message index at this subscriber.
func (r *receiver) deliver(index uint64) {
	if index < uint64(r.t.warmup) {
		r.t.warm.dec()
		return
	}
	if l, ok := r.t.sent.since(index, time.Now()); ok {
		r.own = append(r.own, l)
	}
	r.t.count.Add(1)
	r.t.measured.dec()
}

// flush hands the subscriber's latencies to the tally.
func (r *receiver) flush() { r.t.lat.add(r.own) }

// publish sends the warm-up messages and waits (at most cfg.drain) for
// them, measures the CPU use of cfg.idle without traffic, calls begin, sends the measured messages at cfg.rate, waits until
// every subscriber has them or cfg.drain has passed since the last one,
// and calls end.
func (t *tally) publish(ctx context.Context, cfg config, send func(i int) error, begin, end func()) error {
	if err := t.steady(ctx, cfg, 0, t.warmup, t.warm.done, send); err != nil {
		return err
	}
	select {
	case <-t.warm.done:
	default:
		t.notes = append(t.notes, fmt.Sprintf("warm-up incomplete: %d deliveries missing", t.warm.left.Load()))
	}
	if cfg.idle > 0 {
		// No traffic: what the nodes cost by themselves (timers, heartbeats).
		// The set-up's garbage (a tree's joins: probes, retries) is collected
		// first, so that its collection is not counted as idle.
		runtime.GC()
		cpu0, t0 := cpuTime(), time.Now()
		select {
		case <-time.After(cfg.idle):
		case <-ctx.Done():
			return ctx.Err()
		}
		t.idleLoad = ratio(float64(cpuTime()-cpu0), float64(time.Since(t0)))
	}
	begin()
	err := t.steady(ctx, cfg, t.warmup, t.messages, t.measured.done, send)
	end()
	return err
}

// steady sends messages from..from+count-1 at cfg.rate, then waits until
// done is closed or cfg.drain has passed.
func (t *tally) steady(ctx context.Context, cfg config, from, count int, done <-chan struct{}, send func(i int) error) error {
	tick := time.NewTicker(time.Duration(float64(time.Second) / cfg.rate))
	defer tick.Stop()
	for i := from; i < from+count; i++ {
		if i > from {
			select {
			case <-tick.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		t.sent.set(i, time.Now())
		if err := send(i); err != nil {
			return fmt.Errorf("publish message %d: %w", i, err)
		}
	}
	drain := time.NewTimer(cfg.drain)
	defer drain.Stop()
	select {
	case <-done:
		return nil
	case <-drain.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
