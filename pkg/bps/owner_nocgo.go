// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build !cgo || gofuzz

package bps

import "github.com/ethersphere/bee/v2/pkg/crypto"

// FastRecover reports whether this binary recovers signers with
// libsecp256k1 (built with cgo) rather than bee's pure-Go crypto.Recover.
const FastRecover = false

// recoverOwner is the Ethereum address of the key that signed digest with
// sig: bee's crypto.Recover and crypto.NewEthereumAddress, in pure Go.
func recoverOwner(sig, digest []byte) ([]byte, error) {
	pub, err := crypto.Recover(sig, digest)
	if err != nil {
		return nil, err
	}
	return crypto.NewEthereumAddress(*pub)
}
