// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
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

// bucket is the rounds a peer or a prefix may still start: a token bucket.
type bucket struct {
	at     time.Time // when tokens was last brought up to date
	tokens float64
}

// level brings b up to date at now for a bound of most, a new bucket full.
func (b *bucket) level(now time.Time, most int) float64 {
	if b.at.IsZero() {
		b.tokens = float64(most)
	} else if d := now.Sub(b.at); d > 0 {
		b.tokens = min(float64(most), b.tokens+float64(most)*d.Seconds()/probeRationWindow.Seconds())
	}
	b.at = now
	return b.tokens
}

// rations are what a node counts to ration probe rounds.
type rations struct {
	mu       sync.Mutex
	peers    map[string]*bucket
	prefixes [256]bucket
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

func (s *Service) ration(now time.Time, peer swarm.Address) bool {
	r := &s.rations
	r.mu.Lock()
	defer r.mu.Unlock()
	key := peer.ByteString()
	p := r.peers[key]
	if p == nil {
		if len(r.peers) >= maxRationedPeers {
			for k, q := range r.peers {
				if q.level(now, s.opts.PeerProbeRounds) >= float64(s.opts.PeerProbeRounds) {
					delete(r.peers, k)
				}
			}
			if len(r.peers) >= maxRationedPeers {
				return false
			}
		}
		p = new(bucket)
	}
	if p.level(now, s.opts.PeerProbeRounds) < 1 {
		return false
	}
	var prefix byte
	if len(key) > 0 {
		prefix = key[0]
	}
	pre := &r.prefixes[prefix]
	if pre.level(now, s.opts.PrefixProbeRounds) < 1 {
		return false
	}
	pre.tokens--
	p.tokens--
	if r.peers == nil {
		r.peers = make(map[string]*bucket)
	}
	r.peers[key] = p
	return true
}
