// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"slices"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// CohortPeers returns the overlays of the peers whose streams are attached
// to the cohort of sp at this broker, each once, sorted; nil if this node
// brokers no such cohort. The node's topic list names them (bee-js reads a
// topic's connections as its peers).
func (s *Service) CohortPeers(sp *Spec) []swarm.Address {
	r := s.reg
	r.mu.Lock()
	c := r.cohorts[sp.key]
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	c.mu.Lock()
	seen := make(map[string]struct{}, len(c.members))
	out := make([]swarm.Address, 0, len(c.members))
	for m := range c.members {
		if _, ok := seen[m.peer.ByteString()]; ok {
			continue
		}
		seen[m.peer.ByteString()] = struct{}{}
		out = append(out, m.peer)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b swarm.Address) int { return a.Compare(b) })
	return out
}
