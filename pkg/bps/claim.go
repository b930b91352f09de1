// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"crypto/rand"
	"fmt"
)

// Signer signs data in bee's SOC convention (EIP-191 prefixed keccak256,
// r ‖ s ‖ v with v 27 or 28). bee's crypto.Signer satisfies it.
type Signer interface {
	Sign(data []byte) ([]byte, error)
}

// challengeSize is the length of a challenge: 32 random bytes.
const challengeSize = 32

// newChallenge draws a stream's challenge (SWIP-74 Rev 8): 32 random bytes
// for every stream, held with the stream, never persisted or reused. Every
// chunk a stream publishes is signed under a session feed salted with it,
// so that nothing signed for one stream is valid on another.
func newChallenge() []byte {
	c := make([]byte, challengeSize)
	if _, err := rand.Read(c); err != nil {
		panic(fmt.Sprintf("bps: draw a challenge: %v", err)) // crypto/rand does not fail on Linux
	}
	return c
}
