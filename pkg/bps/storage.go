// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Storage is the node's Swarm storage as SWIP-65 uses it: bee's own upload
// path (stamping with a postage batch the node owns, then pushsync) and
// bee's own retrieval. pkg/node implements it over bee's API handler, in
// process; without a Storage the node is live only (no persistence, no
// recovery).
type Storage interface {
	// CheckBatch reports whether the node can stamp with batch: nil, or an
	// error with bee's answer (unknown, not the node's, not usable,
	// exhausted) that has a StatusCode() int method, as *BatchError.
	CheckBatch(ctx context.Context, batch []byte) error
	// Upload stores a single owner chunk stamped with batch, and its
	// wrapped content addressed chunk separately (bee's feed reader
	// retrieves the wrapped chunk by its own address): owner and id name
	// the SOC, sig is its signature, data its wrapped chunk's span (8, LE)
	// ‖ payload. It returns once bee has pushed both to the network.
	Upload(ctx context.Context, batch []byte, owner, id, sig, data []byte) error
	// Fetch retrieves the chunk at addr from the network: for a SOC, its
	// data is id ‖ signature ‖ span ‖ payload. Any error (nobody has it,
	// ctx ended) leaves the chunk unrecovered.
	Fetch(ctx context.Context, addr swarm.Address) (swarm.Chunk, error)
}

// BatchError is a postage batch the node cannot stamp with, as bee answers
// it: its HTTP status (400 invalid or not usable, 402 exhausted, 404 not
// owned by the node or unknown) and reason.
type BatchError struct {
	Status int
	Reason string
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("postage batch: %s (%d %s)", e.Reason, e.Status, http.StatusText(e.Status))
}

// StatusCode is the HTTP status of the refusal.
func (e *BatchError) StatusCode() int { return e.Status }

// FetchUpdate retrieves update index of owner's feed in the FEED_TOPIC
// cohort sp (SWIP-65: at keccak256(keccak256(topic ‖ index) ‖ owner), bee's
// feed addressing, the id from bee's feeds package) and verifies it exactly
// as a live delivery is verified — a valid SOC at that address, signed by
// owner. It returns the update as stored (the channel's id in the id slot:
// no challenge gives it, so it is never valid on a stream), Recovered.
func FetchUpdate(ctx context.Context, st Storage, sp *Spec, owner []byte, index uint64) (Delivery, error) {
	addr, err := soc.CreateAddress(FeedID(sp.Topic, index), owner)
	if err != nil {
		return Delivery{}, err
	}
	ch, err := st.Fetch(ctx, addr)
	if err != nil {
		return Delivery{}, err
	}
	data := ch.Data()
	if len(data) < socHeaderSize || len(data) > maxSOCDataSize {
		return Delivery{}, fmt.Errorf("%w: update %d of %x: %d bytes", errMalformed, index, owner, len(data))
	}
	wire := bytes.Clone(data)
	s, err := readSOC(wire)
	if err != nil || !bytes.Equal(s.ID(), FeedID(sp.Topic, index)) || !bytes.Equal(s.OwnerAddress(), owner) {
		return Delivery{}, fmt.Errorf("%w: update %d of %x from storage: %s", errMalformed, index, owner, CounterInvalidSOC)
	}
	return Delivery{Kind: pb.Kind_DATA, Index: index, Address: addr, Owner: bytes.Clone(owner), Data: wire, Recovered: true}, nil
}
