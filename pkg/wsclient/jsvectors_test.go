// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package wsclient_test

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/crypto"
)

// updateJSVectors rewrites the JavaScript client's signature vectors from
// bee's signer: go test ./pkg/wsclient -run TestJSSignatureVectors -update-js-vectors
var updateJSVectors = flag.Bool("update-js-vectors", false, "rewrite js/test/unit/signatures.json from bee's signer")

const jsVectors = "../../js/test/unit/signatures.json"

// jsVector is one signature by bee's signer: what the JavaScript client
// (js/src/soc.ts, signWithKey) must sign byte for byte for the same key and
// data: Signature is bee's signer's over keccak256(Data).
type jsVector struct {
	Key       string `json:"key"`
	Address   string `json:"address"`
	Data      string `json:"data"`
	Signature string `json:"signature"`
}

// TestJSSignatureVectors: the vectors the JavaScript client's unit tests
// compare its signatures with (js/test/unit/signatures.json) are bee's
// signer's, for keys and data made from a fixed seed: each signature is
// what crypto.NewDefaultSigner(key).Sign(keccak256(data)) gives (EIP-191,
// RFC 6979 nonce, low s, v = 27 + recovery id), as bee signs a SOC digest.
func TestJSSignatureVectors(t *testing.T) {
	t.Parallel()
	var want []jsVector
	for i := 0; i < 32; i++ {
		seed, err := crypto.LegacyKeccak256([]byte(fmt.Sprintf("bps js vector key %d", i)))
		if err != nil {
			t.Fatal(err)
		}
		key, err := crypto.DecodeSecp256k1PrivateKey(seed)
		if err != nil {
			t.Fatal(err)
		}
		// Data of every length from 0 to 95 bytes, among them a SOC digest's
		// preimage (64: id ‖ wrapped address).
		data := bytes.Repeat([]byte{byte(i)}, (i*37)%96)
		signer := crypto.NewDefaultSigner(key)
		// A client signs keccak256 of what it is given (a SOC's id ‖ wrapped
		// address), as bee signs a SOC's digest.
		digest, err := crypto.LegacyKeccak256(data)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := signer.Sign(digest)
		if err != nil {
			t.Fatal(err)
		}
		addr, err := signer.EthereumAddress()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, jsVector{Key: hex.EncodeToString(seed), Address: hex.EncodeToString(addr.Bytes()), Data: hex.EncodeToString(data), Signature: hex.EncodeToString(sig)})
	}
	out, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, '\n')
	if *updateJSVectors {
		if err := os.WriteFile(jsVectors, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(jsVectors)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, out) {
		t.Fatalf("%s is not what bee's signer signs: rerun with -update-js-vectors", jsVectors)
	}
}
