// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"golang.org/x/time/rate"
)

// No stranger makes a node work (docs/protocol.md, "Threat model"): a
// multihop Join this node has no room for starts a probe round into its
// subtree (refer), and anyone may send one. So the rounds Joins start are
// rationed per peer (Bounds.PeerProbeRounds) and per leading byte of the
// peer's overlay (Bounds.PrefixProbeRounds: overlays are cheap to mine,
// a prefix is not) over probeRationWindow; a Join past either is answered
// from the pool only — what earlier rounds found, the flash crowd's answer
// (probe.go) — or with a bare FULL, and counted (Rationed).

// probeRationWindow is how long a peer's or a prefix's spent rounds take
// to come back: each is a token bucket of its bound, refilled at the bound
// per window, so that a joiner repairing now and then is never rationed.
const probeRationWindow = 10 * time.Second

// maxRationedPeers bounds the peers a node counts rounds for. Only a peer
// whose prefix had a round left is counted; past the bound the full
// buckets (idle a window) are let go, and if none is, the Join is
// rationed.
const maxRationedPeers = 8192

// rations are what a node counts to ration probe rounds: a token bucket
// (x/time/rate, as the publish rate's) per peer and per overlay prefix.
type rations struct {
	mu       sync.Mutex
	peers    map[string]*rate.Limiter
	prefixes [256]*rate.Limiter
}

// rationLimiter is a bucket of most rounds, refilled at most per
// probeRationWindow, full when new.
func rationLimiter(most int) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(float64(most)/probeRationWindow.Seconds()), most)
}

// mayProbe reports whether a Join from peer may start a probe round now,
// and counts it if so; false is counted as rationed.
func (s *Service) mayProbe(peer swarm.Address) bool {
	if s.ration(time.Now(), peer) {
		return true
	}
	s.metrics.Rationed.Inc()
	return false
}

// ration takes a round from peer's bucket and its prefix's at now if both
// have one, and reports whether it did.
func (s *Service) ration(now time.Time, peer swarm.Address) bool {
	r := &s.rations
	r.mu.Lock()
	defer r.mu.Unlock()
	key := peer.ByteString()
	p := r.peers[key]
	if p == nil {
		if len(r.peers) >= maxRationedPeers {
			for k, q := range r.peers {
				if q.TokensAt(now) >= float64(s.opts.PeerProbeRounds) {
					delete(r.peers, k)
				}
			}
			if len(r.peers) >= maxRationedPeers {
				return false
			}
		}
		p = rationLimiter(s.opts.PeerProbeRounds)
	}
	var prefix byte
	if len(key) > 0 {
		prefix = key[0]
	}
	pre := r.prefixes[prefix]
	if pre == nil {
		pre = rationLimiter(s.opts.PrefixProbeRounds)
		r.prefixes[prefix] = pre
	}
	if p.TokensAt(now) < 1 || pre.TokensAt(now) < 1 {
		return false
	}
	p.AllowN(now, 1)
	pre.AllowN(now, 1)
	if r.peers == nil {
		r.peers = make(map[string]*rate.Limiter)
	}
	r.peers[key] = p
	return true
}

// Repeat joiners at the root (docs/protocol.md, "Threat model", slot
// hunting): a per-peer or per-prefix bucket cannot bound the rounds many
// peers' Joins start, and a node-wide bucket rationed honest orphans'
// rejoins (reverted). So the root sorts a plain multihop Join by how
// often its peer Joined the cohort here within repeatWindow:
//
//   - its first firstJoins (a joiner's, a flash crowd's): a round each,
//     as ever;
//   - a repeat, up to maxRepeatJoins (a node asking for a second parent,
//     an orphan rejoining, an escape, a Reparent followed to the root):
//     it shares the root's one repeat round — coalesced: while one is
//     open it is held and answered from what that round pooled; else it
//     starts the next. It is never told FULL for the bound: at worst it
//     waits for the open round, within its probe wait. (A pace between
//     repeat rounds was tried: it held a leaving relay's children past
//     the relay's closeWait, TestStressLeaveReparentEscapeClose, and
//     changed nothing measurable in bps-sim -attack squat-root, where
//     the rounds are one at a time already);
//   - past that (a hunter: an honest node Joins a root a few times a
//     minute, a hunter several a second): from the pool only — and only
//     when no join is held for it — at once, held for nobody's round,
//     counted as rationed. A hunter's own subscription counts with its
//     hunt: it cannot rejoin at the root for the rest of its window.
//
// A child's refer-Join (one at a time, mayRefer) is not sorted.
const (
	// repeatWindow is how long the root counts a peer's Joins in a
	// cohort from its first: bee's blocklist period.
	repeatWindow = time.Minute
	// firstJoins are a peer's Joins in a window served as a joiner's:
	// one Subscribe's or repair's (maxJoinRounds: a joiner whose
	// candidates were taken comes back at once), so that no joiner's
	// first placement waits for the repeat round.
	firstJoins = maxJoinRounds
	// maxRepeatJoins bounds the plain Joins one peer has served by
	// rounds (its own or the repeat round) in a cohort at the root within
	// repeatWindow, twice what an honest node sends in a bad minute: a
	// Subscribe's 3, an orphan's maxRejoins (up to maxJoinRounds each
	// when its candidates are taken meanwhile, 15) and a node's requests
	// for a second parent (backing off from 1 s, about 6 a minute).
	maxRepeatJoins = 32
	// maxJoinsCounted bounds the peers a root counts Joins for, per
	// cohort; past it, and none of them out of its window, a Join is
	// counted as a repeat (shared rounds: nobody is refused for it).
	maxJoinsCounted = 16384
)

// joinClass is how the root serves a plain multihop Join (above).
type joinClass uint8

const (
	joinFirst  joinClass = iota // a round of its own
	joinRepeat                  // the repeat round, one at a time
	joinHunter                  // the pool only, at once
)

// joinCount is what the root counts of one peer's Joins in a cohort.
type joinCount struct {
	since time.Time // the first Join of the window
	n     int
}

// repeats is what a cohort's root keeps to sort Joins and to hold its
// one repeat round; under the cohort's mu.
type repeats struct {
	peers map[string]*joinCount
	open  bool // the repeat round is open
}

// sort counts a plain Join from peer at now and returns its class.
func (r *repeats) sort(now time.Time, peer swarm.Address) joinClass {
	k := peer.ByteString()
	jc := r.peers[k]
	if jc != nil && now.Sub(jc.since) >= repeatWindow {
		jc = nil // its window is over: a joiner again
	}
	if jc == nil {
		if len(r.peers) >= maxJoinsCounted {
			for q, c := range r.peers {
				if now.Sub(c.since) >= repeatWindow {
					delete(r.peers, q)
				}
			}
			if len(r.peers) >= maxJoinsCounted {
				return joinRepeat
			}
		}
		if r.peers == nil {
			r.peers = make(map[string]*joinCount)
		}
		r.peers[k] = &joinCount{since: now, n: 1}
		return joinFirst
	}
	jc.n++
	switch {
	case jc.n <= firstJoins:
		return joinFirst
	case jc.n > maxRepeatJoins:
		return joinHunter
	}
	return joinRepeat
}

// repeatLook is how often a repeat join held while the repeat round is
// open looks again, beside the round's close waking it: a close wakes
// only as many as it can serve.
func (s *Service) repeatLook() time.Duration { return max(s.opts.ProbeWait/16, time.Millisecond) }
