// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// Audience is what this service bounds of a broker's audience: its own
// configuration, as the API shows it beside the cohorts it brokers. What
// bee bounds (its topology's peers per bin, its light-node limit) is the
// node's to add.
type Audience struct {
	// StreamsPerCohort is the fan-out bound of one cohort (subscriber
	// streams), before the extra seats of absent publishers.
	StreamsPerCohort int
	// PublisherStreams bounds the claimed publisher streams of a cohort.
	PublisherStreams int
	// Cohorts bounds the live cohorts this broker holds.
	Cohorts int
	// CohortsPerPeer bounds the cohorts one peer connection may hold.
	CohortsPerPeer int
}

// Audience reports the bounds this service applies as a broker.
func (s *Service) Audience() Audience {
	return Audience{
		StreamsPerCohort: s.opts.MaxStreamsPerCohort,
		PublisherStreams: s.opts.MaxPublisherStreams,
		Cohorts:          s.opts.MaxCohorts,
		CohortsPerPeer:   s.opts.MaxCohortsPerPeer,
	}
}
