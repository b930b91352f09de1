// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"context"
	"encoding/hex"
	"errors"
	"sync"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
)

// Defaults of the recovery bounds (MuxOptions).
const (
	// DefaultRecoverMax is the most updates one gap recovers: the latest
	// ones before the update that revealed it; older ones are a gap.
	DefaultRecoverMax = 64
	// DefaultRecoverTimeout bounds one recovery: what is not retrieved by
	// then is a gap.
	DefaultRecoverTimeout = 10 * time.Second
	// recoverParallel is how many retrievals one recovery runs at once.
	recoverParallel = 8
	// followerHold bounds the live deliveries a session's follower holds
	// while it recovers; one more ends the session as a slow consumer.
	followerHold = 256
)

// ErrRecoveryBacklog ends a session whose follower held more live
// deliveries than it may while recovering.
var ErrRecoveryBacklog = errors.New("bps: too many live updates arrived while recovering missed ones")

// GapSession is a Session told what gap recovery did (SWIP-65): before the
// updates it recovered from storage, and for those it could not. A Session
// without these methods gets the recovered updates all the same, and no
// word of a gap. Its methods are called off the room's lock, by the
// recovery, and may wait for room in the session's queue until ctx ends: a
// recovery hands a burst of up to RecoverMax updates.
type GapSession interface {
	Session
	// DeliverWait is Deliver, waiting for room.
	DeliverWait(ctx context.Context, v *View) bool
	// Recovered says that updates from … to (inclusive) of owner's feed,
	// retrieved from storage and verified, follow in index order; false: the
	// session ended.
	Recovered(ctx context.Context, owner []byte, from, to uint64) bool
	// Gap says that updates from … to of owner's feed were missed and not
	// recovered (not in storage, or not in time, or beyond the bound).
	Gap(ctx context.Context, owner []byte, from, to uint64) bool
}

// follower is one session's view of the publisher feeds of a FEED_TOPIC
// cohort, on a node with storage (SWIP-65's follower): the next index it
// expects of each feed. An update past it reveals a gap: the follower
// retrieves the missed updates from storage (bee's retrieval, as feed
// updates), verifies each as a live delivery is verified, and hands them
// to the session in index order before the update that revealed the gap;
// what it cannot recover is a Gap, never a silent skip. While it recovers,
// the room's live deliveries to the session are held, in order, and
// follow.
//
// Deliver is called under the room's lock and never blocks; the recovery
// runs on a goroutine the mux owns, one at a time per session.
type follower struct {
	x    *mux
	spec *bps.Spec
	s    Session
	st   *shared         // the room's storage: retrievals shared and budgeted
	ctx  context.Context // ended when the session leaves the room
	stop context.CancelFunc

	pot PotSession // the session recovers by pot descent (SWIP-65's pot profile)

	mu   sync.Mutex
	from *uint64                 // a feed first seen past it is recovered from it
	next map[string]uint64       // per owner: the lowest index not yet handed or reported
	last map[string]bps.Delivery // pot profile, per owner: the latest update handed or planned, the anchor
	busy bool                    // a recovery runs; live deliveries are held
	held []bps.Delivery
	dead bool
}

func newFollower(x *mux, sp *bps.Spec, s Session, from *uint64, st *shared) *follower {
	f := &follower{x: x, spec: sp, s: s, st: st, next: make(map[string]uint64)}
	if ps, ok := s.(PotSession); ok && ps.PotProfile() {
		f.pot, f.last = ps, make(map[string]bps.Delivery)
	}
	if from != nil {
		v := *from
		f.from = &v
	}
	f.ctx, f.stop = context.WithCancel(x.ctx)
	return f
}

// step is what a follower does with a delivery.
type step int

const (
	stepDeliver step = iota
	stepDrop         // already handed, recovered or reported
	stepRecover      // a gap before it
)

// plan decides what to do with d and moves the feed's next index; the
// caller holds f.mu. For stepRecover, from … to is the gap. anchor is the
// update of d's feed planned before d (pot profile only; nil if none).
func (f *follower) plan(d bps.Delivery) (st step, from, to uint64, anchor *bps.Delivery) {
	st, from, to = f.step(d)
	if f.last != nil && st != stepDrop {
		if a, ok := f.last[string(d.Owner)]; ok {
			anchor = &a
		}
		f.last[string(d.Owner)] = d
	}
	return st, from, to, anchor
}

// step is plan's decision.
func (f *follower) step(d bps.Delivery) (st step, from, to uint64) {
	o := string(d.Owner)
	n, known := f.next[o]
	if !known {
		if f.from == nil {
			f.next[o] = d.Index + 1
			return stepDeliver, 0, 0
		}
		n = *f.from // below it: what the session says it has
	}
	switch {
	case d.Index < n:
		return stepDrop, 0, 0
	case d.Index == n:
		f.next[o] = n + 1
		return stepDeliver, 0, 0
	}
	f.next[o] = d.Index + 1
	return stepRecover, n, d.Index - 1
}

