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
// subtree (refer), and anyone may send one. Two rules bound the rounds
// Joins start; a Join past either is answered from the pool only — what
// earlier rounds found, the flash crowd's answer (probe.go) — or with a
// bare FULL, and counted (Rationed):
//
//   - per peer and per prefix: a token bucket per peer
//     (Bounds.PeerProbeRounds) and per leading byte of the peer's overlay
//     (Bounds.PrefixProbeRounds: overlays are cheap to mine, a prefix is
//     not) over probeRationWindow, for every Join, refer or plain;
//   - per node, for plain Joins at a relay and repeat joiners at the
//     root: a round for a plain Join (not a child's refer) at a relay, or
//     at the root for one from a repeat joiner — a peer past its free
//     plain Joins in the cohort here (6, one more a minute) — takes a token from the node's one bucket:
//     strangerBurst, then one every 10 s (strangerEvery), all such peers
//     and cohorts together. What it asks the pool comes first, as for any
//     join.
//
// A relay is reached by a joiner its candidate sent there, for a slot it
// offered, and by a child asking where else to attach with a refer-Join
// (one at a time); a plain Join that finds it full is the rare case — a
// candidate's slot taken meanwhile, a relay's children told to reparent —
// and a hunt spread over many peers and nodes — which per-peer and
// per-prefix buckets never bind (bps-sim -attack squat) — the common one.
// Whether the peer holds a stream here says nothing: a hunter holds one
// wherever it squats. The root is where a flash crowd joins, every joiner
// a stranger: there a joiner's first Joins take no token (the crowd is
// bounded by the buckets above and maxOpenProbes), nor does an honest
// node's repair; one coming back for more slots again and again — a
// hunter — shares the node's bucket.

// probeRationWindow is how long a peer's or a prefix's spent rounds take
// to come back: each is a token bucket of its bound, refilled at the bound
// per window, so that a joiner repairing now and then is never rationed.
const probeRationWindow = 10 * time.Second

// freeJoins is how many plain Joins a peer sends a root in one cohort at
// once before it is a repeat joiner, and freeJoinsEvery how often it gains
// one more: a join, a second parent, a publisher stream and an orphan's
// rejoins (maxRejoins) fit, now and then; a hunter's 4 a second do not —
// and a hundred hunters' free Joins are the root's rounds, so they refill
// slowly (at 6 per 10 s, 100 hunters started 60 a second: bps-sim -attack
// squat-root).
const (
	freeJoins      = maxRejoins + 1
	freeJoinsEvery = time.Minute
)

// strangerBurst is how many rounds the node's bucket for plain Joins at a
// relay and repeat joiners at the root holds, refilled at one per
// strangerEvery: the honest cases (a candidate's slot taken meanwhile, a
// relay's children told to reparent there, whose first round pools what
// the others take) are rare, and a hunt spread over a thousand nodes asks
// each of them about once every few seconds (bps-sim -attack squat), so
// one round a probe wait at each bound nothing.
const strangerBurst = 2

// strangerEvery is how often the node's bucket gains a round: the
// rations' window, or the probe wait if longer.
func (s *Service) strangerEvery() time.Duration { return max(probeRationWindow, s.opts.ProbeWait) }

// maxRationedPeers bounds the peers a node counts rounds for, and the
// (peer, cohort) pairs it remembers as joiners. Only a peer whose prefix
// had a round left is counted; past the bound the full buckets (idle long
// enough to refill) are let go, and if none is, the Join is rationed (a
// peer) or a repeat (a joiner).
const maxRationedPeers = 8192

// rations are what a node counts to ration probe rounds: a token bucket
// (x/time/rate, as the publish rate's) per peer and per overlay prefix,
// a bucket of free Joins per (peer, cohort), and the node's bucket of
// rounds for plain Joins at a relay and repeat joiners at the root.
type rations struct {
	mu       sync.Mutex
	peers    map[string]*rate.Limiter
	prefixes [256]*rate.Limiter
	joiners  map[string]*rate.Limiter // peer overlay + cohort key -> its free plain Joins
	// strangers is the node's bucket of rounds (strangerBurst, one every
	// strangerEvery) for plain Joins at a relay and repeat joiners' at the
	// root.
	strangers *rate.Limiter
}

// rationLimiter is a bucket of most rounds, refilled at most per
// probeRationWindow, full when new.
func rationLimiter(most int) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(float64(most)/probeRationWindow.Seconds()), most)
}

// joinRation is what the rations say of one Join: rationed, it starts no
// round; gated, a round it would start needs a token from the node's
// bucket (strangerRound).
type joinRation struct {
	rationed bool
	gated    bool
}

// mayProbe rations a multihop Join from peer in c's cohort this node has
// no room for: refer is a child's refer-Join. A rationed Join is counted.
func (s *Service) mayProbe(c *cohort, peer swarm.Address, refer bool) joinRation {
	now := time.Now()
	if !s.ration(now, peer) {
		s.metrics.Rationed.Inc()
		return joinRation{rationed: true}
	}
	if refer {
		return joinRation{}
	}
	repeat := s.repeatJoiner(now, peer, c.spec.key)
	c.mu.Lock()
	root := c.role.holdsJoins()
	c.mu.Unlock()
	return joinRation{gated: repeat || !root}
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

// repeatJoiner counts a plain Join from peer in the cohort of key and
// reports whether it is one past the peer's free Joins there: a token
// bucket of freeJoins per (peer, cohort), refilled at one per
// freeJoinsEvery. Where the memory is full of pairs whose buckets are not
// full, every Join is a repeat.
func (s *Service) repeatJoiner(now time.Time, peer swarm.Address, key string) bool {
	r := &s.rations
	r.mu.Lock()
	defer r.mu.Unlock()
	k := peer.ByteString() + key
	l := r.joiners[k]
	if l == nil {
		if len(r.joiners) >= maxRationedPeers {
			for j, q := range r.joiners {
				if q.TokensAt(now) >= freeJoins {
					delete(r.joiners, j)
				}
			}
			if len(r.joiners) >= maxRationedPeers {
				return true
			}
		}
		if r.joiners == nil {
			r.joiners = make(map[string]*rate.Limiter)
		}
		l = rate.NewLimiter(rate.Every(freeJoinsEvery), freeJoins)
		r.joiners[k] = l
	}
	return !l.AllowN(now, 1)
}

// strangerRound takes a round from the strangers' bucket if it has one,
// and reports whether it did; a Join refused it is counted as rationed.
func (s *Service) strangerRound() bool {
	r := &s.rations
	r.mu.Lock()
	if r.strangers == nil {
		r.strangers = rate.NewLimiter(rate.Every(s.strangerEvery()), strangerBurst)
	}
	ok := r.strangers.Allow()
	r.mu.Unlock()
	if !ok {
		s.metrics.Rationed.Inc()
	}
	return ok
}
