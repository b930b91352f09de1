// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// growRing is a ring of at most a bound of values that grows as values
// are put, so that one that has held few costs few: the dedup window, a
// subscription's lag and escape windows, a lazy child stream's frames.
// Not safe for concurrent use; its owner guards it.
type growRing[T any] struct {
	s    []T // the values, oldest at next once bound are held
	next int // where the next value goes
}

// put stores v. Once bound values are held it replaces the oldest, which
// it first hands to evict, if set.
func (r *growRing[T]) put(v T, bound int, evict func(*T)) {
	if len(r.s) < bound {
		r.s = append(r.s, v)
	} else {
		if evict != nil {
			evict(&r.s[r.next])
		}
		r.s[r.next] = v
	}
	r.next = (r.next + 1) % bound
}

// newest returns the first value, newest first, for which match is true;
// nil if none.
func (r *growRing[T]) newest(match func(*T) bool) *T {
	n := len(r.s)
	for k := 1; k <= n; k++ {
		if v := &r.s[(r.next-k+n)%n]; match(v) {
			return v
		}
	}
	return nil
}
