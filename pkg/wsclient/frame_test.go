// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package wsclient_test

import (
	"testing"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/wsclient"
)

// TestGSOCFrame checks that a frame signed ahead of time is the GSOC
// client's frame: with its id in front, a valid SOC at the session's topic.
func TestGSOCFrame(t *testing.T) {
	key, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(key)
	owner, err := signer.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	id := make([]byte, swarm.HashSize)
	id[0] = 7
	frame, err := wsclient.GSOCFrame(signer, id, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	if len(frame) != swarm.SocSignatureSize+swarm.SpanSize+5 {
		t.Fatalf("frame of %d bytes, want signature ‖ span ‖ payload", len(frame))
	}
	topic, err := wsclient.GSOCAddress(id, owner.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !soc.Valid(swarm.NewChunk(swarm.NewAddress(topic), append(append([]byte{}, id...), frame...))) {
		t.Fatal("id ‖ frame is not a valid SOC at the GSOC address")
	}
}
