// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/ethersphere/bps/pkg/bps"

	"github.com/ethersphere/bee/v2/pkg/storage"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/pot"
)

// PotSession is a GapSession on a cohort whose publishers' feeds carry the
// pot profile (SWIP-65): a gap is recovered by descending the pot from the
// payload of the update that revealed it — whose signature was verified —
// each missed update's wrapped chunk retrieved once and checked by its hash
// only, no SOC retrieved, no signature checked. A recovered update's
// Delivery therefore carries no signature (its signature bytes are zero):
// a session that shows signatures to its application must not say
// PotProfile (it recovers by feed lookup, one SOC per missed update).
type PotSession interface {
	GapSession
	// PotProfile reports whether the session recovers by pot descent.
	PotProfile() bool
	// Equivocation tells the session that a publisher's feed failed the
	// anchor check: the pot of the update that revealed a gap does not
	// extend the update the session holds at its last index (two signed
	// histories), or is not a pot. The missed updates are then recovered
	// by feed lookup, each signature checked. false: the session ended.
	Equivocation(ctx context.Context, err *EquivocationError) bool
}

// EquivocationError is SWIP-65's protocol error: the pot carried by update
// Top of Owner's feed does not reference, where it belongs, the update the
// follower verified at Index, its last before the gap (Err wraps
// pot.ErrAnchor); or it is no well-formed pot (pot.ErrMalformed,
// pot.ErrVersion, pot.ErrInconsistent). Either way the owner signed it.
type EquivocationError struct {
	Owner []byte
	Index uint64
	Top   uint64
	Err   error
}

func (e *EquivocationError) Error() string {
	return fmt.Sprintf("bps: equivocation on the feed of %x: update %d's pot does not extend update %d: %v", e.Owner, e.Top, e.Index, e.Err)
}

func (e *EquivocationError) Unwrap() error { return e.Err }

// publisherFault reports whether a pot error is the publisher's: what a
// node it signed references hashes right and is wrong.
func publisherFault(err error) bool {
	return errors.Is(err, pot.ErrAnchor) || errors.Is(err, pot.ErrMalformed) ||
		errors.Is(err, pot.ErrVersion) || errors.Is(err, pot.ErrInconsistent)
}

// storageGetter is the node's Storage as bee's storage.Getter.
type storageGetter struct{ st bps.Storage }

func (g storageGetter) Get(ctx context.Context, addr swarm.Address) (swarm.Chunk, error) {
	return g.st.Fetch(ctx, addr)
}

var _ storage.Getter = storageGetter{}

// potRecover recovers updates from … to of live's owner's feed by descent
// from live's payload (live is update to+1), with the anchor check against
// anchor, the update the session holds at from-1 (nil: none, the session
// resumed from an index). The latest RecoverMax are recovered, the older
// ones are a gap. What descent cannot reach (storage lacks a node, or the
// pot begins after from) is recovered by feed lookup; a publisher fault is
// told to the session, and the whole gap recovered by feed lookup. It
// reports false if the session ended.
func (f *follower) potRecover(ctx context.Context, ps PotSession, live bps.Delivery, anchor *bps.Delivery, from, to uint64) bool {
	owner := live.Owner
	top, ref, ok := live.Pot()
	if !ok {
		return f.recover(ctx, owner, from, to)
	}
	max := f.x.opts.RecoverMax
	// Past max the exact count does not matter to the descent (the anchor
	// is then sought by key), and an index far out must not overflow it.
	missed := min(to-from+1, uint64(max)+1)
	// From index 0, every element below the top is missed: the whole pot
	// is retrieved, ahead of the descent too.
	gap := pot.Gap{Top: top, TopRef: ref, Missed: int(missed), All: from == 0}
	if anchor != nil && anchor.Index+1 == from {
		if n, r, ok := anchor.Pot(); ok {
			gap.Anchor = &pot.Anchor{Key: n.Key(), Ref: r}
		}
	}
	rec, err := pot.Recover(ctx, storageGetter{f.st}, gap, max)
	if publisherFault(err) {
		e := &EquivocationError{Owner: owner, Index: from - 1, Top: live.Index, Err: err}
		if !ps.Equivocation(f.ctx, e) {
			return false
		}
		return f.recover(ctx, owner, from, to)
	}

	first := from // the oldest update recovered; older ones are a gap
	if to-from >= uint64(max) {
		first = to - uint64(max) + 1
		f.x.metrics.RecoveryGaps.Add(float64(first - from))
		f.logGap(owner, from, first-1, reasonPastBound, nil)
		if !ps.Gap(f.ctx, owner, from, first-1) {
			return false
		}
	}
	lo := to + 1 - uint64(len(rec.Elements)) // descent covers lo … to
	if err != nil {
		// Not the publisher's fault: storage lacked a node, or time ran
		// out; what descent did not reach is looked up by feed below.
		f.x.logger.Debug("pubsub: pot descent stopped short, the rest by feed lookup", "cohort", f.spec.String(),
			"owner", hex.EncodeToString(owner), "descended", len(rec.Elements), "from", first, "to", to, "error", err)
	}
	if lo > first && !f.recover(ctx, owner, first, lo-1) {
		return false
	}
	if len(rec.Elements) == 0 {
		return true
	}
	if !ps.Recovered(f.ctx, owner, lo, to) {
		return false
	}
	for i, e := range rec.Elements {
		d, err := bps.PotDelivery(f.spec, owner, lo+uint64(i), e.Node.Bytes())
		if err != nil {
			return false
		}
		if !f.hand(d) {
			return false
		}
		f.x.metrics.Recovered.Inc()
	}
	return true
}

// extends is the anchor check of an update d that follows, with no gap,
// the update prev the session holds of its feed: d's pot node must be the
// whirl over prev's (PotCheck: the previous node at the fork where their
// keys part, its forks below). No retrieval; one hash, prev's wrapped
// chunk. nil if it is, or if the session does not follow the profile, or
// prev carries no pot node (the feed took the profile up later). The
// caller holds f.mu.
func (f *follower) extends(d bps.Delivery, prev *bps.Delivery) *EquivocationError {
	if f.pot == nil || prev == nil || prev.Index+1 != d.Index {
		return nil
	}
	if _, _, ok := prev.Pot(); !ok {
		return nil
	}
	if err := bps.PotCheck(prev.Payload(), d.Payload()); err != nil {
		return &EquivocationError{Owner: d.Owner, Index: prev.Index, Top: d.Index, Err: fmt.Errorf("%w: %w", pot.ErrAnchor, err)}
	}
	return nil
}
