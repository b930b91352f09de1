// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package pot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/ethersphere/bee/v2/pkg/storage"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Gap is what a follower of a self-indexed feed missed (SWIP-65): it
// verified the update whose payload is Top (its wrapped chunk at TopRef)
// and, before it, Missed updates it does not hold. Anchor, if set, is the
// node of the update just before those, which the follower holds. All
// says that every element below the top is missed (the follower reads the
// feed from its first update): without an anchor, the recovery then
// retrieves ahead too.
type Gap struct {
	Top    *Node
	TopRef swarm.Address
	Missed int
	Anchor *Anchor
	All    bool
}

// Recovery is what Recover found: the elements of the latest missed
// updates, oldest first (the last is the update just before Top), and the
// nodes it retrieved.
type Recovery struct {
	Elements   []Element
	Retrievals int
}

// Recover retrieves the latest min(Missed, max) missed elements by
// descending from the top — one retrieval each, each verified by hash only
// against the reference chain rooted in the top; when they are all the
// missed ones, the nodes certain to be reached (above the anchor's key, or
// all with All) are retrieved ahead, Parallel at once — and performs the anchor
// check: when every missed element is recovered, the next reference of the
// descent must be the anchor's (no retrieval); when fewer are (max), the
// anchor is sought by key (one retrieval per level at most).
//
// On error the elements recovered so far are returned with it: the newest
// missed ones, contiguous. ErrAnchor (and ErrMalformed, ErrVersion,
// ErrInconsistent) is the publisher's: the signed top references what does
// not extend the follower's history. ErrUnavailable: storage did not give a
// node; ErrExhausted: the pot ends before the missed updates do (it began
// later than them).
func Recover(ctx context.Context, g storage.Getter, gap Gap, max int) (Recovery, error) {
	want := min(gap.Missed, max)
	cg := &countGetter{g: g}
	g = cg
	c := Descend(g, gap.Top, gap.TopRef)
	var pf *prefetcher
	if want == gap.Missed && (gap.Anchor != nil || gap.All) {
		// Every node above the anchor's key is a missed update (all of
		// them, without an anchor): retrieve them ahead, Parallel at once.
		pf = newPrefetcher(ctx, g, func(n *Node, p int) bool {
			return gap.Anchor == nil || lowest(n.key, p) > gap.Anchor.Key
		})
		c.l.g = pf
		c.reached = pf.reached
	}
	var got []Element
	finish := func(err error) (Recovery, error) {
		if pf != nil {
			pf.close() // what it retrieved ahead and nobody took is counted too
		}
		slices.Reverse(got)
		return Recovery{Elements: got, Retrievals: int(cg.n.Load())}, err
	}
	if _, err := c.Next(ctx); err != nil { // the top, in hand
		return finish(err)
	}
	for len(got) < want {
		e, err := c.Next(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return finish(fmt.Errorf("%w: %d of %d", ErrExhausted, len(got), gap.Missed))
		case err != nil:
			return finish(err)
		}
		if gap.Anchor != nil && e.Key <= gap.Anchor.Key {
			return finish(fmt.Errorf("%w: the pot holds %d elements above the anchor's key, %d updates were missed", ErrAnchor, len(got), gap.Missed))
		}
		got = append(got, e)
	}
	if gap.Anchor == nil {
		return finish(nil)
	}
	if want == gap.Missed {
		ref, ok := c.Peek()
		if !ok || !ref.Equal(gap.Anchor.Ref) {
			at := "nothing"
			if ok {
				at = ref.String()
			}
			return finish(fmt.Errorf("%w: %d updates back the pot references %s, the follower holds %s", ErrAnchor, gap.Missed+1, at, gap.Anchor.Ref))
		}
		return finish(nil)
	}
	_, err := CheckAnchor(ctx, g, gap.Top, gap.TopRef, *gap.Anchor)
	return finish(err)
}

// countGetter counts retrievals, those ahead of the descent included.
type countGetter struct {
	g storage.Getter
	n atomic.Int64
}

func (c *countGetter) Get(ctx context.Context, addr swarm.Address) (swarm.Chunk, error) {
	c.n.Add(1)
	return c.g.Get(ctx, addr)
}
