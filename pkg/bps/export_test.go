// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

var (
	ProtocolName     = protocolName
	ProtocolVersion  = protocolVersion
	StreamName       = streamName
	EncodeFrame      = encodeFrame
	ErrEndGrace      = errEndGrace
	MaxPendingClaims = maxPendingClaims
)

// BootSecret exposes S_C so tests can check the challenge derivation.
func (s *Service) BootSecret() []byte { return s.secret[:] }

// HoldChallenge plants a challenge as if this node had received it earlier
// from broker for (spec, addr): the next Publish claims in its Join with it.
func (s *Service) HoldChallenge(broker swarm.Address, sp *Spec, addr, challenge []byte) {
	s.challenges.put(broker.ByteString()+sp.key+string(addr), challenge)
}

// BackoffDelay is the backoff delay drawn after n consecutive failures.
func (s *Service) BackoffDelay(n int) time.Duration { return s.backoff.delay(n) }

// EndedSpecs is the broker's memory of ended cohorts, for tests of its
// bounds.
type EndedSpecs struct{ e *endedSpecs }

func NewEndedSpecs(max int, ttl time.Duration) EndedSpecs {
	return EndedSpecs{newEndedSpecs(max, ttl)}
}

func (e EndedSpecs) Put(key string, frame []byte) { e.e.put(key, frame) }
func (e EndedSpecs) Get(key string) []byte        { return e.e.get(key) }
func (e EndedSpecs) Len() int                     { return e.e.len() }

// Challenge is the challenge this broker issues for addr on sp.
func (s *Service) Challenge(sp *Spec, addr []byte) []byte { return s.challenge(sp, addr) }

// Places counts the cohorts this node holds a place in (parents, a relay
// subscription or a broker half).
func (s *Service) Places() int {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	return len(s.reg.places)
}
