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
