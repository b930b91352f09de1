// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"slices"
	"strings"
	"testing"
)

func indexes(ds []Delivery) []uint64 {
	out := make([]uint64, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.Index)
	}
	return out
}

// TestReorderLateAfterFlush: a parent later than the reorder wait does not
// lose an update: the flush passes over index 1 (the application sees the
// gap), and when index 1 comes after all it is delivered, once; a copy of
// it after that is a duplicate.
func TestReorderLateAfterFlush(t *testing.T) {
	o := newReorder()
	defer o.stop()
	owner := []byte("owner")
	push := func(i uint64) []uint64 {
		if !o.admit(owner, i) {
			return nil
		}
		return indexes(o.push(Delivery{Owner: owner, Index: i}, func() {}))
	}
	if got := push(0); !slices.Equal(got, []uint64{0}) {
		t.Fatalf("index 0: %v", got)
	}
	if got := push(2); len(got) != 0 {
		t.Fatalf("index 2 before 1: delivered %v, want it held", got)
	}
	if got := indexes(o.flush()); !slices.Equal(got, []uint64{2}) {
		t.Fatalf("flush: %v, want [2]", got)
	}
	if got := push(1); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("late index 1: %v, want it delivered", got)
	}
	if got := push(1); got != nil {
		t.Fatalf("a copy of the late index: %v, want a duplicate", got)
	}
	if got := push(3); !slices.Equal(got, []uint64{3}) {
		t.Fatalf("index 3: %v", got)
	}
}

// TestReorderSkipBounded: a publisher that jumps its index far ahead makes
// the flush remember at most maxSkipped indexes, in constant time.
func TestReorderSkipBounded(t *testing.T) {
	o := newReorder()
	defer o.stop()
	owner := []byte("owner")
	o.push(Delivery{Owner: owner, Index: 0}, func() {})
	o.push(Delivery{Owner: owner, Index: 1 << 60}, func() {})
	if got := indexes(o.flush()); !slices.Equal(got, []uint64{1 << 60}) {
		t.Fatalf("flush: %v", got)
	}
	if o.nskip > maxSkipped {
		t.Fatalf("%d indexes remembered, want at most %d", o.nskip, maxSkipped)
	}
	if !o.admit(owner, 1) || o.admit(owner, 1<<59) {
		t.Fatal("the first skipped indexes are remembered, not the far ones")
	}
	// A second jump: what the first remembered is forgotten, so that the
	// newest gaps are tracked, never more than maxSkipped in all.
	o.push(Delivery{Owner: owner, Index: 1 << 61}, func() {})
	o.flush()
	if o.nskip > maxSkipped {
		t.Fatalf("%d indexes remembered after two jumps, want at most %d", o.nskip, maxSkipped)
	}
	if o.admit(owner, 1) || !o.admit(owner, 1<<60+1) {
		t.Fatal("after a second jump the first one's gaps are remembered, or not its own")
	}
}

// TestReorderPassedGaps: a flush tells the gap escape (escape.go) the
// lowest index it passed over per owner, once; a late update of it fills
// it, and then it is no longer passed over.
func TestReorderPassedGaps(t *testing.T) {
	o := newReorder()
	defer o.stop()
	a, b := []byte("a"), []byte("b")
	for _, d := range []Delivery{{Owner: a, Index: 0}, {Owner: a, Index: 3}, {Owner: a, Index: 5}, {Owner: b, Index: 7}, {Owner: b, Index: 9}} {
		o.push(d, func() {})
	}
	if g := o.takePassed(); len(g) != 0 {
		t.Fatalf("gaps %v before a flush", g)
	}
	o.flush()
	g := o.takePassed()
	slices.SortFunc(g, func(x, y gapRef) int { return strings.Compare(x.owner, y.owner) })
	if want := []gapRef{{"a", 1}, {"b", 8}}; !slices.Equal(g, want) {
		t.Fatalf("passed %v, want %v", g, want)
	}
	if g := o.takePassed(); len(g) != 0 {
		t.Fatalf("gaps %v told twice", g)
	}
	for _, i := range []uint64{1, 2, 4} {
		if !o.passedOver("a", i) {
			t.Fatalf("index %d of a not passed over", i)
		}
	}
	o.push(Delivery{Owner: a, Index: 1}, func() {}) // late
	if o.passedOver("a", 1) {
		t.Fatal("a late update still passed over")
	}
}
