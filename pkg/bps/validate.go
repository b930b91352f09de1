// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"fmt"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/sessionfeed"
	"google.golang.org/protobuf/proto"
)

// PoMin is SWIP-60's proximity constant for the implicit SOC_ID and OWNER
// bindings: a message's address must share at least this many leading bits
// with the topic.
const PoMin = 16

// Chunk layout of a SOC's data: id ‖ signature ‖ span ‖ payload.
const (
	idSize         = swarm.HashSize
	socHeaderSize  = idSize + swarm.SocSignatureSize + swarm.SpanSize
	maxSOCDataSize = socHeaderSize + swarm.ChunkSize
)

// verdict is the outcome of validating one Broadcast (docs/protocol.md,
// "Validation at the broker").
type verdict int

const (
	accepted       verdict = iota
	retransmit             // DATA below its owner's cursor, ROSTER below the roster cursor, or seen in the window
	invalidSOC             // not the chunk the frame says: a violation from a stream that sent it
	wrongOwner             // a valid chunk whose owner the node does not admit (a receiver's roster)
	wrongChallenge         // signed for another stream: dropped
	unknownKind            // a kind above EOS: dropped
	unsetKind              // KIND_UNSPECIFIED: a violation
	wrongStream            // a kind this stream may not send: a violation
	invalidRoster          // a valid ROSTER chunk whose payload is not a Roster
)

// counter maps a rejecting verdict to the counter it increments.
func (v verdict) counter() Counter {
	switch v {
	case retransmit:
		return CounterRetransmit
	case invalidSOC:
		return CounterInvalidSOC
	case wrongChallenge:
		return CounterWrongChallenge
	case unknownKind, unsetKind:
		return CounterUnknownKind
	case wrongStream:
		return CounterWrongStream
	case invalidRoster:
		return CounterInvalidRoster
	default:
		return CounterWrongOwner
	}
}

// violates reports whether a stream that sent a frame with this verdict
// broke the protocol (Rev 8: reset and blocklist), rather than sent what is
// dropped and counted.
func (v verdict) violates() bool {
	switch v {
	case invalidSOC, unsetKind, wrongStream:
		return true
	}
	return false
}

// FeedID is the signed id of update index of the feed on topic:
// keccak256(topic ‖ uint64BE(index)), computed by bee's feeds package — a
// SWIP-65 channel update, and an implicit FEED_TOPIC cohort's chunk.
func FeedID(topic []byte, index uint64) []byte {
	id, err := sessionfeed.ChannelID(topic, index)
	if err != nil {
		panic(fmt.Sprintf("bps: feed id: %v", err)) // cannot fail: marshalling a uint64
	}
	return id
}

// SessionID is the id of the chunk of kind at index on the session feed of
// the stream whose challenge is challenge, in the cohort on topic (SWIP-74
// Rev 8): keccak256(keccak256(prefix ‖ topic ‖ challenge) ‖ uint64BE(index)).
func SessionID(kind pb.Kind, topic, challenge []byte, index uint64) []byte {
	id, err := sessionfeed.KindID(sessionfeed.Kind(kind), topic, challenge, index)
	if err != nil {
		panic(fmt.Sprintf("bps: session id: %v", err)) // cannot fail: hashing bytes
	}
	return id
}

// ServiceMsg is a validated ROSTER or EOS chunk of the admin's (SWIP-60 rev
// 14): the kind, its index on its kind's feed, and for a ROSTER the
// publisher set it names (the admin implied).
type ServiceMsg struct {
	Kind       pb.Kind
	Index      uint64
	Publishers [][]byte
}

// Ends reports whether the service chunk ends the channel (EOS).
func (svc *ServiceMsg) Ends() bool { return svc != nil && svc.Kind == pb.Kind_EOS }

// publication is what validation learned of a Broadcast that passed it.
type publication struct {
	kind    pb.Kind
	index   uint64      // its index on its kind's feed (implicit FEED_TOPIC: the feed index)
	feed    bool        // a DATA update judged by its owner's cursor
	address []byte      // the chunk's address: keccak256(id ‖ owner)
	dedup   [32]byte    // implicit bindings but FEED_TOPIC: the chunk identifier of the binding's rule
	owner   []byte      // the chunk's owner (forced at a broker, recovered at a receiver)
	service *ServiceMsg // ROSTER or EOS
}

// authority is who may publish as the checking node knows it: the admin
// and the roster it holds (explicit authorship). The broker's cohort and a
// subscription implement it.
type authority interface {
	isPublisher(owner []byte) bool
	feedCursor(owner []byte) uint64
	serviceNext() uint64
}

