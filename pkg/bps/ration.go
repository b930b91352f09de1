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
// subtree (refer), and anyone may send one. Three rules bound the rounds
// Joins start; a Join past any of them is answered from the pool only —
// what earlier rounds found, the flash crowd's answer (probe.go) — or with
// a bare FULL, and counted (Rationed):
//
//   - per peer and per prefix: a token bucket per peer
//     (Bounds.PeerProbeRounds) and per leading byte of the peer's overlay
//     (Bounds.PrefixProbeRounds: overlays are cheap to mine, a prefix is
//     not) over probeRationWindow, for every Join, refer or plain;
//   - a repeat joiner: a plain Join (not a child's refer) from a peer
//     whose Join in the same cohort was let through here within
//     probeRationWindow starts no round — a joiner is answered once, a
//     hunter coming back for more slots is answered from the pool;
//   - per node, for strangers: at a relay (a node that follows the cohort)
//     a plain Join from a peer holding no stream in the cohort here starts
//     a round only if the node started none for a stranger within the
//     probe wait (one a ProbeWait, all strangers and cohorts together). A
//     relay is reached by a joiner a candidate sent it there, for a slot
//     it offered; one that finds the slot taken is the rare case, and a
//     spread hunt over many peers — which per-peer and per-prefix buckets
//     never bind (bps-sim -attack squat) — is the common one. The root is
//     where a flash crowd joins, all of it strangers: there the rounds are
//     bounded by the buckets above and maxOpenProbes.

// probeRationWindow is how long a peer's or a prefix's spent rounds take
// to come back: each is a token bucket of its bound, refilled at the bound
// per window, so that a joiner repairing now and then is never rationed;
// and how long a joiner let through is a repeat joiner in its cohort.
const probeRationWindow = 10 * time.Second

// maxRationedPeers bounds the peers a node counts rounds for, and the
// (peer, cohort) pairs it remembers as joiners. Only a peer whose prefix
// had a round left is counted; past the bound the full buckets (idle a
// window) and the joiners older than the window are let go, and if none
// is, the Join is rationed.
const maxRationedPeers = 8192

// rations are what a node counts to ration probe rounds: a token bucket
// (x/time/rate, as the publish rate's) per peer and per overlay prefix,
// the joiners let through lately, and the strangers' bucket.
type rations struct {
	mu       sync.Mutex
	peers    map[string]*rate.Limiter
	prefixes [256]*rate.Limiter
	joiners  map[string]time.Time // peer overlay + cohort key -> when its Join was let through
	// strangers is the node's one round a probe wait for plain Joins from
	// peers holding no stream in the cohort, at a relay.
	strangers *rate.Limiter
}

// rationLimiter is a bucket of most rounds, refilled at most per
// probeRationWindow, full when new.
func rationLimiter(most int) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(float64(most)/probeRationWindow.Seconds()), most)
}

// joinRation is what the rations say of one Join: rationed, it starts no
// round; gated, a round it would start needs the strangers' token
// (strangerRound).
type joinRation struct {
	rationed bool
	gated    bool
}

// mayProbe rations a multihop Join from peer in c's cohort this node has
// no room for: refer is a child's refer-Join. A rationed Join is counted.
func (s *Service) mayProbe(c *cohort, peer swarm.Address, refer bool) joinRation {
	now := time.Now()
	var jr joinRation
	switch {
	case !s.ration(now, peer):
		jr.rationed = true
	case !refer && s.repeatJoiner(now, peer, c.spec.key):
		jr.rationed = true
	case !refer:
		c.mu.Lock()
		relay := !c.role.holdsJoins()
		c.mu.Unlock()
		jr.gated = relay && !s.reg.hasStream(peer, c.spec)
	}
	if jr.rationed {
		s.metrics.Rationed.Inc()
	}
	return jr
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

// repeatJoiner reports whether peer's Join in the cohort of key was let
// through within probeRationWindow; if not, it remembers this one. Where
// the memory is full of joiners within the window, every Join is a repeat.
func (s *Service) repeatJoiner(now time.Time, peer swarm.Address, key string) bool {
	r := &s.rations
	r.mu.Lock()
	defer r.mu.Unlock()
	k := peer.ByteString() + key
	if at, ok := r.joiners[k]; ok && now.Sub(at) < probeRationWindow {
		return true
	}
	if _, ok := r.joiners[k]; !ok && len(r.joiners) >= maxRationedPeers {
		for j, at := range r.joiners {
			if now.Sub(at) >= probeRationWindow {
				delete(r.joiners, j)
			}
		}
		if len(r.joiners) >= maxRationedPeers {
			return true
		}
	}
	if r.joiners == nil {
		r.joiners = make(map[string]time.Time)
	}
	r.joiners[k] = now
	return false
}

// strangerRound takes the strangers' one round a probe wait if it is
// there, and reports whether it did; a Join refused it is counted as
// rationed.
func (s *Service) strangerRound() bool {
	r := &s.rations
	r.mu.Lock()
	if r.strangers == nil {
		r.strangers = rate.NewLimiter(rate.Every(s.opts.ProbeWait), 1)
	}
	ok := r.strangers.Allow()
	r.mu.Unlock()
	if !ok {
		s.metrics.Rationed.Inc()
	}
	return ok
}
