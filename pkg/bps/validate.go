// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/ethersphere/bee/v2/pkg/feeds"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

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
	retransmit           // n < cursor: benign, counted
	invalidIndex         // the id slot is not a bare index
	invalidSOC           // not a single-owner chunk under the feed id
	wrongOwner           // a valid SOC, but not the admin's
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

// bareIndex reads the index carried in the id slot of a message, and checks
// the message has the shape of a whole SOC.
func bareIndex(m *pb.Message) (uint64, verdict) {
	if len(m.Address) != swarm.HashSize || len(m.Data) < socHeaderSize || len(m.Data) > maxSOCDataSize {
		return 0, invalidSOC
	}
	for _, b := range m.Data[:bareIndexZeros] {
		if b != 0 {
			return 0, invalidIndex
		}
	}
	return binary.BigEndian.Uint64(m.Data[bareIndexZeros:idSize]), accepted
}

// verifyFeedUpdate checks steps 3 and 4 of SWIP-74's validation for update n:
// with the id slot rewritten to the feed id, the chunk validates as a SOC
// (bee's soc.Valid: wrapped chunk, signature, owner hashing to the address),
// and the address is the one the admin's update n has.
func verifyFeedUpdate(sp *Spec, m *pb.Message, n uint64) verdict {
	id := FeedID(sp.Topic, n)
	data := make([]byte, len(m.Data))
	copy(data, id)
	copy(data[idSize:], m.Data[idSize:])
	if !soc.Valid(swarm.NewChunk(swarm.NewAddress(m.Address), data)) {
		return invalidSOC
	}
	want, err := soc.CreateAddress(id, sp.Admin)
	if err != nil || !bytes.Equal(want.Bytes(), m.Address) {
		return wrongOwner
	}
	return accepted
}

// publication is what validation learned of a message that passed it.
type publication struct {
	index uint64   // FEED_TOPIC: the bare index
	dedup [32]byte // dedup bindings: the chunk identifier of the binding's rule
	owner []byte   // the identity it is bound to, where known (no-loopback rule)
}

// check validates m under sp's binding. At the broker addr is the address the
// stream declared or claimed; at a subscriber it is nil. cursor is the
// receiver's cursor for FEED_TOPIC (checked before the signature, since it
// is cheap); the dedup window is the caller's, applied after.
func check(sp *Spec, m *pb.Message, addr []byte, cursor uint64) (publication, verdict) {
	switch sp.Binding {
	case pb.TopicBinding_FEED_TOPIC:
		n, v := validate(sp, m, cursor)
		return publication{index: n, owner: sp.Admin}, v
	case pb.TopicBinding_ANCHOR:
		return checkAnchor(sp, m, addr)
	default:
		return publication{}, invalidSOC // not served: specFromPB refuses it
	}
}

// validate runs SWIP-74 validation steps 2–4 against cursor and returns the
// update's index with the verdict.
func validate(sp *Spec, m *pb.Message, cursor uint64) (uint64, verdict) {
	n, v := bareIndex(m)
	if v != accepted {
		return 0, v
	}
	if n < cursor {
		return n, retransmit
	}
	return n, verifyFeedUpdate(sp, m, n)
}

// checkAnchor validates a message of an implicit ANCHOR cohort (SWIP-60): a
// SOC at the topic address itself, by the declared owner where one is known;
// dedup is on the wrapped chunk, so the same SOC address carries many
// messages.
func checkAnchor(sp *Spec, m *pb.Message, addr []byte) (publication, verdict) {
	if len(m.Address) != swarm.HashSize || len(m.Data) < socHeaderSize || len(m.Data) > maxSOCDataSize {
		return publication{}, invalidSOC
	}
	if !bytes.Equal(m.Address, sp.Topic) {
		return publication{}, wrongOwner
	}
	if addr != nil {
		if want, err := soc.CreateAddress(m.Data[:idSize], addr); err != nil || !bytes.Equal(want.Bytes(), m.Address) {
			return publication{}, wrongOwner
		}
	}
	// soc.Valid's check, done with the parsed SOC kept for its wrapped
	// chunk: one signature recovery, not two.
	s, err := soc.FromChunk(swarm.NewChunk(swarm.NewAddress(m.Address), m.Data))
	if err != nil {
		return publication{}, invalidSOC
	}
	if a, err := s.Address(); err != nil || !bytes.Equal(a.Bytes(), m.Address) {
		return publication{}, invalidSOC
	}
	pub := publication{owner: addr}
	copy(pub.dedup[:], s.WrappedChunk().Address().Bytes())
	return pub, accepted
}

// window is a bounded dedup set over recent chunk identifiers, evicting the
// oldest (SWIP-60: the horizon is implementation-defined and bounded). Its
// memory is at most size × (32 bytes + map overhead). Not safe for
// concurrent use; the owner guards it.
type window struct {
	size int
	ring [][32]byte
	next int
	set  map[[32]byte]struct{}
}

func newWindow(size int) *window {
	return &window{size: size, set: make(map[[32]byte]struct{})}
}

// add records k and reports whether it was new.
func (w *window) add(k [32]byte) bool {
	if _, seen := w.set[k]; seen {
		return false
	}
	if len(w.ring) < w.size {
		w.ring = append(w.ring, k)
	} else {
		delete(w.set, w.ring[w.next])
		w.ring[w.next] = k
		w.next = (w.next + 1) % w.size
	}
	w.set[k] = struct{}{}
	return true
}
