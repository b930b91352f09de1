// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/feeds"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// PoMin is SWIP-60's proximity constant for the implicit SOC_ID and OWNER
// bindings: a message's address must share at least this many leading bits
// with the topic.
const PoMin = 16

// serviceDomain separates service-feed ids from feed updates and claims.
const serviceDomain = "bps-service:v1"

// Chunk layout of a SOC's data: id ‖ signature ‖ span ‖ payload.
const (
	idSize         = swarm.HashSize
	socHeaderSize  = idSize + swarm.SocSignatureSize + swarm.SpanSize
	maxSOCDataSize = socHeaderSize + swarm.ChunkSize
	bareIndexZeros = idSize - 8 // leading zero bytes of a bare index
)

// verdict is the outcome of validating one publication.
type verdict int

const (
	accepted     verdict = iota
	retransmit           // at or below the cursor, or seen within the dedup window
	invalidIndex         // the id slot is not what the binding carries
	invalidSOC           // not a single-owner chunk as the binding shapes it
	wrongOwner           // a valid SOC, but its owner may not publish here
)

// counter maps a rejecting verdict to the counter it increments.
func (v verdict) counter() Counter {
	switch v {
	case retransmit:
		return CounterRetransmit
	case invalidIndex:
		return CounterInvalidIndex
	case invalidSOC:
		return CounterInvalidSOC
	default:
		return CounterWrongOwner
	}
}

// feedIndex is a sequential feed index as bee's feeds package hashes it:
// eight bytes big-endian.
type feedIndex uint64

var _ feeds.Index = feedIndex(0)

func (i feedIndex) MarshalBinary() ([]byte, error) {
	return binary.BigEndian.AppendUint64(nil, uint64(i)), nil
}

func (i feedIndex) Next(int64, uint64) feeds.Index { return i + 1 }

func (i feedIndex) String() string { return strconv.FormatUint(uint64(i), 10) }

// FeedID is the signed id of update index of the feed on topic:
// keccak256(topic ‖ uint64BE(index)), computed by bee's feeds package.
func FeedID(topic []byte, index uint64) []byte {
	id, err := feeds.Id(topic, feedIndex(index))
	if err != nil {
		panic(fmt.Sprintf("bps: feed id: %v", err)) // cannot fail: marshalling a uint64
	}
	return id
}

// ServiceID is the id of update index of a cohort's service feed:
// keccak256("bps-service:v1" ‖ topic ‖ uint64BE(index)).
func ServiceID(topic []byte, index uint64) []byte {
	return keccak([]byte(serviceDomain), topic, binary.BigEndian.AppendUint64(nil, index))
}

// publication is what validation learned of a message that passed it.
type publication struct {
	index   uint64             // FEED_TOPIC update: the bare index; service: its index
	feed    bool               // a bare-index feed update (cursor per owner)
	dedup   [32]byte           // dedup bindings: the chunk identifier of the binding's rule
	owner   []byte             // the SOC's owner
	service *pb.ServiceMessage // a service SOC of the admin's service feed
}

// authority is who may publish as the receiver knows it: the admin and the
// roster it holds (explicit authorship). The broker's cohort and a
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

