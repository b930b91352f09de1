// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package pot is the whirl-only proximity order trie of SWIP-65's pot
// profile: a self-indexed feed whose update i carries, as its payload, the
// top node n_i of a pot over every element published so far.
//
// A node pins one element — a key (a uint64, strictly increasing over the
// feed: by default a timestamp in milliseconds) and a value — and has forks:
// the fork at proximity order p (the number of leading bits two keys share)
// references the node heading the elements whose key first differs from
// the pinned key at bit p. A fork reference is the Swarm address of an
// earlier update's wrapped chunk (a content addressed chunk whose payload is
// that update's node), so every node the pot reaches verifies by its hash.
//
// Keys grow, so the newest element is always the greatest and an insertion
// is a whirl: the new node keeps the previous top's forks below q, the
// proximity order of the new key to the previous one, and references the
// previous top itself at q. Exactly one node is created per insert (the
// update's own payload), and only the previous top is needed to make it.
// A node reached through the fork at p stands for the elements that share
// p+1 leading bits with its key: its own forks at p or below belong to
// other parts of the trie and are skipped.
//
// Reading is descent over a chunk getter (bee's storage.Getter) from a top
// node the reader trusts (over a feed: the payload of an update whose
// signature it verified): each node retrieved is checked by hash only.
// Ascending iteration is the whole history in publication order, every node
// retrieved once; a lookup by key retrieves at most one node per level —
// per bit in which the pot's keys differ, ⌈log₂ n⌉ + 1 for keys 0 … n−1 —
// and a seek to the first key at or above one at most two per level.
//
// The serialization, version 1 (all integers big-endian):
//
//	version  1 byte   0x01
//	key      8 bytes  the pinned element's key
//	forks    8 bytes  bit 63-p set: a fork at proximity order p
//	refs     32 bytes per fork, in ascending proximity order
//	value    the rest: the pinned element (at most MaxValue(forks) bytes)
//
// Since a fork's elements are smaller than the pinned key and share its
// first p bits, they have a 0 at bit p where the key has a 1: the forks
// mask is a subset of the key's bits, and a node where it is not does not
// decode.
package pot

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Version is the serialization version, the first byte of every node.
const Version byte = 1

const (
	// KeyBits is the width of a key: proximity orders run 0 … KeyBits-1.
	KeyBits = 64
	// RefSize is the size of a fork reference (a chunk address).
	RefSize = swarm.HashSize
	// HeaderSize is the size of a node without forks and value.
	HeaderSize = 1 + 8 + 8
	// MaxNodeSize is the largest node: a chunk's payload.
	MaxNodeSize = swarm.ChunkSize
)

// Errors of decoding and inserting.
var (
	// ErrVersion: the first byte is not a version this package reads.
	ErrVersion = errors.New("pot: unknown node version")
	// ErrMalformed: the bytes are not a node.
	ErrMalformed = errors.New("pot: malformed node")
	// ErrNotMonotone: an insert whose key is not greater than the top's.
	ErrNotMonotone = errors.New("pot: key not greater than the previous one")
	// ErrTooLarge: the node would not fit a chunk.
	ErrTooLarge = errors.New("pot: node larger than a chunk")
)

// Node is one node of a whirl-only pot: the pinned element and the forks.
// A Node is immutable.
type Node struct {
	key   uint64
	mask  uint64          // bit 63-p: a fork at p
	forks []swarm.Address // in ascending proximity order
	value []byte
}

// PO is the proximity order of two keys: the number of leading bits they
// share (KeyBits for equal keys).
func PO(a, b uint64) int { return bits.LeadingZeros64(a ^ b) }

// bit is the mask bit of proximity order p.
func bit(p int) uint64 { return 1 << (KeyBits - 1 - p) }

// MaxValue is the largest value a node with forks forks can pin.
func MaxValue(forks int) int { return MaxNodeSize - HeaderSize - RefSize*forks }

// New is the first node of a pot: key and value, no forks.
func New(key uint64, value []byte) (*Node, error) {
	return Insert(nil, swarm.ZeroAddress, key, value)
}

