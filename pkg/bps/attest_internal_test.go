// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"encoding/binary"
	"testing"
)

// TestCarryBounded: a stream carries a roster's worth of owners and the
// admin; one more, after rosters changed, forgets the owner it carried
// longest rather than cutting the stream.
func TestCarryBounded(t *testing.T) {
	addr := func(i int) []byte {
		a := make([]byte, AddressSize)
		binary.BigEndian.PutUint32(a, uint32(i))
		return a
	}
	var m member
	for i := range maxCarried + 1 {
		m.carry(addr(i))
	}
	if len(m.carries) != maxCarried || m.carrying(addr(0)) || !m.carrying(addr(1)) || !m.carrying(addr(maxCarried)) {
		t.Fatalf("%d carried, first %v, newest %v; want %d, the first forgotten", len(m.carries), m.carrying(addr(0)), m.carrying(addr(maxCarried)), maxCarried)
	}
	if maxCarried < maxRoster+1 {
		t.Fatalf("a stream carries %d owners, fewer than a roster's %d and the admin", maxCarried, maxRoster)
	}
}