// check validates m in cohort sp. At the broker stream is the address the
// stream declared or claimed (every message must be that owner's); at a
// subscriber it is nil. auth answers who may publish and where the cursors
// stand; the dedup window and the cursor moves are the caller's, under its
// own lock, after check.
func check(sp *Spec, m *pb.Message, stream []byte, auth authority) (publication, verdict) {
	var pub publication
	if len(m.Address) != swarm.HashSize || len(m.Data) < socHeaderSize || len(m.Data) > maxSOCDataSize {
		return pub, invalidSOC
	}
	slot := m.Data[:idSize]
	bare := isBareIndex(slot)
	id := slot

	switch {
	case !sp.Implicit() && !(sp.Binding == pb.TopicBinding_FEED_TOPIC && bare):
		// With an admin there is a service feed: its SOCs carry their full
		// id, recognised before the content path.
		if svc := asService(sp, m); svc != nil {
			return checkService(sp, m, stream, auth, svc)
		}
		if sp.Binding == pb.TopicBinding_FEED_TOPIC {
			return pub, invalidIndex
		}
	case sp.Binding == pb.TopicBinding_FEED_TOPIC:
		if !bare {
			return pub, invalidIndex
		}
	}

	data := m.Data
	if sp.Binding == pb.TopicBinding_FEED_TOPIC {
		pub.index, pub.feed = binary.BigEndian.Uint64(slot[bareIndexZeros:]), true
		// The cursor is checked before the signature: it is cheap.
		if sp.Explicit() && stream != nil && pub.index < auth.feedCursor(stream) {
			return pub, retransmit
		}
		id = FeedID(sp.Topic, pub.index)
		data = make([]byte, len(m.Data))
		copy(data, id)
		copy(data[idSize:], m.Data[idSize:])
	}

	s, v := parseSOC(m.Address, data)
	if v != accepted {
		return pub, v
	}
	pub.owner = s.OwnerAddress()
	if stream != nil && !bytes.Equal(pub.owner, stream) {
		return pub, wrongOwner
	}
	if v := shape(sp, m.Address, id, pub.owner); v != accepted {
		return pub, v
	}
	if sp.Explicit() && !auth.isPublisher(pub.owner) {
		return pub, wrongOwner
	}
	v = pub.fresh(sp, s, m.Address, auth) // before pub is returned: it sets the dedup key
	return pub, v
}

// fresh is the binding's dedup rule for an authenticated publication:
// with explicit authorship a feed update is a retransmit below its
// owner's cursor (unless a reorder flush passed over it); every other
// binding takes its dedup key — under ANCHOR the wrapped chunk's address,
// else the SOC's — for the caller's window.
func (pub *publication) fresh(sp *Spec, s *soc.SOC, address []byte, auth authority) verdict {
	switch {
	case pub.feed && sp.Explicit():
		if pub.index < auth.feedCursor(pub.owner) && !lateAfterFlush(auth, pub.owner, pub.index) {
			return retransmit
		}
	case sp.Binding == pb.TopicBinding_ANCHOR:
		copy(pub.dedup[:], s.WrappedChunk().Address().Bytes())
	default:
		copy(pub.dedup[:], address)
	}
	return accepted
}

// parseSOC is soc.Valid's check — the signature recovers an owner that
// hashes, with the id, to the address — keeping the parsed SOC for its owner
// and wrapped chunk: one signature recovery, not two. It reads the SOC as
// soc.FromChunk does, on the fast signature path (readSOC).
func parseSOC(address, data []byte) (*soc.SOC, verdict) {
	s, err := readSOC(data)
	if err != nil {
		return nil, invalidSOC
	}
	if a, err := s.Address(); err != nil || !bytes.Equal(a.Bytes(), address) {
		return nil, invalidSOC
	}
	return s, accepted
}

// shape checks what the binding fixes of a valid SOC (SWIP-60's table).
// Under explicit authorship the roster decides and only the id rules of the
// binding remain; under implicit authorship the shape decides who may write.
func shape(sp *Spec, address, id, owner []byte) verdict {
	implicit := sp.Implicit()
	switch sp.Binding {
	case pb.TopicBinding_ANCHOR:
		if implicit && !bytes.Equal(address, sp.Topic) {
			return wrongOwner
		}
	case pb.TopicBinding_SOC_ID:
		if !bytes.Equal(id, sp.Topic) {
			return invalidIndex
		}
		if implicit && swarm.Proximity(address, sp.Topic) < PoMin {
			return wrongOwner
		}
	case pb.TopicBinding_OWNER:
		if implicit {
			h, err := crypto.LegacyKeccak256(owner)
			if err != nil || !bytes.Equal(h, sp.Topic) || swarm.Proximity(address, sp.Topic) < PoMin {
				return wrongOwner
			}
		}
	}
	return accepted
}