// Insert is the whirl: the node that pins ⟨key, value⟩ over the pot whose
// top is prev, found at prevRef (the address of prev's chunk). It keeps
// prev's forks below q = PO(prev's key, key) and references prev at q. A
// nil prev starts a pot. key must be greater than prev's.
func Insert(prev *Node, prevRef swarm.Address, key uint64, value []byte) (*Node, error) {
	n := &Node{key: key, value: append([]byte(nil), value...)}
	if prev != nil {
		if key <= prev.key {
			return nil, fmt.Errorf("%w: %d after %d", ErrNotMonotone, key, prev.key)
		}
		if len(prevRef.Bytes()) != RefSize {
			return nil, fmt.Errorf("pot: previous node's reference is %d bytes, want %d", len(prevRef.Bytes()), RefSize)
		}
		q := PO(prev.key, key)
		below := ^uint64(0) << (KeyBits - q) // the bits of proximity orders < q (none for q = 0)
		n.mask = prev.mask&below | bit(q)
		kept := bits.OnesCount64(prev.mask & below)
		n.forks = make([]swarm.Address, 0, kept+1)
		n.forks = append(n.forks, prev.forks[:kept]...)
		n.forks = append(n.forks, prevRef)
	}
	if len(n.value) > MaxValue(len(n.forks)) {
		return nil, fmt.Errorf("%w: a value of %d bytes with %d forks (at most %d)", ErrTooLarge, len(value), len(n.forks), MaxValue(len(n.forks)))
	}
	return n, nil
}

// Key is the pinned element's key.
func (n *Node) Key() uint64 { return n.key }

// Value is the pinned element's value. The caller must not change it.
func (n *Node) Value() []byte { return n.value }

// Forks is the number of forks.
func (n *Node) Forks() int { return len(n.forks) }

// Fork is the reference at proximity order p, if there is one.
func (n *Node) Fork(p int) (swarm.Address, bool) {
	if p < 0 || p >= KeyBits || n.mask&bit(p) == 0 {
		return swarm.ZeroAddress, false
	}
	return n.forks[bits.OnesCount64(n.mask>>(KeyBits-p))], true
}

// next is the lowest proximity order ≥ p with a fork, KeyBits if none.
func (n *Node) next(p int) int {
	if p >= KeyBits {
		return KeyBits
	}
	m := n.mask << p
	if m == 0 {
		return KeyBits
	}
	return p + bits.LeadingZeros64(m)
}

// prev is the highest proximity order ≤ p with a fork, -1 if none.
func (n *Node) prev(p int) int {
	if p < 0 {
		return -1
	}
	m := n.mask >> (KeyBits - 1 - p)
	if m == 0 {
		return -1
	}
	return p - bits.TrailingZeros64(m)
}

// MarshalBinary is the node's canonical serialization (version 1).
func (n *Node) MarshalBinary() ([]byte, error) {
	return n.Bytes(), nil
}

// Bytes is the node's canonical serialization (version 1).
func (n *Node) Bytes() []byte {
	b := make([]byte, 0, HeaderSize+RefSize*len(n.forks)+len(n.value))
	b = append(b, Version)
	b = binary.BigEndian.AppendUint64(b, n.key)
	b = binary.BigEndian.AppendUint64(b, n.mask)
	for _, f := range n.forks {
		b = append(b, f.Bytes()...)
	}
	return append(b, n.value...)
}

// Chunk is the node as the content addressed chunk that references it: an
// update's wrapped chunk.
func (n *Node) Chunk() (swarm.Chunk, error) { return cac.New(n.Bytes()) }

// Decode reads a node from its serialization. The value is copied.
func Decode(b []byte) (*Node, error) {
	if len(b) == 0 {
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	}
	if b[0] != Version {
		return nil, fmt.Errorf("%w: %d (this reader knows %d)", ErrVersion, b[0], Version)
	}
	if len(b) < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, want at least %d", ErrMalformed, len(b), HeaderSize)
	}
	if len(b) > MaxNodeSize {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrMalformed, len(b), MaxNodeSize)
	}
	n := &Node{key: binary.BigEndian.Uint64(b[1:9]), mask: binary.BigEndian.Uint64(b[9:17])}
	if n.mask&^n.key != 0 {
		return nil, fmt.Errorf("%w: a fork where the key has a 0 bit (key %#x, forks %#x)", ErrMalformed, n.key, n.mask)
	}
	k := bits.OnesCount64(n.mask)
	rest := b[HeaderSize:]
	if len(rest) < RefSize*k {
		return nil, fmt.Errorf("%w: %d forks need %d bytes, have %d", ErrMalformed, k, RefSize*k, len(rest))
	}
	n.forks = make([]swarm.Address, k)
	for i := range n.forks {
		n.forks[i] = swarm.NewAddress(append([]byte(nil), rest[:RefSize]...))
		rest = rest[RefSize:]
	}
	n.value = append([]byte(nil), rest...)
	return n, nil
}

// TimeKey is the default key: the wall clock in milliseconds, made strictly
// greater than prev when the clock has not moved past it (two inserts in one
// millisecond, a clock stepped back).
func TimeKey(now time.Time, prev uint64) uint64 {
	k := uint64(now.UnixMilli())
	if k <= prev {
		return prev + 1
	}
	return k
}
