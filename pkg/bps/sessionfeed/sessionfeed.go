// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package sessionfeed derives the ids of the session feeds of SWIP-74 Rev 8
// and SWIP-60 rev 14: every chunk a publisher sends on a stream is an update
// of a feed on the cohort's topic salted with that stream's challenge, one
// feed per kind:
//
//	prefix  = (empty)                       kind == Data
//	        = "bps-service:v1" ‖ byte(kind)  any other kind
//	topic_s = keccak256(prefix ‖ topic ‖ challenge)
//	id      = keccak256(topic_s ‖ uint64BE(index))
//
// and the update for storage (SWIP-65) is the same wrapped payload under the
// channel's own id, keccak256(topic ‖ uint64BE(index)). The chunk's address is
// keccak256(id ‖ owner), bee's soc.CreateAddress.
//
// The package is pure: hashing is bee's (crypto.LegacyKeccak256, feeds.Id,
// soc.CreateAddress); nothing here validates a chunk. The decisions behind the
// numbers are in docs/protocol.md, "The wire: SWIP-74 Rev 8 and SWIP-60 rev 14".
package sessionfeed

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/feeds"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Kind is what a chunk on the wire is: the value of the Broadcast frame's
// kind field, and the byte that follows ServicePrefix in every kind's prefix
// but Data's.
type Kind uint8

// The kinds. Data and Auth are SWIP-74 Rev 8's numbers. Roster and EOS are
// this project's: SWIP-60 rev 14 names them but its bps.proto, which would
// number them, is not published; they keep the relative order of rev 11's
// ServiceKind (roster before end of stream) after Rev 8's two.
const (
	KindUnspecified Kind = 0 // invalid on the wire
	Data            Kind = 1 // an update of the stream's session feed
	Auth            Kind = 2 // an empty chunk: claims a stream, never delivered
	Roster          Kind = 3 // SWIP-60: the admin's publisher set (payload: Roster)
	EOS             Kind = 4 // SWIP-60: the channel ended by its admin (empty, index 0)
)

// String names the kind as the texts do.
func (k Kind) String() string {
	switch k {
	case Data:
		return "DATA"
	case Auth:
		return "AUTH"
	case Roster:
		return "ROSTER"
	case EOS:
		return "EOS"
	case KindUnspecified:
		return "KIND_UNSPECIFIED"
	default:
		return "KIND(" + strconv.Itoa(int(k)) + ")"
	}
}

// Known reports whether the kind is one this wire defines.
func (k Kind) Known() bool { return k >= Data && k <= EOS }

// Service reports whether the kind is one of the admin's service kinds,
// accepted on the admin's stream only.
func (k Kind) Service() bool { return k == Roster || k == EOS }

// Sizes fixed by the texts.
const (
	TopicSize     = swarm.HashSize // a cohort's topic
	ChallengeSize = 32             // Rev 8: every Ack{OK} carries 32 random bytes
	IndexSize     = 8              // uint64, big-endian, in every id preimage
)

// MaxIndex is the highest index a frame may carry: the cursor is set to
// index+1 and must not wrap, so math.MaxUint64 is no feed's index.
const MaxIndex = math.MaxUint64 - 1

// ServicePrefix begins the prefix of every kind but Data.
const ServicePrefix = "bps-service:v1"

var (
	// ErrTopicSize is returned for a topic that is not 32 bytes.
	ErrTopicSize = errors.New("sessionfeed: topic is not 32 bytes")
	// ErrChallengeSize is returned for a challenge that is not 32 bytes.
	ErrChallengeSize = errors.New("sessionfeed: challenge is not 32 bytes")
	// ErrKind is returned for the unspecified kind.
	ErrKind = errors.New("sessionfeed: kind unspecified")
)

// Prefix is the domain prefix of kind's session feed: empty for Data,
// ServicePrefix ‖ byte(kind) for every other kind. It panics on
// KindUnspecified, which has no feed.
func Prefix(kind Kind) []byte {
	switch kind {
	case KindUnspecified:
		panic("sessionfeed: prefix of the unspecified kind")
	case Data:
		return nil
	default:
		return append([]byte(ServicePrefix), byte(kind))
	}
}

// Topic is a session feed's topic, keccak256(prefix ‖ topic ‖ challenge).
// The topic and the challenge must be 32 bytes each.
func Topic(prefix, topic, challenge []byte) ([]byte, error) {
	if len(topic) != TopicSize {
		return nil, fmt.Errorf("%w: %d", ErrTopicSize, len(topic))
	}
	if len(challenge) != ChallengeSize {
		return nil, fmt.Errorf("%w: %d", ErrChallengeSize, len(challenge))
	}
	buf := make([]byte, 0, len(prefix)+TopicSize+ChallengeSize)
	buf = append(append(append(buf, prefix...), topic...), challenge...)
	return crypto.LegacyKeccak256(buf)
}

// KindTopic is Topic(Prefix(kind), topic, challenge).
func KindTopic(kind Kind, topic, challenge []byte) ([]byte, error) {
	if kind == KindUnspecified {
		return nil, ErrKind
	}
	return Topic(Prefix(kind), topic, challenge)
}

// ID is the id of update index of the feed on topicS,
// keccak256(topicS ‖ uint64BE(index)), computed by bee's feeds package.
func ID(topicS []byte, index uint64) ([]byte, error) {
	return feeds.Id(topicS, feedIndex(index))
}

// KindID is the id a chunk of kind at index must have on the stream whose
// challenge is challenge, in the cohort on topic: what a receiver derives
// from a Broadcast's kind, challenge and index.
func KindID(kind Kind, topic, challenge []byte, index uint64) ([]byte, error) {
	topicS, err := KindTopic(kind, topic, challenge)
	if err != nil {
		return nil, err
	}
	return ID(topicS, index)
}

// ChannelID is the id of the channel's own update at index,
// keccak256(topic ‖ uint64BE(index)): the update for storage (SWIP-65),
// signed by the publisher's client over the same wrapped payload as the live
// update. No challenge gives it, so it is never valid on a stream.
func ChannelID(topic []byte, index uint64) ([]byte, error) {
	if len(topic) != TopicSize {
		return nil, fmt.Errorf("%w: %d", ErrTopicSize, len(topic))
	}
	return ID(topic, index)
}

// Address is the address a chunk with id must have when owner signed it,
// keccak256(id ‖ owner): what a receiver validates the chunk against.
func Address(id, owner []byte) (swarm.Address, error) {
	return soc.CreateAddress(id, owner)
}

// feedIndex is a sequential feed index as bee's feeds package hashes it:
// eight bytes big-endian.
type feedIndex uint64

var _ feeds.Index = feedIndex(0)

func (i feedIndex) MarshalBinary() ([]byte, error) {
	return binary.BigEndian.AppendUint64(make([]byte, 0, IndexSize), uint64(i)), nil
}

func (i feedIndex) Next(int64, uint64) feeds.Index { return i + 1 }

func (i feedIndex) String() string { return strconv.FormatUint(uint64(i), 10) }
