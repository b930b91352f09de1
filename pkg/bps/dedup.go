// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/ethersphere/bps/pkg/bps/pb"
)

// FrameKey identifies a delivered frame byte for byte, independently of
// its encoding: sha256(byte(kind) ‖ challenge ‖ uint64BE(index) ‖ soc), a
// microsecond against a signature recovery's tens. It is the one dedup key
// of deliveries: a node takes each frame once whichever parent brings it,
// the API's rooms hand it once to each session, an echo filter knows a
// session's own messages by it, and lazy push announces it. (Not the chunk
// address alone: under ANCHOR every message has the same one.)
func FrameKey(b *pb.Broadcast) [32]byte {
	h := sha256.New()
	h.Write([]byte{byte(b.Kind)})
	h.Write(b.Challenge)
	h.Write(binary.BigEndian.AppendUint64(nil, b.Index))
	h.Write(b.Soc)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Window is a bounded dedup set over recent chunk identifiers, evicting the
// oldest (SWIP-60: the horizon is implementation-defined and bounded). It
// grows as it fills, to at most size × (32 bytes + map overhead). Not safe
// for concurrent use; its owner guards it.
type Window struct {
	size int
	ring growRing[[32]byte]
	set  map[[32]byte]struct{}
}

// NewWindow is an empty window of at most size identifiers.
func NewWindow(size int) *Window {
	return &Window{size: size, set: make(map[[32]byte]struct{})}
}

// Contains reports whether k is in the window.
func (w *Window) Contains(k [32]byte) bool {
	_, seen := w.set[k]
	return seen
}

// Add records k and reports whether it was new.
func (w *Window) Add(k [32]byte) bool {
	if _, seen := w.set[k]; seen {
		return false
	}
	w.ring.put(k, w.size, func(old *[32]byte) { delete(w.set, *old) })
	w.set[k] = struct{}{}
	return true
}
