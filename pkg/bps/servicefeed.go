// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"maps"
	"slices"

	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Freshness is what a service update is to the feed that applies it.
type Freshness int

const (
	// Stale is at or below what the feed holds: a late copy or a replay.
	Stale Freshness = iota
	// Fresh is the update the feed expected next (or its first).
	Fresh
	// Gap is newer than the next expected: updates before it were missed.
	Gap
)

// ServiceFeed is the admin's service feed (SWIP-60) as one holder knows it:
// the next index it takes, the roster in force and whether the cohort
// ended. Broker, relay, subscriber and the API's rooms all judge service
// updates by it. Its holder guards it.
type ServiceFeed struct {
	seen   bool
	next   uint64
	roster map[string]struct{}
	ended  bool
}

// Apply takes svc unless it is stale: a ROSTER at or past the roster
// cursor replaces the roster (Gap if rosters were missed before it); an
// EOS ends the feed once. One feed per kind (SWIP-60 rev 14): the end moves
// no roster cursor.
func (f *ServiceFeed) Apply(svc *ServiceMsg) Freshness {
	if svc.Kind == pb.Kind_EOS {
		if f.ended {
			return Stale
		}
		f.ended = true
		return Fresh
	}
	if f.seen && svc.Index < f.next {
		return Stale
	}
	fr := Fresh
	if f.seen && svc.Index > f.next {
		fr = Gap
	}
	f.seen, f.next = true, svc.Index+1
	f.roster = make(map[string]struct{}, len(svc.Publishers))
	for _, p := range svc.Publishers {
		f.roster[string(p)] = struct{}{}
	}
	return fr
}

// Next is the lowest index the feed takes next (0 before any).
func (f *ServiceFeed) Next() uint64 { return f.next }

// Seen reports whether the feed took an update.
func (f *ServiceFeed) Seen() bool { return f.seen }

// Ended reports whether the feed took END_OF_STREAM.
func (f *ServiceFeed) Ended() bool { return f.ended }

// Rostered reports whether the roster in force names addr.
func (f *ServiceFeed) Rostered(addr []byte) bool {
	_, ok := f.roster[string(addr)]
	return ok
}

// MayPublish reports whether owner may publish in sp under explicit
// authorship: the admin, or named by the roster in force.
func (f *ServiceFeed) MayPublish(sp *Spec, owner []byte) bool {
	return bytes.Equal(owner, sp.Admin) || f.Rostered(owner)
}

// Roster lists the addresses the roster in force names, sorted.
func (f *ServiceFeed) Roster() [][]byte {
	out := make([][]byte, 0, len(f.roster))
	for p := range f.roster {
		out = append(out, []byte(p))
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}

// clone is an independent copy of f.
func (f *ServiceFeed) clone() ServiceFeed {
	c := *f
	c.roster = maps.Clone(f.roster)
	return c
}
