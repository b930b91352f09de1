// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/bps"
	bpspb "github.com/ethersphere/bps/pkg/bps/pb"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
	pb "github.com/libp2p/go-libp2p-pubsub/pb"
	ic "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"google.golang.org/protobuf/proto"
)

// calibrate measures the CPU time of the one signature check each system
// makes per delivery, on a 1 KB message, in blocks that alternate between
// the two so that the machine's load falls on both alike:
//   - BPS: Spec.Verify, the check a subscriber makes on every delivery
//     (SOC shape, BMT hash of the payload, secp256k1 recovery, owner);
//   - gossipsub: what its default StrictSign policy does for every new
//     message (sign.go's verifyMessageSignature): the public key taken
//     from the sender's peer id, the message re-marshalled without its
//     signature, an Ed25519 verification.
func calibrate(iterations int) (bpsCheck, gossipCheck time.Duration, err error) {
	payload := newPayload(1024, 0)

	key, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		return 0, 0, err
	}
	signer := crypto.NewDefaultSigner(key)
	admin, err := signer.EthereumAddress()
	if err != nil {
		return 0, 0, err
	}
	topic, err := crypto.LegacyKeccak256([]byte("calibrate"))
	if err != nil {
		return 0, 0, err
	}
	spec, err := bps.NewFeedSpec(topic, admin.Bytes())
	if err != nil {
		return 0, 0, err
	}
	challenge := make([]byte, 32) // a stream's challenge (SWIP-74 Rev 8): the update is signed under it
	if _, err := rand.Read(challenge); err != nil {
		return 0, 0, err
	}
	update, err := spec.Chunk(signer, admin.Bytes(), bpspb.Kind_DATA, challenge, 0, payload)
	if err != nil {
		return 0, 0, err
	}

	sk, pk, err := ic.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return 0, 0, err
	}
	id, err := peer.IDFromPublicKey(pk)
	if err != nil {
		return 0, 0, err
	}
	msg := &pb.Message{From: []byte(id), Data: payload, Seqno: make([]byte, 8), Topic: proto.String(gossipTopic)}
	signed, err := proto.Marshal(msg)
	if err != nil {
		return 0, 0, err
	}
	if msg.Signature, err = sk.Sign(append([]byte(pubsub.SignPrefix), signed...)); err != nil {
		return 0, 0, err
	}
	gossipVerify := func() error {
		pub, err := peer.ID(msg.From).ExtractPublicKey()
		if err != nil {
			return err
		}
		xm := proto.CloneOf(msg)
		xm.Signature = nil
		b, err := proto.Marshal(xm)
		if err != nil {
			return err
		}
		ok, err := pub.Verify(append([]byte(pubsub.SignPrefix), b...), msg.Signature)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("ed25519: bad signature")
		}
		return nil
	}

	const block = 20
	var b, g time.Duration
	for done := 0; done < iterations; done += block {
		t0 := cpuTime()
		for range block {
			if err := spec.Verify(update, admin.Bytes(), challenge); err != nil {
				return 0, 0, fmt.Errorf("bps verify: %w", err)
			}
		}
		t1 := cpuTime()
		for range block {
			if err := gossipVerify(); err != nil {
				return 0, 0, fmt.Errorf("gossipsub verify: %w", err)
			}
		}
		t2 := cpuTime()
		b, g = b+t1-t0, g+t2-t1
	}
	n := time.Duration((iterations + block - 1) / block * block)
	return b / n, g / n, nil
}
