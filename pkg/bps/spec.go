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
	Topic      []byte // 32 bytes, meaning per binding
	Binding    pb.TopicBinding
	Admin      []byte // 20 bytes; absent: implicit authorship
	Publishers pb.PublisherRegime
	History    bool
	Closed     bool

	canonical []byte // Marshal(spec): known fields in number order, unset not emitted
	key       string // string(canonical), the registry key
	name      string // String(), computed once
}

// NewFeedSpec is the SWIP-74 live-stream spec {topic, FEED_TOPIC, admin}.
func NewFeedSpec(topic, admin []byte) (*Spec, error) {
	return NewSpec(&pb.CohortSpec{Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin})
}

// NewAnchorSpec is the implicit ANCHOR spec of a GSOC: every message is a
// single-owner chunk at socAddress, signed by whoever holds its key.
func NewAnchorSpec(socAddress []byte) (*Spec, error) {
	return NewSpec(&pb.CohortSpec{Topic: socAddress, Binding: pb.TopicBinding_ANCHOR})
}

// NewSpec validates a spec as this node serves it.
func NewSpec(c *pb.CohortSpec) (*Spec, error) {
	sp, status := specFromPB(c)
	if status != pb.Status_OK {
		return nil, fmt.Errorf("bps: spec not served: %s", describeSpec(c))
	}
	return sp, nil
}

func describeSpec(c *pb.CohortSpec) string {
	if c == nil {
		return "no spec"
	}
	return fmt.Sprintf("binding %s, topic %d bytes, admin %d bytes, publishers %s, history %t, closed %t",
		c.Binding, len(c.Topic), len(c.Admin), c.Publishers, c.History, c.Closed)
}

// specFromPB validates a wire spec and canonicalises it, dropping fields the
// wire does not define. It serves SWIP-60's five configurations — jam
// (closed), spectator-jam and live-stream (an admin), group chat (ALL with
// MNEMONIC) and implicit (no admin) — over all five bindings, and answers
// REJECTED for any other value: an unset or unknown binding, a wrong-length
// topic or admin, ALL without an admin or with another binding, closed under
// ALL or implicit authorship, and history, which this broker does not
// deliver (SWIP-60 lets a singlehop broker refuse it).
func specFromPB(c *pb.CohortSpec) (*Spec, pb.Status) {
	if c == nil || len(c.Topic) != TopicSize || (len(c.Admin) != 0 && len(c.Admin) != AddressSize) {
		return nil, pb.Status_REJECTED
	}
	if c.Binding < pb.TopicBinding_ANCHOR || c.Binding > pb.TopicBinding_MNEMONIC {
		return nil, pb.Status_REJECTED
	}
	implicit := len(c.Admin) == 0
	switch c.Publishers {
	case pb.PublisherRegime_PUBLISHER_REGIME_UNSPECIFIED:
	case pb.PublisherRegime_ALL:
		// Under ALL every chunk is a session-feed chunk whatever the
		// binding, which only names the cohort (docs/protocol.md).
		if implicit {
			return nil, pb.Status_REJECTED
		}
	default:
		return nil, pb.Status_REJECTED
	}
	if c.Closed && (implicit || c.Publishers == pb.PublisherRegime_ALL) {
		return nil, pb.Status_REJECTED
	}
	// history: only where SWIP-65 makes it honest — a FEED_TOPIC cohort
	// under explicit authorship, whose publishers' feeds are read from
	// storage by each subscriber's node; the broker delivers the live
	// stream only.
	if c.History && (implicit || c.Binding != pb.TopicBinding_FEED_TOPIC) {
		return nil, pb.Status_REJECTED
	}
	sp := &Spec{
		Topic:      bytes.Clone(c.Topic),
		Binding:    c.Binding,
		Admin:      bytes.Clone(c.Admin),
		Publishers: c.Publishers,
		History:    c.History,
		Closed:     c.Closed,
	}
	sp.canonical = mustMarshal(sp.PB())
	sp.key = string(sp.canonical)
	sp.name = hex.EncodeToString(keccak(sp.canonical)[:8])
	return sp, pb.Status_OK
}

// Implicit reports implicit authorship: no admin, the binding's SOC shape
// decides who may publish, and there is no claim.
func (sp *Spec) Implicit() bool { return len(sp.Admin) == 0 }

// Explicit reports explicit authorship, where publishing takes a claim: an
// admin is set and the regime is not ALL.
func (sp *Spec) Explicit() bool {
	return !sp.Implicit() && sp.Publishers != pb.PublisherRegime_ALL
}

// PB is the wire form of the spec, with only the fields it defines.
func (sp *Spec) PB() *pb.CohortSpec {
	return &pb.CohortSpec{
		Topic:      sp.Topic,
		Binding:    sp.Binding,
		Admin:      sp.Admin,
		Publishers: sp.Publishers,
		History:    sp.History,
		Closed:     sp.Closed,
	}
}

// Canonical is the spec's canonical serialisation.
func (sp *Spec) Canonical() []byte { return bytes.Clone(sp.canonical) }

// String is a short printable name: the first bytes of keccak256(canonical).
func (sp *Spec) String() string { return sp.name }

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
