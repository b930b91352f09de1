// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"errors"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// What an operator sees of a subscription's parents (issue 26): each lost
// parent and each repair at info level, with its cause and how long the
// node went short, and the time spent without a parent or with one parent
// where two are wanted, as counters for the dashboard.

// parentState is a subscription's record of its parents over time; under
// the subscription's mu.
type parentState struct {
	since time.Time     // when the number of parents last changed (zero: never attached)
	n     int           // parents since then
	short bool          // since then the node had fewer parents than it wants
	cut   time.Time     // when it last lost a parent it has not replaced (zero: none)
	lost  time.Time     // when it last lost a parent (zero: never), for a replay (replay.go)
	first time.Time     // when it first had a parent (zero: never), for a replay (replay.go)
	cause error         // why it lost that parent
	peer  swarm.Address // the parent lost
}

// shortOfLocked reports whether sub has fewer parents than it wants: a
// node whose one parent is the broker wants no second (repairLocked).
func shortOfLocked(sub *Subscription) bool {
	n := len(sub.parents)
	if n == 1 && sub.parents[0].cs.peer.Equal(sub.root) {
		return false
	}
	return n < sub.want
}

// changedLocked is told each change of sub's parents: lost is the parent
// lost (nil: one was taken) and err why. It adds the time since the last
// change to the counters and logs a loss, and a repair once the node has
// the parents it wants again; the caller holds sub.mu.
func (st *parentState) changedLocked(sub *Subscription, lost *parent, err error) {
	s, now := sub.s, time.Now()
	was, from := st.n, st.since
	if !st.since.IsZero() {
		d := now.Sub(st.since).Seconds()
		switch {
		case was == 0:
			s.metrics.ParentlessSeconds.Add(d)
		case st.short:
			s.metrics.SingleParentSeconds.Add(d)
		}
	}
	st.since, st.n, st.short = now, len(sub.parents), shortOfLocked(sub)
	if st.first.IsZero() && st.n > 0 {
		st.first = now
	}
	if lost != nil {
		if sub.closing || sub.fatal != nil || lost.moved.Load() || errors.Is(err, ErrEndOfStream) {
			return // not a failure: closed, ended, or moved to a parent taken already
		}
		st.lost = now
		if st.cut.IsZero() {
			st.cut, st.cause, st.peer = now, err, lost.cs.peer
		}
		s.logger.Info("bps: parent lost", "cohort", sub.spec.String(), "parent", lost.cs.peer, "error", err, "parents_left", len(sub.parents))
		return
	}
	if st.cut.IsZero() {
		return
	}
	if was == 0 && st.short {
		// Receiving again, through one parent: the second is still sought.
		s.logger.Info("bps: reattached", "cohort", sub.spec.String(), "lost_parent", st.peer, "cause", st.cause, "without_parent", now.Sub(from), "parents", len(sub.parents))
	}
	if st.short {
		return
	}
	d := now.Sub(st.cut)
	s.metrics.Repairs.Inc()
	s.metrics.RepairSeconds.Add(d.Seconds())
	s.logger.Info("bps: repaired", "cohort", sub.spec.String(), "lost_parent", st.peer, "cause", st.cause, "duration", d, "parents", len(sub.parents))
	st.cut, st.cause, st.peer = time.Time{}, nil, swarm.ZeroAddress
}
