// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"encoding/hex"
	"fmt"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// Sizes fixed by the wire.
const (
	TopicSize   = 32
	AddressSize = 20 // an Ethereum address
)

// Spec is a validated cohort spec together with its canonical serialisation,
// which is the cohort's identity at a broker.
type Spec struct {
	Topic   []byte // 32 bytes
	Binding pb.TopicBinding
	Admin   []byte // 20 bytes

	canonical []byte // Marshal(spec): known fields in number order, unset not emitted
	key       string // string(canonical), the registry key
}

// NewFeedSpec is the SWIP-74 live-stream spec {topic, FEED_TOPIC, admin}.
func NewFeedSpec(topic, admin []byte) (*Spec, error) {
	sp, status := specFromPB(&pb.CohortSpec{Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin})
	if status != pb.Status_OK {
		return nil, fmt.Errorf("bps: invalid feed spec (topic %d bytes, admin %d bytes)", len(topic), len(admin))
	}
	return sp, nil
}

// specFromPB validates a wire spec and canonicalises it. It answers REJECTED
// for any value outside what this broker serves (SWIP-74: FEED_TOPIC with a
// 20-byte admin; the SWIP-60 parameters are not served yet) and drops fields
// it does not define.
func specFromPB(c *pb.CohortSpec) (*Spec, pb.Status) {
	if c == nil || len(c.Topic) != TopicSize || len(c.Admin) != AddressSize {
		return nil, pb.Status_REJECTED
	}
	if c.Binding != pb.TopicBinding_FEED_TOPIC {
		return nil, pb.Status_REJECTED
	}
	if c.Publishers != pb.PublisherRegime_PUBLISHER_REGIME_UNSPECIFIED || c.History || c.Closed {
		return nil, pb.Status_REJECTED
	}
	sp := &Spec{
		Topic:   bytes.Clone(c.Topic),
		Binding: c.Binding,
		Admin:   bytes.Clone(c.Admin),
	}
	sp.canonical = mustMarshal(sp.PB())
	sp.key = string(sp.canonical)
	return sp, pb.Status_OK
}

// PB is the wire form of the spec, with only the fields it defines.
func (sp *Spec) PB() *pb.CohortSpec {
	return &pb.CohortSpec{Topic: sp.Topic, Binding: sp.Binding, Admin: sp.Admin}
}

// Canonical is the spec's canonical serialisation.
func (sp *Spec) Canonical() []byte { return bytes.Clone(sp.canonical) }

// String is a short printable name: the first bytes of keccak256(canonical).
func (sp *Spec) String() string {
	return hex.EncodeToString(keccak(sp.canonical)[:8])
}

// mustMarshal marshals a message deterministically. proto-go emits known
// fields in field-number order and skips unset scalars, which is the canonical
// serialisation; the message is built here, so it cannot fail.
func mustMarshal(m proto.Message) []byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(fmt.Sprintf("bps: marshal %T: %v", m, err))
	}
	return b
}

// keccak is bee's keccak256; it cannot fail.
func keccak(parts ...[]byte) []byte {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	buf := make([]byte, 0, n)
	for _, p := range parts {
		buf = append(buf, p...)
	}
	h, _ := crypto.LegacyKeccak256(buf)
	return h
}

// challenge derives S for addr on the cohort keyed by sp (SWIP-74 Handshake):
//
//	S_s = keccak256(Marshal(spec)); S_c = keccak256(S_C ‖ S_s); S = keccak256(S_C ‖ S_c ‖ addr)
//
// Nothing is stored: it is recomputed whenever a claim arrives.
func (s *Service) challenge(sp *Spec, addr []byte) []byte {
	ss := keccak(sp.canonical)
	sc := keccak(s.secret[:], ss)
	return keccak(s.secret[:], sc, addr)
}
