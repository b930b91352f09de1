// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/pot"
)

// The pot profile (SWIP-65) on the publishing side: update i's payload is
// the whirl-only pot node over every element published so far (pkg/pot),
// pinning ⟨key, value⟩, its forks the wrapped chunks of earlier updates.
// The publisher's key signs the SOC over that payload, so whoever holds the
// key builds the node: PotNext for a publisher in Go (the CLI, bps-sim,
// tests), the dApp itself over the WebSocket API — the node checks what the
// dApp sends with PotCheck. Nothing else changes: an update is an ordinary
// feed update, published, persisted and verified as any other.

// ErrNotPotStep: a payload that is not the pot node its feed's previous
// update's payload makes next.
var ErrNotPotStep = errors.New("bps: not the next node of the feed's pot")

// PotNext is the payload of a feed's next update with the pot profile on:
// the node pinning ⟨key, value⟩ over the pot whose top is prev, the payload
// of the feed's previous update (nil: the feed's first update). key must be
// greater than the previous key; pot.TimeKey(time.Now(), previous key) is
// the default (a timestamp in milliseconds).
func PotNext(prev []byte, key uint64, value []byte) ([]byte, error) {
	if prev == nil {
		n, err := pot.New(key, value)
		if err != nil {
			return nil, err
		}
		return n.Bytes(), nil
	}
	top, ref, err := potTop(prev)
	if err != nil {
		return nil, fmt.Errorf("previous update: %w", err)
	}
	n, err := pot.Insert(top, ref, key, value)
	if err != nil {
		return nil, err
	}
	return n.Bytes(), nil
}

// PotCheck reports whether payload is the node PotNext(prev, its key, its
// value) makes: the check a publishing node makes, with the pot profile
// on, of each update a dApp signed, against the previous update of the
// session (the whirl is deterministic, so an honest node is that insert
// byte for byte). A nil prev (a session's first update, whose predecessor
// the node has not seen) checks the node's serialization only.
func PotCheck(prev, payload []byte) error {
	n, err := pot.Decode(payload)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotPotStep, err)
	}
	if prev == nil {
		return nil
	}
	want, err := PotNext(prev, n.Key(), n.Value())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNotPotStep, err)
	}
	if !bytes.Equal(want, payload) {
		return fmt.Errorf("%w: its forks are not the previous node's below their proximity order and the previous node at it", ErrNotPotStep)
	}
	return nil
}

// potTop decodes an update's payload as the top of its pot, with the
// reference its successor forks to: the address of the update's wrapped
// chunk, span ‖ payload hashed as readSOC hashes a wrapped chunk (bee's BMT,
// SIMD where the CPU has it; the same address as bee's cac.New).
func potTop(payload []byte) (*pot.Node, swarm.Address, error) {
	n, err := pot.Decode(payload)
	if err != nil {
		return nil, swarm.ZeroAddress, err
	}
	spanData := make([]byte, swarm.SpanSize+len(payload))
	binary.LittleEndian.PutUint64(spanData, uint64(len(payload)))
	copy(spanData[swarm.SpanSize:], payload)
	ch, err := wrapChunk(chunkHashers, spanData)
	if err != nil {
		return nil, swarm.ZeroAddress, err
	}
	return n, ch.Address(), nil
}

// Pot reads the delivery's payload as a pot node, with its wrapped chunk's
// address; false if it is none (a feed without the profile).
func (d Delivery) Pot() (*pot.Node, swarm.Address, bool) {
	if len(d.Data) < socHeaderSize || binary.LittleEndian.Uint64(d.Span()) != uint64(len(d.Payload())) {
		return nil, swarm.ZeroAddress, false
	}
	n, ref, err := potTop(d.Payload())
	return n, ref, err == nil
}

// PotDelivery is update index of owner's feed recovered by pot descent:
// the stored form of a channel update (the channel's id in the id slot)
// around its wrapped chunk — span ‖ payload, the node's canonical bytes, which is
// what the chunk held — with no signature (zero bytes): descent does not
// retrieve the SOC.
func PotDelivery(sp *Spec, owner []byte, index uint64, payload []byte) (Delivery, error) {
	addr, err := soc.CreateAddress(FeedID(sp.Topic, index), owner)
	if err != nil {
		return Delivery{}, err
	}
	data := make([]byte, socHeaderSize+len(payload))
	copy(data, FeedID(sp.Topic, index))
	binary.LittleEndian.PutUint64(data[idSize+swarm.SocSignatureSize:socHeaderSize], uint64(len(payload)))
	copy(data[socHeaderSize:], payload)
	return Delivery{Kind: pb.Kind_DATA, Index: index, Address: addr, Owner: owner, Data: data, Recovered: true}, nil
}