// Deliver takes one live delivery of the room (under the room's lock).
func (f *follower) Deliver(v *View) bool {
	d := v.Delivery()
	if d.Service != nil {
		return f.s.Deliver(v)
	}
	f.mu.Lock()
	if f.dead {
		f.mu.Unlock()
		return false
	}
	if f.busy {
		if len(f.held) >= followerHold {
			f.dead = true
			f.mu.Unlock()
			f.stop()
			f.s.End(ErrRecoveryBacklog)
			return false
		}
		f.held = append(f.held, d)
		f.mu.Unlock()
		return true
	}
	st, from, to, anchor := f.plan(d)
	switch st {
	case stepDrop:
		f.mu.Unlock()
		return true
	case stepDeliver:
		e := f.extends(d, anchor)
		if e == nil {
			f.mu.Unlock()
			return f.s.Deliver(v)
		}
		from, to = 1, 0 // no gap: the equivocation is told first
		anchor = nil
		f.busy = true
		f.mu.Unlock()
		if !f.x.goOwned(func() { f.run(d, nil, from, to, e) }) {
			return false // the mux closed
		}
		return true
	}
	f.busy = true
	f.mu.Unlock()
	if !f.x.goOwned(func() { f.run(d, anchor, from, to, nil) }) {
		return false // the mux closed
	}
	return true
}

// run hands live after what comes before it — the equivocation e it
// revealed, or the gap from … to it revealed — then what was held
// meanwhile, in order, doing the same at each, until nothing is held.
func (f *follower) run(live bps.Delivery, anchor *bps.Delivery, from, to uint64, e *EquivocationError) {
	for {
		if !f.before(live, anchor, from, to, e) || !f.hand(live) {
			f.die()
			return
		}
		for {
			f.mu.Lock()
			if len(f.held) == 0 {
				f.busy = false
				f.mu.Unlock()
				return
			}
			live = f.held[0]
			f.held = f.held[1:]
			var st step
			st, from, to, anchor = f.plan(live)
			e = nil
			if st == stepDeliver {
				e = f.extends(live, anchor)
			}
			f.mu.Unlock()
			if st == stepRecover || e != nil {
				break
			}
			if st == stepDeliver && !f.hand(live) {
				f.die()
				return
			}
		}
	}
}

func (f *follower) die() {
	f.mu.Lock()
	f.dead, f.busy, f.held = true, false, nil
	f.mu.Unlock()
	f.stop()
}

// hand gives d to the session as a delivery of its own, off the room's
// lock: waiting for room if the session can.
func (f *follower) hand(d bps.Delivery) bool {
	v := &View{spec: f.spec, d: d, memo: make(map[string][]byte, 1)}
	if gs, ok := f.s.(GapSession); ok {
		return gs.DeliverWait(f.ctx, v)
	}
	return f.s.Deliver(v)
}

// before is what comes before live: the equivocation e, told to the
// session, or the gap from … to (if from ≤ to), recovered.
func (f *follower) before(live bps.Delivery, anchor *bps.Delivery, from, to uint64, e *EquivocationError) bool {
	switch {
	case e != nil:
		f.x.metrics.Equivocations.Inc()
		return f.pot.Equivocation(f.ctx, e)
	case from > to:
		return true
	}
	return f.recoverGap(live, anchor, from, to)
}

// recoverGap recovers updates from … to, missed before live, within
// RecoverTimeout: by pot descent from live's payload if the session says
// the pot profile, else by feed lookup. It reports false if the session
// ended.
func (f *follower) recoverGap(live bps.Delivery, anchor *bps.Delivery, from, to uint64) bool {
	ctx, cancel := context.WithTimeout(f.ctx, f.x.opts.RecoverTimeout)
	defer cancel()
	if f.pot != nil {
		return f.potRecover(ctx, f.pot, live, anchor, from, to)
	}
	return f.recover(ctx, live.Owner, from, to)
}

