// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"errors"
	"fmt"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// What a client signs (SWIP-74 Rev 8, SWIP-60 rev 14). The node never
// signs for anyone: a publisher's client signs every chunk under its
// stream's session feed, and — for storage (SWIP-65) — the same payload
// under the channel's own id. These helpers build the chunks with bee's
// cac and soc packages and a Signer, which may be a local key or a remote
// one (a wallet, a dApp behind the bridge).

// SignSOC makes the single-owner chunk with id wrapping payload, signed by
// signer at owner's address: the signature covers keccak256(id ‖ wrapped
// chunk address) in bee's SOC convention. It returns the chunk's data as on
// the wire (id ‖ signature ‖ span ‖ payload) and its address.
func SignSOC(signer Signer, owner, id, payload []byte) (data []byte, addr swarm.Address, err error) {
	wrapped, err := cac.New(payload)
	if err != nil {
		return nil, swarm.ZeroAddress, fmt.Errorf("wrap payload: %w", err)
	}
	sig, err := signer.Sign(keccak(id, wrapped.Address().Bytes()))
	if err != nil {
		return nil, swarm.ZeroAddress, fmt.Errorf("sign chunk: %w", err)
	}
	s, err := soc.NewSigned(id, wrapped, owner, sig)
	if err != nil {
		return nil, swarm.ZeroAddress, fmt.Errorf("sign chunk: %w", err)
	}
	ch, err := s.Chunk()
	if err != nil {
		return nil, swarm.ZeroAddress, fmt.Errorf("sign chunk: %w", err)
	}
	return ch.Data(), ch.Address(), nil
}

// addressOf is the 20-byte address of a bee signer.
func addressOf(signer crypto.Signer) ([]byte, error) {
	a, err := signer.EthereumAddress()
	if err != nil {
		return nil, err
	}
	return a.Bytes(), nil
}

// errEOSPayload refuses an EOS or AUTH with a payload.
var errEOSPayload = errors.New("bps: AUTH and EOS chunks are empty")

// Chunk is the Broadcast of kind at index for the stream whose challenge
// is challenge in cohort sp, wrapping payload, signed by signer for owner
// (SWIP-74 Rev 8): under explicit authorship and ALL a session-feed chunk;
// under implicit FEED_TOPIC the channel's own update, its index in the
// frame and no challenge. AUTH and EOS take no payload; a ROSTER's is
// RosterPayload's.
func (sp *Spec) Chunk(signer Signer, owner []byte, kind pb.Kind, challenge []byte, index uint64, payload []byte) (*pb.Broadcast, error) {
	if (kind == pb.Kind_AUTH || kind == pb.Kind_EOS) && len(payload) > 0 {
		return nil, errEOSPayload
	}
	b := &pb.Broadcast{Kind: kind, Index: index}
	var id []byte
	switch {
	case !sp.Implicit():
		if len(challenge) != challengeSize {
			return nil, fmt.Errorf("bps: a %d-byte challenge", len(challenge))
		}
		id, b.Challenge = SessionID(kind, sp.Topic, challenge, index), challenge
	case sp.Binding == pb.TopicBinding_FEED_TOPIC && kind == pb.Kind_DATA:
		id = FeedID(sp.Topic, index)
	default:
		return nil, fmt.Errorf("bps: no session feed under implicit %s: sign the binding's own SOC (SignSOC)", sp.Binding)
	}
	data, _, err := SignSOC(signer, owner, id, payload)
	if err != nil {
		return nil, err
	}
	b.Soc = data
	return b, nil
}

// StorageUpdate is the SWIP-65 update for storage of a live update: the
// same payload under the channel's own id keccak256(topic ‖ index), signed
// by the publisher's client; the node uploads it as it is.
func StorageUpdate(signer Signer, owner, topic []byte, index uint64, payload []byte) (data []byte, addr swarm.Address, err error) {
	return SignSOC(signer, owner, FeedID(topic, index), payload)
}

// RosterPayload is a ROSTER chunk's payload naming publishers (SWIP-60
// rev 14: the full set as of that index; the admin is implied).
func RosterPayload(publishers [][]byte) ([]byte, error) {
	for _, p := range publishers {
		if len(p) != AddressSize {
			return nil, fmt.Errorf("bps: a roster entry of %d bytes", len(p))
		}
	}
	return proto.Marshal(&pb.Roster{Publishers: publishers})
}

// LocalSigner adapts bee's crypto.Signer (a local key) to what a
// publisher signs with: the Signer and its address.
func LocalSigner(signer crypto.Signer) (Signer, []byte, error) {
	addr, err := addressOf(signer)
	return signer, addr, err
}
