// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/ethersphere/bee/v2/pkg/bmt"
	"github.com/ethersphere/bee/v2/pkg/bmtpool"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// The fast signature path. Validating a publication is bee's soc.FromChunk
// followed by soc.CreateAddress; FromChunk spends four fifths of its time
// recovering the signer in pure Go, and most of the rest hashing the
// wrapped chunk with bee's goroutine BMT hasher. readSOC reads a SOC the
// same way from the same bee pieces, with two exchanges:
//
//   - the signer is recovered by libsecp256k1 (go-ethereum's cgo binding)
//     when the binary is built with cgo, by bee's crypto.Recover otherwise
//     (owner_cgo.go, owner_nocgo.go);
//   - the wrapped chunk is hashed by bee's SIMD BMT hasher where the CPU has
//     it (AVX2 or AVX-512 on linux/amd64), bee's goroutine hasher elsewhere.
//
// It adds the one rule soc.Valid has beyond FromChunk and the SOC address:
// the dispersed replicas' owner's (errReplicaID). TestRecoverDifferential
// and FuzzRecoverSOC hold it to FromChunk's verdict and owner, and to
// soc.Valid's verdict, on valid, malformed and hostile chunks.

var (
	errSOCSize = errors.New("bps: soc: data size out of range")
	// errReplicaID is a SOC of swarm.ReplicasOwner whose id is not a
	// replica's. bee disperses replicas of a chunk as SOCs of that one
	// owner, whose key is public (pkg/replicas); so that the key cannot
	// forge anything else, soc.Valid takes a SOC of that owner only where
	// its id is the wrapped chunk's address but for the first byte, which
	// tells the replicas apart.
	errReplicaID = errors.New("bps: soc: the replica owner's SOC does not carry its chunk's address in its id")
)

// chunkHashers is the BMT pool readSOC hashes wrapped chunks with: bee's
// SIMD pool where bee has one for this CPU, its goroutine pool otherwise.
// bee selects the SIMD pool through a process-wide opt-in read when a pool
// is built (a bee node's --use-simd-hashing); it is taken here for this pool
// alone and restored at once, so bee's own bmtpool keeps the node's choice.
// Built at package load, like bmtpool's, so that no synctest bubble owns its
// channel.
var chunkHashers = simdPool()

func simdPool() bmt.Pool {
	optIn := bmt.SIMDOptIn
	defer func() { bmt.SIMDOptIn = optIn }()
	bmt.SetSIMDOptIn(true)
	return bmt.NewPool(bmt.NewConf(swarm.BmtBranches, bmtpool.Capacity))
}

// readSOC reads data as a single-owner chunk — id ‖ signature ‖ span ‖
// payload — as bee's soc.FromChunk does, recovering its owner with
// recoverOwner and hashing its wrapped chunk with chunkHashers, and refuses
// a SOC of the replica owner that soc.Valid refuses (errReplicaID). The SOC
// it returns has an id, signature, owner and wrapped chunk but no owner
// public key. data must not change while the SOC is in use: id, signature
// and wrapped chunk are slices of it.
func readSOC(data []byte) (*soc.SOC, error) { return readSOCWith(chunkHashers, data) }

// readSOCWith is readSOC hashing with hashers.
func readSOCWith(hashers bmt.Pool, data []byte) (*soc.SOC, error) {
	if len(data) < swarm.SocMinChunkSize || len(data) > swarm.SocMaxChunkSize {
		return nil, errSOCSize
	}
	const sigEnd = idSize + swarm.SocSignatureSize
	id, sig := data[:idSize], data[idSize:sigEnd]
	wrapped, err := wrapChunk(hashers, data[sigEnd:])
	if err != nil {
		return nil, err
	}
	// What the owner signed: keccak256(id ‖ wrapped chunk address).
	owner, err := recoverOwner(sig, keccak(id, wrapped.Address().Bytes()))
	if err != nil {
		return nil, err
	}
	if bytes.Equal(owner, swarm.ReplicasOwner) && !bytes.Equal(id[1:], wrapped.Address().Bytes()[1:]) {
		return nil, errReplicaID
	}
	return soc.NewSigned(id, wrapped, owner, sig)
}

// wrapChunk is the content-addressed chunk of spanData (span ‖ payload,
// within bee's bounds, which readSOC checked), hashed with a hasher of
// hashers.
func wrapChunk(hashers bmt.Pool, spanData []byte) (swarm.Chunk, error) {
	h := hashers.Get()
	defer hashers.Put(h)
	h.SetHeader(spanData[:swarm.SpanSize])
	if _, err := h.Write(spanData[swarm.SpanSize:]); err != nil {
		return nil, fmt.Errorf("bps: soc: hash wrapped chunk: %w", err)
	}
	return swarm.NewChunk(swarm.NewAddress(h.Sum(nil)), spanData), nil
}
