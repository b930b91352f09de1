// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"time"

	dto "github.com/prometheus/client_model/go"
)

// StrangerBurst is how many rounds the strangers' bucket holds (ration.go).
const StrangerBurst = strangerBurst

// StrangerEvery is how often that bucket gains a round.
func (s *Service) StrangerEvery() time.Duration { return s.strangerEvery() }

// FreeJoins is how many plain Joins a peer sends a root in a cohort at
// once before it is a repeat joiner, and FreeJoinsEvery how often it gains
// one more (ration.go).
const (
	FreeJoins      = freeJoins
	FreeJoinsEvery = freeJoinsEvery
)

// Rationed is how many Joins the node answered without a probe round of
// their own (ration.go).
func (s *Service) Rationed() int {
	var m dto.Metric
	if err := s.metrics.Rationed.Write(&m); err != nil {
		return -1
	}
	return int(m.GetCounter().GetValue())
}
