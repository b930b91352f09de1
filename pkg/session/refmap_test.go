// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"slices"
	"testing"
)

// TestRefMap: one value per key while referenced; the last release frees
// it; a dropped value lives on for its holders while the key gets a new
// one.
func TestRefMap(t *testing.T) {
	t.Parallel()
	type v struct{ n int }
	m := newRefMap[*v]()
	made := 0
	mk := func() *v { made++; return &v{made} }

	a, created := m.acquire("k", mk)
	if !created || a.n != 1 {
		t.Fatalf("first acquire: %v created %v", a, created)
	}
	if b, created := m.acquire("k", mk); created || b != a {
		t.Fatalf("second acquire: %v created %v, want the first value", b, created)
	}
	if got, ok := m.hold("k", func(*v) bool { return false }); ok || got != nil {
		t.Fatal("hold took an unusable value")
	}
	if got, ok := m.hold("k", func(*v) bool { return true }); !ok || got != a {
		t.Fatal("hold missed the value")
	}
	if m.release("k", a) || m.release("k", a) {
		t.Fatal("released as last with references left")
	}

	m.drop("k", a) // it failed: the next acquire makes a new one
	c, created := m.acquire("k", mk)
	if !created || c == a {
		t.Fatal("acquire after drop returned the dropped value")
	}
	if got := m.values(); !slices.Equal(got, []*v{c}) {
		t.Fatalf("values %v, want the new one", got)
	}
	if !m.release("k", a) {
		t.Fatal("the dropped value's last release was not the last")
	}
	if got, ok := m.lookup("k"); !ok || got != c {
		t.Fatal("releasing the dropped value removed the new one")
	}
	if !m.release("k", c) {
		t.Fatal("the last release was not the last")
	}
	if _, ok := m.lookup("k"); ok || len(m.refs) != 0 {
		t.Fatalf("left behind: %v %v", m.byKey, m.refs)
	}
}
