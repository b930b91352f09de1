// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"time"

	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Replay on join (issue 26). Two parents mask one failure, not a shared
// ancestor: a node whose every parent hangs on the node that died — its
// one parent, or two parents both in the dead node's subtree — receives
// nothing from the moment that node died until it, or the parents it hangs
// on, are attached again, and what was published meanwhile passed every
// live node of the tree but it. Each node therefore keeps its last
// deliveries (the root those it fanned out, every other node those its
// subscription took — a leaf too, which a repairing node may attach to;
// at most replayFrames and replayAge), and every join a node makes as a
// subscriber asks the parent for what that parent took since shortly
// before the node's own last delivery (Join.replay_ms) — a repair's, and
// a routine one for a second parent too: a node cut off with its one
// parent lost no parent, and the routine join that finds it a live second
// parent is the first that can bring back what the cut cost; its old
// parent, dropped later, never brings it. The parent queues those first,
// before anything live, whole even on a stream that starts lazy, beside
// the stream's queue (frameQueue.spare): the replay is bounded by time,
// not by the queue. The node's dedup window and feed cursors drop what it
// had; what is new to it is taken and fanned out to its children, so a
// subtree cut off with it gets it too, with no request of its own. A node
// that is not cut off asks for what arrived in the last replaySlack, and
// drops it.

const (
	// replayFrames bounds the deliveries a cohort keeps for a replay, and
	// so the frames a replay queues beside a stream's queue: replayAge at
	// up to 12.8 updates a second.
	replayFrames = 128
	// replayAge bounds how old a kept delivery may be, and so the
	// replay a joiner may ask for: a node cut off longer than this lost
	// the older ones.
	replayAge = 10 * time.Second
	// replaySlack is added to the time since a node's last delivery when
	// it asks for a replay: what the dead parent had taken and not yet
	// passed on was taken by the new parent up to a few link latencies
	// before the node's last delivery.
	replaySlack = time.Second
)

// recentFrame is one delivery kept for a replay: the encoded Broadcast the
// root fanned out, or the Broadcast a subscription took (encoded if it is
// replayed).
type recentFrame struct {
	b   []byte
	msg *pb.Broadcast
	at  time.Time
}

func (f recentFrame) frame() []byte {
	if f.b != nil {
		return f.b
	}
	return encodeFrame(f.msg)
}

// rememberLocked keeps frame, a delivery the root c fans out that is not a
// service update (every stream's first delivery is the latest of those),
// for a replay; a relay's are its subscription's (remember). The caller
// holds c.mu.
func (c *cohort) rememberLocked(frame []byte, svc uint64, now time.Time) {
	if _, relays := c.role.(*relay); relays || svc != 0 || frame == nil {
		return
	}
	c.recent.put(recentFrame{b: frame, at: now}, replayFrames, nil)
}

// rememberLocked keeps b, a delivery new to this node that is not a
// service update, for a replay to a child it may take later; the caller
// holds sub.mu.
func (sub *Subscription) rememberLocked(b *pb.Broadcast, now time.Time) {
	sub.recent.put(recentFrame{msg: b, at: now}, replayFrames, nil)
}

// recentSince is what r holds from since on, oldest first, at most limit
// (the newest).
func recentSince(r *growRing[recentFrame], since time.Time, limit int) [][]byte {
	n := len(r.s)
	var out []recentFrame
	for k := 1; k <= n && len(out) < limit; k++ { // newest first
		f := r.s[(r.next-k+n)%n]
		if f.at.Before(since) {
			break
		}
		out = append(out, f)
	}
	frames := make([][]byte, len(out))
	for i, f := range out {
		frames[len(out)-1-i] = f.frame()
	}
	return frames
}

// recentLocked is what c's node holds for a replay from since on, at most
// limit; the caller holds c.mu (and so may take the relay subscription's
// mu: c.mu comes first).
func (c *cohort) recentLocked(since time.Time, limit int) [][]byte {
	if rl, ok := c.role.(*relay); ok {
		rl.sub.mu.Lock()
		defer rl.sub.mu.Unlock()
		return recentSince(&rl.sub.recent, since, limit)
	}
	return recentSince(&c.recent, since, limit)
}

// replayLocked queues on m, a stream just admitted, the deliveries c fanned
// out within the last d, oldest first, after its first delivery and before
// anything live: beside its queue (frameQueue), so that live deliveries
// find the whole queue. The caller holds c.mu.
func (r *registry) replayLocked(c *cohort, m *member, d time.Duration) {
	if d <= 0 || m.silent || m.role != roleSpectator || c.svc.Ended() {
		return
	}
	n := 0
	for _, f := range c.recentLocked(time.Now().Add(-d), replayFrames) {
		if !m.offer(outFrame{b: f, replay: true}) {
			break
		}
		n++
	}
	if n > 0 {
		r.s.metrics.Replayed.Add(float64(n))
	}
}

// replayOf is the replay a Join asks for, bounded by replayAge; none for a
// stream that does not speak the envelope.
func replayOf(join *pb.Join) time.Duration {
	if !join.GetMultihop() || join.GetReplayMs() == 0 {
		return 0
	}
	return min(time.Duration(join.GetReplayMs())*time.Millisecond, replayAge)
}

// replayMs is the replay this subscription asks of a parent it attaches
// to, on every join once it took something: the time since its last
// delivery — a node cut off with its parents (a shared ancestor died) has
// taken nothing since — or since it last lost a parent, if that came
// first and within replayAge (one whose sister kept delivering, the lazy
// one taking over, may miss what the dead parent had in flight, a hole
// before its last delivery), and replaySlack; at most replayAge. A node
// that is not cut off asks for about replaySlack, and drops it.
//
// A node that has had a parent and took nothing yet asks for the time
// since it first attached, and replaySlack (at most that much from before
// it attached: SWIP-74 keeps no history), at most replayAge: its parents were
// lost before the first delivery came (an attacker's Reparent or reset on
// the root's first heartbeat, a crash), or withheld everything until the
// root's heartbeat moved it (escape.go) — what was published meanwhile
// passed its new parent. Without it such a node lost the cohort's first
// updates, a whole repair's or escape's worth (issue 24). Its first join
// asks for none.
func (sub *Subscription) replayMs() uint32 {
	last := sub.lastTake.Load()
	sub.mu.Lock()
	lost, first := sub.pstate.lost, sub.pstate.first
	sub.mu.Unlock()
	now := time.Now()
	var d time.Duration
	switch {
	case last != 0:
		from := time.Unix(0, last)
		if !lost.IsZero() && lost.Before(from) && now.Sub(lost) < replayAge {
			from = lost
		}
		d = now.Sub(from) + replaySlack
	case !first.IsZero():
		d = now.Sub(first) + replaySlack
	default:
		return 0 // its first join: no history
	}
	return uint32(min(d, replayAge) / time.Millisecond)
}