// lateAfterFlush reports whether a subscription's reorder flush passed
// over index of owner and still waits for it (receiver.passedOver): the
// cursor moved past it, and it is taken all the same when it comes late.
func lateAfterFlush(auth authority, owner []byte, index uint64) bool {
	l, ok := auth.(latecomer)
	return ok && l.passedOver(owner, index)
}

// latecomer is an authority that takes updates below its cursor that a
// reorder flush passed over (a subscription's receiver).
type latecomer interface {
	passedOver(owner []byte, index uint64) bool
}

// sender is what a broker (or the relay a publisher attached to) holds of
// the stream a Broadcast came on: the address it declared, which every
// chunk on it must be signed by (forced, never recovered), and the
// challenge it was issued. A receiver checks with none.
type sender struct {
	addr      []byte
	challenge []byte
	admin     bool // addr is the spec's admin: it may send ROSTER and EOS
	pending   bool // a claim: the cursor is checked after the signature (Rev 8's order)
}

// check validates b in cohort sp (docs/protocol.md, "Validation at the
// broker" and "Receivers"). At a broker from is the stream's sender: its
// challenge must be the frame's and its address the chunk's owner; at a
// receiver from is nil and the frame's challenge is compared with
// nothing. auth answers who may publish and where the cursors stand; the
// window and the cursor moves are the caller's, under its own lock, after
// check. The cheap checks precede the signature.
func check(sp *Spec, b *pb.Broadcast, from *sender, auth authority) (publication, verdict) {
	pub := publication{kind: b.Kind, index: b.Index}
	switch {
	case b.Kind == pb.Kind_KIND_UNSPECIFIED:
		return pub, unsetKind
	case b.Kind > pb.Kind_EOS:
		return pub, unknownKind
	case len(b.Soc) < socHeaderSize || len(b.Soc) > maxSOCDataSize || b.Index > sessionfeed.MaxIndex:
		return pub, invalidSOC
	}
	var wantID []byte
	if sp.Implicit() {
		// No salt, no claim: the binding's own id (SWIP-60).
		if b.Kind != pb.Kind_DATA {
			return pub, wrongStream
		}
		if len(b.Challenge) != 0 {
			return pub, invalidSOC
		}
		if sp.Binding == pb.TopicBinding_FEED_TOPIC {
			wantID, pub.feed = FeedID(sp.Topic, b.Index), true
		}
	} else {
		if b.Kind.Number() >= pb.Kind_ROSTER.Number() && from != nil && !from.admin {
			return pub, wrongStream // ROSTER and EOS are the admin's stream's only
		}
		if from != nil && !bytes.Equal(b.Challenge, from.challenge) {
			return pub, wrongChallenge
		}
		if len(b.Challenge) != challengeSize || (b.Kind == pb.Kind_EOS && b.Index != 0) {
			return pub, invalidSOC
		}
		// Before the signature: the cursor is cheap (a pending stream's
		// caller checks it after, Rev 8's order).
		if from != nil && !from.pending && b.Kind == pb.Kind_DATA && b.Index < auth.feedCursor(from.addr) && !lateAfterFlush(auth, from.addr, b.Index) {
			return pub, retransmit
		}
		wantID, pub.feed = SessionID(b.Kind, sp.Topic, b.Challenge, b.Index), b.Kind == pb.Kind_DATA
	}
	if wantID != nil && !bytes.Equal(b.Soc[:idSize], wantID) {
		return pub, invalidSOC
	}
	s, err := readSOC(b.Soc)
	if err != nil {
		return pub, invalidSOC
	}
	pub.owner = s.OwnerAddress()
	if from != nil && from.addr != nil && !bytes.Equal(pub.owner, from.addr) {
		if sp.Implicit() {
			return pub, wrongOwner // a valid SOC, but not the declared address's: not this stream's to send
		}
		return pub, invalidSOC // not valid at keccak256(id ‖ addr): the owner is forced
	}
	a, err := s.Address()
	if err != nil {
		return pub, invalidSOC
	}
	pub.address = a.Bytes()
	if v := pub.kindRules(sp, s.WrappedChunk().Data()); v != accepted {
		return pub, v
	}
	if v := shape(sp, pub.address, s.ID(), pub.owner); v != accepted {
		return pub, v
	}
	if sp.Explicit() && b.Kind == pb.Kind_DATA && !auth.isPublisher(pub.owner) {
		return pub, wrongOwner
	}
	return pub, pub.fresh(sp, s.WrappedChunk().Address().Bytes(), auth)
}

