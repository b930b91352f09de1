// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import "golang.org/x/time/rate"

// Under implicit authorship and ALL anyone may author, and nothing but a
// rate bounds one publisher: a spammer pays one hop for what every
// subscriber pays a delivery, and light subscribers are cut by bee's
// accounting. So the node that takes a publication — the root, or a relay
// a publisher attached to — bounds it with two token buckets
// (Bounds.PublishRate a second, Bounds.PublishBurst at once): one per
// owner address in the cohort (relayed publications too: the owner is the
// SOC's, whatever stream carried it), one per publisher stream for what it
// publishes itself (a child's stream relays a whole subtree, so it has
// none). A publication past either is dropped, counted rate_limited, and
// held against nobody: an honest publisher's burst is no violation.
// Explicit authorship has the roster and the claim; a service SOC the
// admin's cursor.

// maxRatedOwners bounds the owners a cohort keeps a bucket for; past it
// the least recently seen is forgotten (and starts again full: eviction
// only loosens a bound, and a stream's bucket still holds).
const maxRatedOwners = 1024

// rateCut takes a token for pub from from's stream and from pub's owner
// at c, and reports whether either bucket was empty. It runs on from's
// reader goroutine.
func (c *cohort) rateCut(pub publication, from *member, relayed bool) bool {
	if c.spec.Explicit() || pub.service != nil || c.owners == nil {
		return false
	}
	o := c.r.s.opts
	if !relayed {
		if from.rate == nil { // only from's reader touches it
			from.rate = rate.NewLimiter(rate.Limit(o.PublishRate), o.PublishBurst)
		}
		if !from.rate.Allow() {
			return true
		}
	}
	var ok bool
	c.owners.update(string(pub.owner), func(l *rate.Limiter, found bool) (*rate.Limiter, bool) {
		if !found {
			l = rate.NewLimiter(rate.Limit(o.PublishRate), o.PublishBurst)
		}
		ok = l.Allow()
		return l, true
	})
	return !ok
}
