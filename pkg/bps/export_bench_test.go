// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"

	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Validate runs the broker's validation of one publication against cursor
// and reports the update's index and whether it was accepted.
// Check validates b as a broker would on a stream publishing as addr
// under challenge, against cursor (the admin's).
func Check(sp *Spec, b *pb.Broadcast, addr, challenge []byte, cursor uint64) (uint64, bool) {
	pub, v := check(sp, b, &sender{addr: addr, challenge: challenge, admin: bytes.Equal(addr, sp.Admin)}, staticCursor(cursor))
	return pub.index, v == accepted
}

type staticCursor uint64

func (staticCursor) isPublisher([]byte) bool    { return true }
func (c staticCursor) feedCursor([]byte) uint64 { return uint64(c) }
func (staticCursor) serviceNext() uint64        { return 0 }

func FullWindow(size int) any {
	w := NewWindow(size)
	for i := range size + 1 {
		var k [32]byte
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		w.Add(k)
	}
	return w
}
