// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package pot

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/storage"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Errors of reading a pot. ErrUnavailable is the storage's fault (nobody
// had the chunk, or what came back was not it); ErrMalformed, ErrVersion,
// ErrInconsistent and ErrAnchor are the publisher's: the chunk hashed to
// the reference a node it signed holds.
var (
	// ErrUnavailable: a node could not be retrieved, or what was retrieved
	// does not hash to its reference.
	ErrUnavailable = errors.New("pot: node not retrieved")
	// ErrInconsistent: a node does not belong at the fork that references
	// it (its key is not below its parent's, or does not first differ from
	// it at the fork's proximity order).
	ErrInconsistent = errors.New("pot: node does not fit its fork")
	// ErrNotFound: no element has the key looked up.
	ErrNotFound = errors.New("pot: key not found")
	// ErrAnchor: the pot does not reference the node the reader holds at
	// its last index (SWIP-65's anchor check): an equivocation.
	ErrAnchor = errors.New("pot: anchor check failed")
	// ErrExhausted: the pot holds fewer elements than asked for.
	ErrExhausted = errors.New("pot: fewer elements than missed")
)

// Element is one element of a pot and the node that pins it.
type Element struct {
	Key  uint64
	Ref  swarm.Address // the address of Node's chunk (the top's as given)
	Node *Node
}

// Value is the element's value.
func (e Element) Value() []byte { return e.Node.value }

// Load retrieves the node at ref through g and checks it by hash only: a
// content addressed chunk of bee's (cac.Valid) at ref, whose span is its
// payload's length, and whose payload decodes as a node.
func Load(ctx context.Context, g storage.Getter, ref swarm.Address) (*Node, error) {
	ch, err := g.Get(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, ref, err)
	}
	return nodeOf(ch, ref)
}

// nodeOf is Load's check of a chunk retrieved at ref.
func nodeOf(ch swarm.Chunk, ref swarm.Address) (*Node, error) {
	if !ch.Address().Equal(ref) || !cac.Valid(ch) {
		return nil, fmt.Errorf("%w: %s: the chunk does not hash to its reference", ErrUnavailable, ref)
	}
	data := ch.Data()
	if span := binary.LittleEndian.Uint64(data[:swarm.SpanSize]); span != uint64(len(data)-swarm.SpanSize) {
		return nil, fmt.Errorf("%w: %s: span %d over %d bytes: not a single chunk", ErrMalformed, ref, span, len(data)-swarm.SpanSize)
	}
	n, err := Decode(data[swarm.SpanSize:])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ref, err)
	}
	return n, nil
}

// fits checks that child belongs at parent's fork p.
func fits(parent, child *Node, p int, ref swarm.Address) error {
	if child.key >= parent.key || PO(child.key, parent.key) != p {
		return fmt.Errorf("%w: %s pins %#x at fork %d of %#x", ErrInconsistent, ref, child.key, p, parent.key)
	}
	return nil
}

// loader retrieves nodes and counts the retrievals.
type loader struct {
	g storage.Getter
	n int
}

func (l *loader) child(ctx context.Context, parent *Node, p int) (swarm.Address, *Node, error) {
	ref, _ := parent.Fork(p)
	l.n++
	c, err := Load(ctx, l.g, ref)
	if err != nil {
		return ref, nil, err
	}
	return ref, c, fits(parent, c, p, ref)
}

// frame is a node on a cursor's path: reached at fork floor of its parent
// (-1 for the top), so its forks at floor or below are not its own; next is
// the next fork to visit.
type frame struct {
	n     *Node
	ref   swarm.Address
	floor int
	next  int
}

// Descending iterates a pot newest first (descending keys): the top, then
// each earlier element, every node retrieved once. Not safe for concurrent
// use.
type Descending struct {
	l       loader
	top     Element
	started bool
	stack   []frame
	err     error
	reached func(n *Node, floor int) // called for each node entered (Recover's prefetch)
}

// Descend starts a descending iteration at top, the node whose chunk is at
// topRef, retrieving through g.
func Descend(g storage.Getter, top *Node, topRef swarm.Address) *Descending {
	return &Descending{l: loader{g: g}, top: Element{Key: top.key, Ref: topRef, Node: top}}
}

// Retrievals is the number of nodes retrieved so far.
func (c *Descending) Retrievals() int { return c.l.n }

// Peek is the reference of the element Next returns, without retrieving
// it; false at the end.
func (c *Descending) Peek() (swarm.Address, bool) {
	if !c.started {
		return c.top.Ref, true
	}
	for i := len(c.stack) - 1; i >= 0; i-- {
		f := c.stack[i]
		if p := f.n.prev(f.next); p > f.floor {
			return f.n.Fork(p)
		}
	}
	return swarm.ZeroAddress, false
}

// Next is the next element, io.EOF after the oldest. An error is final.
func (c *Descending) Next(ctx context.Context) (Element, error) {
	if c.err != nil {
		return Element{}, c.err
	}
	if !c.started {
		c.started = true
		c.stack = append(c.stack, frame{n: c.top.Node, ref: c.top.Ref, floor: -1, next: KeyBits - 1})
		if c.reached != nil {
			c.reached(c.top.Node, -1)
		}
		return c.top, nil
	}
	for len(c.stack) > 0 {
		f := &c.stack[len(c.stack)-1]
		p := f.n.prev(f.next)
		if p <= f.floor {
			c.stack = c.stack[:len(c.stack)-1]
			continue
		}
		f.next = p - 1
		ref, n, err := c.l.child(ctx, f.n, p)
		if err != nil {
			c.err = err
			return Element{}, err
		}
		c.stack = append(c.stack, frame{n: n, ref: ref, floor: p, next: KeyBits - 1})
		if c.reached != nil {
			c.reached(n, p)
		}
		return Element{Key: n.key, Ref: ref, Node: n}, nil
	}
	c.err = io.EOF
	return Element{}, io.EOF
}