// recover retrieves updates from … to of owner's feed by feed lookup — the
// latest RecoverMax of them, until ctx ends, recoverParallel at a time —
// and hands them to the session in index order, each run of recovered
// updates announced, each run of missing ones a gap. It reports false if
// the session ended.
func (f *follower) recover(ctx context.Context, owner []byte, from, to uint64) bool {
	o := f.x.opts
	gs, _ := f.s.(GapSession)
	if to-from >= uint64(o.RecoverMax) {
		lost := to - uint64(o.RecoverMax)
		f.x.metrics.RecoveryGaps.Add(float64(lost - from + 1))
		f.logGap(owner, from, lost, reasonPastBound, nil)
		if gs != nil && !gs.Gap(f.ctx, owner, from, lost) {
			return false
		}
		from = lost + 1
	}
	got := make([]*bps.Delivery, to-from+1)
	errs := make([]error, len(got)) // nil where got is: not retrieved before ctx ended
	var wg sync.WaitGroup
	sem := make(chan struct{}, recoverParallel)
	for i := range got {
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
			d, err := f.fetch(ctx, owner, from+uint64(i))
			if err == nil {
				got[i] = &d
			}
			errs[i] = err
		}()
	}
	wg.Wait()

	for i := 0; i < len(got); {
		j := i
		for j < len(got) && (got[j] != nil) == (got[i] != nil) {
			j++
		}
		a, b := from+uint64(i), from+uint64(j-1)
		if got[i] == nil {
			f.x.metrics.RecoveryGaps.Add(float64(j - i))
			reason, err := gapReason(errs[i:j])
			f.logGap(owner, a, b, reason, err)
			if gs != nil && !gs.Gap(f.ctx, owner, a, b) {
				return false
			}
		} else {
			if gs != nil && !gs.Recovered(f.ctx, owner, a, b) {
				return false
			}
			for _, d := range got[i:j] {
				d.Recovered = true
				if !f.hand(*d) {
					return false
				}
				f.x.metrics.Recovered.Inc()
			}
		}
		i = j
	}
	return true
}

// A retrieval that failed for a reason that may pass — the node's
// retrieval failed or timed out (a 5xx answer), or the attempt ran past
// recoverAttempt of the recovery's time — is tried again after a backoff,
// doubling from recoverRetryMin up to recoverRetryMax, until the
// recovery's time (RecoverTimeout) runs out: a node just restarted reaches
// the holders of what it missed only once it is connected (issue 26). A
// chunk not stored (the node's storage said so), one that is not the
// update, and the budget spent are final: a gap at once.
const (
	recoverRetryMin = 250 * time.Millisecond
	recoverRetryMax = 2 * time.Second
	// recoverAttempts is how many attempts the recovery's time is cut
	// into at least: an attempt that hangs is given up and tried again.
	recoverAttempts = 3
)

// fetch retrieves update index of owner's feed, trying again after a
// failure that may pass, until ctx ends.
func (f *follower) fetch(ctx context.Context, owner []byte, index uint64) (bps.Delivery, error) {
	wait := recoverRetryMin
	for {
		actx, cancel := context.WithTimeout(ctx, f.x.opts.RecoverTimeout/recoverAttempts)
		d, err := bps.FetchUpdate(actx, f.st, f.spec, owner, index)
		cancel()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return d, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return d, err
		}
		wait = min(2*wait, recoverRetryMax)
	}
}

// retryable reports whether a retrieval that failed with err may succeed
// later: an attempt that timed out, or the node's storage failing (5xx).
func retryable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var se interface{ StatusCode() int }
	return errors.As(err, &se) && se.StatusCode() >= 500
}

// Why a gap was not recovered, as the recovery logs it. A gap is an
// expected event — a publisher that published live only, an update not yet
// pushed, a retrieval that found no holder — told to the session as a gap
// frame: it is logged at debug level, with the reason, once per gap.
const (
	reasonPastBound = "older than the latest updates a recovery retrieves (RecoverMax)"
	reasonNotHeld   = "storage did not deliver them: never persisted, not yet pushed, no peer holds them, or not a valid update (the error says)"
	reasonTimeout   = "the recovery's time ran out (RecoverTimeout)"
	reasonBudget    = "the cohort's recoveries at this node are over their retrieval budget (RecoverBudget)"
)

// gapReason is why a run of updates was not recovered, from their
// retrievals' errors (nil: not retrieved before the recovery ended), and
// the first error.
func gapReason(errs []error) (string, error) {
	var first error
	for _, err := range errs {
		if err != nil {
			first = err
			break
		}
	}
	switch {
	case first == nil, errors.Is(first, context.DeadlineExceeded), errors.Is(first, context.Canceled):
		return reasonTimeout, first
	case errors.Is(first, ErrRecoveryBudget):
		return reasonBudget, first
	}
	return reasonNotHeld, first
}

// logGap logs a gap of owner's feed, from … to, not recovered.
func (f *follower) logGap(owner []byte, from, to uint64, reason string, err error) {
	kv := []any{"cohort", f.spec.String(), "owner", hex.EncodeToString(owner), "from", from, "to", to, "reason", reason}
	if err != nil {
		kv = append(kv, "error", err)
	}
	f.x.logger.Debug("pubsub: feed gap not recovered", kv...)
}
