// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"time"
)

var (
	ProtocolName    = protocolName
	ProtocolVersion = protocolVersion
	StreamName      = streamName
	EncodeFrame     = encodeFrame
	ErrEndGrace     = errEndGrace
	MaxPeerStreams  = maxPeerStreams
	ZeroAddress     = zeroAddress
)

// BackoffDelay is the backoff delay drawn after n consecutive failures.
func (s *Service) BackoffDelay(n int) time.Duration { return s.backoff.delay(n) }

// EndedSpecs is the broker's memory of ended cohorts, for tests of its
// bounds.
type EndedSpecs struct{ e *endedSpecs }

func NewEndedSpecs(max int, ttl time.Duration) EndedSpecs {
	return EndedSpecs{newEndedSpecs(max, ttl)}
}

func (e EndedSpecs) Put(key string, frame []byte) { e.e.put(key, "", "", frame) }
func (e EndedSpecs) Get(key string) []byte        { return e.e.get(key) }
func (e EndedSpecs) Len() int                     { return e.e.len() }

// Places counts the cohorts this node holds a place in (parents, a relay
// subscription or a broker half).
func (s *Service) Places() int {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	return len(s.reg.places)
}

// LazyParents reports, for each parent in Parents' order, whether it feeds
// the subscription lazily (announcements; frames when asked).
func (sub *Subscription) LazyParents() []bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	out := make([]bool, 0, len(sub.parents))
	for _, p := range sub.parents {
		out = append(out, !p.eager())
	}
	return out
}

// LazyPending is how many announcements the subscription waits on for
// their frames, or has asked for.
func (sub *Subscription) LazyPending() int {
	sub.dmu.Lock()
	defer sub.dmu.Unlock()
	return len(sub.lz.entries)
}

// HeldFeeds is how many forgotten cohorts' service feeds the broker
// remembers.
func (s *Service) HeldFeeds() int { return s.reg.feeds.len() }