// kindRules checks what a kind fixes of a valid chunk: AUTH and EOS are
// empty (span 0), a ROSTER's payload is a Roster of 20-byte addresses, and
// the service kinds are the admin's.
func (pub *publication) kindRules(sp *Spec, spanData []byte) verdict {
	empty := len(spanData) == swarm.SpanSize && bytes.Equal(spanData, make([]byte, swarm.SpanSize))
	switch pub.kind {
	case pb.Kind_AUTH:
		if !empty {
			return invalidSOC
		}
	case pb.Kind_EOS, pb.Kind_ROSTER:
		if !bytes.Equal(pub.owner, sp.Admin) {
			return invalidSOC // forced to the admin's address: not valid there
		}
		if pub.kind == pb.Kind_EOS {
			if !empty {
				return invalidSOC
			}
			pub.service = &ServiceMsg{Kind: pb.Kind_EOS, Index: pub.index}
			return accepted
		}
		r := new(pb.Roster)
		if err := proto.Unmarshal(spanData[swarm.SpanSize:], r); err != nil {
			return invalidRoster
		}
		for _, p := range r.Publishers {
			if len(p) != AddressSize {
				return invalidRoster
			}
		}
		pub.service = &ServiceMsg{Kind: pb.Kind_ROSTER, Index: pub.index, Publishers: r.Publishers}
	}
	return accepted
}

// fresh is the dedup rule for an authenticated chunk: a DATA update judged
// by its owner's cursor is a retransmit below it (unless a reorder flush
// passed over it), a ROSTER below the roster cursor; every other binding
// takes its dedup key — under ANCHOR the wrapped chunk's address, else the
// SOC's — for the caller's window.
func (pub *publication) fresh(sp *Spec, wrapped []byte, auth authority) verdict {
	switch {
	case pub.feed:
		if pub.index < auth.feedCursor(pub.owner) && !lateAfterFlush(auth, pub.owner, pub.index) {
			return retransmit
		}
	case pub.kind == pb.Kind_ROSTER:
		if pub.index < auth.serviceNext() {
			return retransmit
		}
	case pub.kind != pb.Kind_DATA:
	case sp.Binding == pb.TopicBinding_ANCHOR:
		copy(pub.dedup[:], wrapped)
	default:
		copy(pub.dedup[:], pub.address)
	}
	return accepted
}

// shape checks what the binding fixes of a valid chunk under implicit
// authorship (SWIP-60's table). Under explicit authorship and ALL every
// chunk is a session-feed chunk: the id is checked already, the roster
// decides who writes.
func shape(sp *Spec, address, id, owner []byte) verdict {
	if !sp.Implicit() {
		return accepted
	}
	switch sp.Binding {
	case pb.TopicBinding_ANCHOR:
		if !bytes.Equal(address, sp.Topic) {
			return wrongOwner
		}
	case pb.TopicBinding_SOC_ID:
		if !bytes.Equal(id, sp.Topic) {
			return invalidSOC
		}
		if swarm.Proximity(address, sp.Topic) < PoMin {
			return wrongOwner
		}
	case pb.TopicBinding_OWNER:
		h, err := crypto.LegacyKeccak256(owner)
		if err != nil || !bytes.Equal(h, sp.Topic) || swarm.Proximity(address, sp.Topic) < PoMin {
			return wrongOwner
		}
	}
	return accepted
}

// anyPublisher admits every owner: what a node can check of a publication
// without the cohort's roster.
type anyPublisher struct{}

func (anyPublisher) isPublisher([]byte) bool  { return true }
func (anyPublisher) feedCursor([]byte) uint64 { return 0 }
func (anyPublisher) serviceNext() uint64      { return 0 }

// Verify checks a Broadcast as a broker would before it is sent on a
// stream publishing as addr under challenge: the kind, the session-feed id
// (the binding's own id under implicit authorship), a valid signature by
// addr, and what the kind fixes. Cursors, dedup and the roster are the
// broker's. A bridge uses it to refuse a dApp's bad frame locally rather
// than let the broker count it against the node.
func (sp *Spec) Verify(b *pb.Broadcast, addr, challenge []byte) error {
	from := &sender{addr: addr, challenge: challenge, admin: bytes.Equal(addr, sp.Admin)}
	if sp.Implicit() {
		from.challenge = nil
	}
	if _, v := check(sp, b, from, anyPublisher{}); v != accepted {
		return fmt.Errorf("bps: publication refused: %s", v.counter())
	}
	return nil
}
