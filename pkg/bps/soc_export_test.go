// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"

	"github.com/ethersphere/bee/v2/pkg/bmt"
	"github.com/ethersphere/bee/v2/pkg/bmtpool"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// ReadSOC reads data as a SOC on the fast signature path.
func ReadSOC(data []byte) (*soc.SOC, error) { return readSOC(data) }

// ErrReplicaID is ReadSOC's error for a SOC of bee's replica owner that
// soc.Valid refuses.
var ErrReplicaID = errReplicaID

// RecoverOwner is the owner the fast signature path recovers from a SOC
// signature over digest.
func RecoverOwner(sig, digest []byte) ([]byte, error) { return recoverOwner(sig, digest) }

// ValidSOC is validation's verdict on a SOC (address, data): soc.Valid's.
func ValidSOC(address, data []byte) bool {
	s, err := readSOC(data)
	if err != nil {
		return false
	}
	a, err := s.Address()
	return err == nil && bytes.Equal(a.Bytes(), address)
}

// goroutineHashers is bee's goroutine BMT pool, built before any test can
// opt into SIMD: what bee's bmtpool hands out by default.
var goroutineHashers = bmt.NewPool(bmt.NewConf(swarm.BmtBranches, bmtpool.Capacity))

// ReadSOCGoroutineBMT is ReadSOC hashing the wrapped chunk with bee's
// goroutine BMT hasher, as soc.FromChunk does.
func ReadSOCGoroutineBMT(data []byte) (*soc.SOC, error) {
	return readSOCWith(goroutineHashers, data)
}

// WrapChunk hashes span ‖ payload into a content-addressed chunk as
// validation does; WrapChunkGoroutineBMT with bee's goroutine hasher.
func WrapChunk(spanData []byte) (swarm.Chunk, error) { return wrapChunk(chunkHashers, spanData) }

func WrapChunkGoroutineBMT(spanData []byte) (swarm.Chunk, error) {
	return wrapChunk(goroutineHashers, spanData)
}