// isBareIndex reports whether an id slot carries a bare feed index.
func isBareIndex(slot []byte) bool {
	for _, b := range slot[:bareIndexZeros] {
		if b != 0 {
			return false
		}
	}
	return true
}

// asService decodes m as a service SOC of sp's service feed if its payload
// is a ServiceMessage whose index names the id in the id slot. It checks no
// signature.
func asService(sp *Spec, m *pb.Message) *pb.ServiceMessage {
	svc := new(pb.ServiceMessage)
	if err := proto.Unmarshal(m.Data[socHeaderSize:], svc); err != nil {
		return nil
	}
	if !bytes.Equal(m.Data[:idSize], ServiceID(sp.Topic, svc.Index)) {
		return nil
	}
	return svc
}

// mayBeService reports, without a signature check, whether m has the shape
// of a service SOC of sp (which only a cohort with an admin has).
func mayBeService(sp *Spec, m *pb.Message) bool {
	return !sp.Implicit() && len(m.Data) >= socHeaderSize && asService(sp, m) != nil
}

// checkService validates a service SOC: a valid SOC under its full id, the
// admin's, a known kind with well-formed addresses, at or past the service
// cursor.
func checkService(sp *Spec, m *pb.Message, stream []byte, auth authority, svc *pb.ServiceMessage) (publication, verdict) {
	pub := publication{index: svc.Index, service: svc}
	if svc.Index < auth.serviceNext() {
		return pub, retransmit
	}
	switch svc.Kind {
	case pb.ServiceKind_ROSTER:
		for _, p := range svc.Publishers {
			if len(p) != AddressSize {
				return pub, invalidSOC
			}
		}
	case pb.ServiceKind_END_OF_STREAM:
		if len(svc.Publishers) != 0 {
			return pub, invalidSOC
		}
	default:
		return pub, invalidSOC
	}
	s, v := parseSOC(m.Address, m.Data)
	if v != accepted {
		return pub, v
	}
	pub.owner = s.OwnerAddress()
	if !bytes.Equal(pub.owner, sp.Admin) || (stream != nil && !bytes.Equal(stream, sp.Admin)) {
		return pub, wrongOwner
	}
	return pub, accepted
}

// staticAuthority is SWIP-74's view of a cohort: the admin alone, one cursor.
type staticAuthority struct {
	sp     *Spec
	cursor uint64
}

func (a staticAuthority) isPublisher(owner []byte) bool { return bytes.Equal(owner, a.sp.Admin) }
func (a staticAuthority) feedCursor([]byte) uint64      { return a.cursor }
func (a staticAuthority) serviceNext() uint64           { return 0 }

// validate runs SWIP-74's validation steps 2–4 of a publication on the
// admin's stream against cursor, and returns the update's index.
func validate(sp *Spec, m *pb.Message, cursor uint64) (uint64, verdict) {
	pub, v := check(sp, m, sp.Admin, staticAuthority{sp: sp, cursor: cursor})
	return pub.index, v
}

// anyPublisher admits every owner: what a node can check of a publication
// without the cohort's roster.
type anyPublisher struct{}

func (anyPublisher) isPublisher([]byte) bool  { return true }
func (anyPublisher) feedCursor([]byte) uint64 { return 0 }
func (anyPublisher) serviceNext() uint64      { return 0 }

// Verify checks a publication as a broker would before it is sent on a
// stream publishing as addr: the binding's SOC shape, a valid signature, and
// addr as its owner. Cursors, dedup and the roster are the broker's. A
// bridge uses it to refuse a dApp's bad frame locally rather than let the
// broker count it against the node.
func (sp *Spec) Verify(m *pb.Message, addr []byte) error {
	if _, v := check(sp, m, addr, anyPublisher{}); v != accepted {
		return fmt.Errorf("bps: publication refused: %s", v.counter())
	}
	return nil
}
