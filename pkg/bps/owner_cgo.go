// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build cgo && !gofuzz

package bps

import (
	"errors"
	"strconv"

	"github.com/ethereum/go-ethereum/crypto/secp256k1"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

var (
	errSigSize      = errors.New("bps: soc: signature size")
	errRecoveryCode = errors.New("bps: soc: signature recovery code out of range")
)

// FastRecover reports whether this binary recovers signers with
// libsecp256k1 (built with cgo) rather than bee's pure-Go crypto.Recover.
const FastRecover = true

// recoverOwner is the Ethereum address of the key that signed digest with
// sig, as bee's crypto.Recover and crypto.NewEthereumAddress find it, by
// libsecp256k1. sig is r ‖ s ‖ v with v in 27…34 as bee reads it: 27 + the
// recovery id, plus 4 where the signer marked a compressed key (which does
// not change the key recovered). Like bee, it accepts a high s.
func recoverOwner(sig, digest []byte) ([]byte, error) {
	if len(sig) != swarm.SocSignatureSize {
		return nil, errSigSize
	}
	v := sig[64]
	if v < 27 || v > 34 {
		return nil, errRecoveryCode
	}
	var rsv [swarm.SocSignatureSize]byte
	copy(rsv[:64], sig)
	rsv[64] = (v - 27) & 3
	pub, err := secp256k1.RecoverPubkey(signedHash(digest), rsv[:])
	if err != nil {
		return nil, err
	}
	// pub is 0x04 ‖ X ‖ Y. The key's Ethereum address, as bee's
	// crypto.NewEthereumAddress derives it: the last 20 bytes of
	// keccak256(X ‖ Y).
	return keccak(pub[1:])[12:], nil
}

// signedHash is the hash bee's signer signs for data: EIP-191's personal
// message, keccak256("\x19Ethereum Signed Message:\n" ‖ len(data) ‖ data).
func signedHash(data []byte) []byte {
	return keccak([]byte("\x19Ethereum Signed Message:\n"+strconv.Itoa(len(data))), data)
}
