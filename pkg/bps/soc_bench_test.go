// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build unix

package bps_test

import (
	"bytes"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
)

// The fast signature path against bee, in the same run: paired reports the
// mean wall time of each and their ratio (bps/bee: the speed-up is its
// inverse); the CPU variants count every thread, which bee's goroutine BMT
// hasher spreads its work over.

// socFixture is the SOC a 1 KB or 4 KB publication carries, as the broker
// checks it, and its signature and signed digest.
func socFixture(b *testing.B, size int) (ch swarm.Chunk, sig, digest []byte) {
	b.Helper()
	sp, msg := validationFixture(b, size)
	ch = socChunk(b, sp, msg)
	s, err := soc.FromChunk(ch)
	if err != nil {
		b.Fatal(err)
	}
	digest, err = crypto.LegacyKeccak256(append(bytes.Clone(s.ID()), s.WrappedChunk().Address().Bytes()...))
	if err != nil {
		b.Fatal(err)
	}
	if !bps.ValidSOC(ch.Address().Bytes(), ch.Data()) {
		b.Fatal("fixture not valid on the fast path")
	}
	return ch, s.Signature(), digest
}

// beeOwner is bee's recovery of a SOC owner: crypto.Recover and the
// address of the key.
func beeOwner(sig, digest []byte) {
	pub, err := crypto.Recover(sig, digest)
	if err == nil {
		_, _ = crypto.NewEthereumAddress(*pub)
	}
}

// BenchmarkValidateSOC: validation's SOC check (the fast signature path:
// read, recover, address) against bee's soc.Valid on the same chunk.
func BenchmarkValidateSOC(b *testing.B) {
	b.Logf("libsecp256k1: %v", bps.FastRecover)
	for _, p := range benchPayloads {
		ch, _, _ := socFixture(b, p.size)
		addr, data := ch.Address().Bytes(), ch.Data()
		b.Run("payload="+p.name, func(b *testing.B) {
			paired(b, func() { bps.ValidSOC(addr, data) }, func() { soc.Valid(ch) })
		})
		b.Run("payload="+p.name+"/cpu=bps", func(b *testing.B) {
			cpuLoop(b, func() { bps.ValidSOC(addr, data) })
		})
		b.Run("payload="+p.name+"/cpu=soc.Valid", func(b *testing.B) {
			cpuLoop(b, func() { soc.Valid(ch) })
		})
	}
}

// BenchmarkValidateSOCGoroutineBMT is BenchmarkValidateSOC with the wrapped
// chunk hashed by bee's goroutine BMT hasher, as soc.Valid hashes it: what
// the signature path alone gains.
func BenchmarkValidateSOCGoroutineBMT(b *testing.B) {
	for _, p := range benchPayloads {
		ch, _, _ := socFixture(b, p.size)
		check := func() {
			s, err := bps.ReadSOCGoroutineBMT(ch.Data())
			if err == nil {
				_, _ = s.Address()
			}
		}
		b.Run("payload="+p.name, func(b *testing.B) {
			paired(b, check, func() { soc.Valid(ch) })
		})
		b.Run("payload="+p.name+"/cpu=bps", func(b *testing.B) { cpuLoop(b, check) })
	}
}

// BenchmarkRecover: the owner of a SOC signature, recovered on the fast
// path against bee's crypto.Recover.
func BenchmarkRecover(b *testing.B) {
	_, sig, digest := socFixture(b, 1<<10)
	b.Run("paired", func(b *testing.B) {
		paired(b, func() { _, _ = bps.RecoverOwner(sig, digest) }, func() { beeOwner(sig, digest) })
	})
	b.Run("cpu=bps", func(b *testing.B) { cpuLoop(b, func() { _, _ = bps.RecoverOwner(sig, digest) }) })
	b.Run("cpu=bee", func(b *testing.B) { cpuLoop(b, func() { beeOwner(sig, digest) }) })
}

// BenchmarkValidateBMT: the wrapped chunk's BMT hash with bee's SIMD hasher
// (validation's) against cac.NewWithDataSpan with bee's default pool (the
// goroutine hasher, soc.Valid's).
func BenchmarkValidateBMT(b *testing.B) {
	for _, p := range benchPayloads {
		ch, _, _ := socFixture(b, p.size)
		spanData := ch.Data()[swarm.HashSize+swarm.SocSignatureSize:]
		b.Run("payload="+p.name, func(b *testing.B) {
			paired(b, func() { _, _ = bps.WrapChunk(spanData) }, func() { _, _ = cac.NewWithDataSpan(spanData) })
		})
		b.Run("payload="+p.name+"/cpu=simd", func(b *testing.B) {
			cpuLoop(b, func() { _, _ = bps.WrapChunk(spanData) })
		})
		b.Run("payload="+p.name+"/cpu=goroutine", func(b *testing.B) {
			cpuLoop(b, func() { _, _ = bps.WrapChunkGoroutineBMT(spanData) })
		})
	}
}