// Ascending iterates a pot in key order — publication order — from a key
// on: the first element at or above it is found by one descent (a node per
// level), then every node is retrieved once. Not safe for concurrent use.
type Ascending struct {
	l      loader
	top    Element
	from   uint64
	seeded bool
	stack  []frame
	err    error
}

// Ascend starts an ascending iteration of the pot topped by top (whose
// chunk is at topRef) at the first element whose key is at least from:
// from 0, the whole history.
func Ascend(g storage.Getter, top *Node, topRef swarm.Address, from uint64) *Ascending {
	return &Ascending{l: loader{g: g}, top: Element{Key: top.key, Ref: topRef, Node: top}, from: from}
}

// Retrievals is the number of nodes retrieved so far.
func (c *Ascending) Retrievals() int { return c.l.n }

// seek pushes the path to the first element at or above from: each node on
// it whose key is above from, with the forks left to visit after the one
// the path takes.
func (c *Ascending) seek(ctx context.Context) error {
	n, ref, floor := c.top.Node, c.top.Ref, -1
	for {
		switch {
		case c.from > n.key: // everything here is below from
			return nil
		case c.from == n.key: // the pin is the first; its forks are below it
			c.stack = append(c.stack, frame{n: n, ref: ref, floor: floor, next: KeyBits})
			return nil
		}
		p := PO(c.from, n.key) // > floor: from shares floor+1 bits with n's key
		c.stack = append(c.stack, frame{n: n, ref: ref, floor: floor, next: p + 1})
		if _, ok := n.Fork(p); !ok {
			return nil
		}
		r, child, err := c.l.child(ctx, n, p)
		if err != nil {
			return err
		}
		n, ref, floor = child, r, p
	}
}

// Next is the next element, io.EOF after the newest. An error is final.
func (c *Ascending) Next(ctx context.Context) (Element, error) {
	if c.err != nil {
		return Element{}, c.err
	}
	if !c.seeded {
		c.seeded = true
		if err := c.seek(ctx); err != nil {
			c.err = err
			return Element{}, err
		}
	}
	for len(c.stack) > 0 {
		f := &c.stack[len(c.stack)-1]
		if p := f.n.next(f.next); p < KeyBits {
			f.next = p + 1
			ref, n, err := c.l.child(ctx, f.n, p)
			if err != nil {
				c.err = err
				return Element{}, err
			}
			c.stack = append(c.stack, frame{n: n, ref: ref, floor: p, next: p + 1})
			continue
		}
		c.stack = c.stack[:len(c.stack)-1]
		return Element{Key: f.n.key, Ref: f.ref, Node: f.n}, nil
	}
	c.err = io.EOF
	return Element{}, io.EOF
}

// Seek is the first element whose key is at least key, and the number of
// nodes retrieved to find it: at most one per level of the pot. io.EOF:
// every key is below it.
func Seek(ctx context.Context, g storage.Getter, top *Node, topRef swarm.Address, key uint64) (Element, int, error) {
	c := Ascend(g, top, topRef, key)
	e, err := c.Next(ctx)
	return e, c.Retrievals(), err
}

// Lookup is the element with key, found by one descent from top: a node
// per level at most. ErrNotFound if no element has it.
func Lookup(ctx context.Context, g storage.Getter, top *Node, topRef swarm.Address, key uint64) (Element, int, error) {
	l := loader{g: g}
	n, ref := top, topRef
	for {
		switch {
		case key == n.key:
			return Element{Key: key, Ref: ref, Node: n}, l.n, nil
		case key > n.key:
			return Element{}, l.n, fmt.Errorf("%w: %#x", ErrNotFound, key)
		}
		p := PO(key, n.key)
		if _, ok := n.Fork(p); !ok {
			return Element{}, l.n, fmt.Errorf("%w: %#x", ErrNotFound, key)
		}
		r, child, err := l.child(ctx, n, p)
		if err != nil {
			return Element{}, l.n, err
		}
		n, ref = child, r
	}
}

// Anchor is the node a follower holds at its last index: its key, and the
// address of its chunk (the wrapped chunk of the update it verified).
type Anchor struct {
	Key uint64
	Ref swarm.Address
}

// CheckAnchor is SWIP-65's anchor check by descent: the pot topped by top
// must reference a.Ref where a.Key belongs. The descent stops at the fork
// that holds a.Ref, which is not retrieved; a node pinning a.Key at another
// reference, or no node there, is ErrAnchor. It returns the nodes
// retrieved: at most one per level.
func CheckAnchor(ctx context.Context, g storage.Getter, top *Node, topRef swarm.Address, a Anchor) (int, error) {
	l := loader{g: g}
	n, ref := top, topRef
	for {
		if a.Key >= n.key {
			if a.Key == n.key && ref.Equal(a.Ref) {
				return l.n, nil
			}
			return l.n, fmt.Errorf("%w: key %#x: %s pins %#x", ErrAnchor, a.Key, ref, n.key)
		}
		p := PO(a.Key, n.key)
		r, ok := n.Fork(p)
		switch {
		case !ok:
			return l.n, fmt.Errorf("%w: key %#x: no fork at %d of %s", ErrAnchor, a.Key, p, ref)
		case r.Equal(a.Ref):
			return l.n, nil
		}
		_, child, err := l.child(ctx, n, p)
		if err != nil {
			return l.n, err
		}
		n, ref = child, r
	}
}
