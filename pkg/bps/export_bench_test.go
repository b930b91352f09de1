// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import "github.com/ethersphere/bps/pkg/bps/pb"

// Validate runs the broker's validation of one publication against cursor
// and reports the update's index and whether it was accepted.
func Validate(sp *Spec, m *pb.Message, cursor uint64) (uint64, bool) {
	n, v := validate(sp, m, cursor)
	return n, v == accepted
}

// VerifyClaim runs the broker's verification of a claim over challenge.
func (s *Service) VerifyClaim(challenge []byte, c *pb.Claim) error {
	return s.verifyClaim(challenge, c)
}

// FullWindow is a dedup window of size filled to its bound with distinct
// identifiers.
func FullWindow(size int) any {
	w := NewWindow(size)
	for i := range size + 1 {
		var k [32]byte
		k[0], k[1], k[2] = byte(i), byte(i>>8), byte(i>>16)
		w.Add(k)
	}
	return w
}
