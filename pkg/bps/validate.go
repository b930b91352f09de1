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
