// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bpsnet

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
)

// FollowOptions configure a Follower. The callbacks run on the follower's
// goroutine, one at a time; they must not block for long, or the
// subscription's queue at the broker fills and the broker resets it, as it
// would for any slow subscriber.
type FollowOptions struct {
	// Buffer is the capacity of C; 0 keeps no deliveries (use OnDeliver).
	// A full C blocks the follower, which is back-pressure on the stream.
	Buffer int
	// OnJoin is called after every successful Subscribe, before the
	// join is counted (WaitJoins).
	OnJoin func(sub *bps.Subscription)
	// OnDeliver is called with every delivery, before it is put on C.
	OnDeliver func(bps.Delivery)
	// OnEnd is called when a subscription ends, with why (nil: cleanly).
	OnEnd func(err error)
	// OnError is called when a Subscribe fails: FULL, not connected, ...
	OnError func(err error)
}

// Follower keeps a node subscribed to a cohort at a broker: whenever its
// subscription ends it subscribes again, and bps makes every such Join wait
// out SWIP-74's backoff for (broker, cohort). It stops on Close, when its
// node's Service closes, or when the broker answers REJECTED (rejoining an
// unchanged spec is pointless).
type Follower struct {
	nd     *Node
	broker swarm.Address
	spec   *bps.Spec
	o      FollowOptions
	c      chan bps.Delivery

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	received atomic.Uint64

	mu       sync.Mutex // guards the fields below
	sub      *bps.Subscription
	joins    int
	failures int
	err      error
	changed  chan struct{} // closed and replaced on every join, end and failure
}

// Follow starts a Follower of sp at broker on nd. The broker is known by
// overlay, so the follower rejoins a broker that was restarted.
func (nd *Node) Follow(broker swarm.Address, sp *bps.Spec, o FollowOptions) (*Follower, error) {
	n := nd.net
	ctx, cancel := context.WithCancel(context.Background())
	f := &Follower{
		nd:      nd,
		broker:  broker.Clone(),
		spec:    sp,
		o:       o,
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
	}
	if o.Buffer > 0 {
		f.c = make(chan bps.Delivery, o.Buffer)
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		cancel()
		return nil, ErrClosed
	}
	n.followers[f] = struct{}{}
	go f.run()
	return f, nil
}

func (f *Follower) run() {
	defer close(f.done)
	if f.c != nil {
		defer close(f.c)
	}
	svc := f.nd.svc
	for {
		sub, err := svc.Subscribe(f.ctx, f.broker, f.spec)
		if err != nil {
			if f.ctx.Err() != nil || errors.Is(err, bps.ErrClosed) {
				return
			}
			f.update(func() { f.failures++; f.err = err })
			if f.o.OnError != nil {
				f.o.OnError(err)
			}
			if errors.Is(err, bps.ErrRejected) {
				return
			}
			// Every failed Join imposes a backoff, so the next Subscribe
			// waits. Should one ever not, do not spin.
			if !svc.BackoffUntil(f.broker, f.spec).After(time.Now()) && !f.sleep(f.backoffMin()) {
				return
			}
			continue
		}

		// OnJoin runs before the join is counted: whoever WaitJoins
		// returned to sees what OnJoin recorded.
		if f.o.OnJoin != nil {
			f.o.OnJoin(sub)
		}
		stopped := false
		f.update(func() {
			f.sub = sub
			f.joins++
			stopped = f.ctx.Err() != nil
		})
		if stopped {
			_ = sub.Close()
			return
		}
		if !f.consume(sub) {
			_ = sub.Close()
		}
		<-sub.Done()
		err = sub.Err()
		f.update(func() { f.sub = nil; f.err = err })
		if f.o.OnEnd != nil {
			f.o.OnEnd(err)
		}
		if f.ctx.Err() != nil {
			return
		}
	}
}

// consume hands out the subscription's deliveries until it ends; it returns
// false if the follower was stopped first.
func (f *Follower) consume(sub *bps.Subscription) bool {
	for d := range sub.C() {
		f.received.Add(1)
		if f.o.OnDeliver != nil {
			f.o.OnDeliver(d)
		}
		if f.c == nil {
			continue
		}
		select {
		case f.c <- d:
		case <-f.ctx.Done():
			return false
		}
	}
	return true
}

func (f *Follower) backoffMin() time.Duration {
	if d := f.nd.opts.BackoffMin; d > 0 {
		return d
	}
	return bps.DefaultBackoffMin
}

// sleep waits d, or returns false if the follower is stopped first.
func (f *Follower) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-f.ctx.Done():
		return false
	}
}

func (f *Follower) update(change func()) {
	f.mu.Lock()
	change()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// C delivers what the follower received, over all its subscriptions, if it
// was started with a Buffer; it is closed when the follower stops.
func (f *Follower) C() <-chan bps.Delivery { return f.c }

// Node is the node the follower runs on.
func (f *Follower) Node() *Node { return f.nd }

// Joins is how many times the follower has subscribed.
func (f *Follower) Joins() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.joins
}

// Failures is how many of its Subscribes failed.
func (f *Follower) Failures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failures
}

// Err is why its last subscription ended or its last Subscribe failed.
func (f *Follower) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Subscribed reports whether the follower holds a subscription now.
func (f *Follower) Subscribed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sub != nil
}

// Received is how many deliveries it received over all its subscriptions.
func (f *Follower) Received() uint64 { return f.received.Load() }

// Done is closed when the follower has stopped.
func (f *Follower) Done() <-chan struct{} { return f.done }

// WaitJoins blocks until the follower has subscribed at least k times, or
// ctx ends, or the follower stops.
func (f *Follower) WaitJoins(ctx context.Context, k int) error {
	return f.wait(ctx, func() bool { return f.joins >= k })
}

// WaitAttempts blocks until the follower's Subscribes have succeeded or
// failed at least k times in all, or ctx ends, or the follower stops.
func (f *Follower) WaitAttempts(ctx context.Context, k int) error {
	return f.wait(ctx, func() bool { return f.joins+f.failures >= k })
}

// wait blocks until done, evaluated under f.mu, holds.
func (f *Follower) wait(ctx context.Context, done func() bool) error {
	for {
		f.mu.Lock()
		ok, changed := done(), f.changed
		f.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-changed:
		case <-f.done:
			return errors.New("bpsnet: follower stopped")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the follower, ending its subscription cleanly, and waits for
// it. It may be called more than once.
func (f *Follower) Close() {
	f.cancel()
	f.mu.Lock()
	sub := f.sub
	f.mu.Unlock()
	if sub != nil {
		_ = sub.Close()
	}
	<-f.done

	n := f.nd.net
	n.mu.Lock()
	delete(n.followers, f)
	n.mu.Unlock()
}
