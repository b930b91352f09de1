// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
)

// Persistence in the simulator (SWIP-65, issue 10): with -persist the
// publishers upload every update they publish — the single owner chunk and
// its wrapped chunk — to one store every node reads (the network's storage,
// without its latency), and a subscriber that sees an index past the next
// one it expects recovers the missed updates from it with bps.FetchUpdate:
// the retrieval and verification the node's own recovery uses. The run
// reports the bytes stored, the chunks retrieved and what was recovered.

// maxRecover bounds the updates one gap recovers, as the node's recovery
// does.
const maxRecover = 64

// simStorage is a bps.Storage over memory, shared by every node of a run.
type simStorage struct {
	mu     sync.Mutex
	chunks map[string]swarm.Chunk

	stored     atomic.Uint64 // bytes of chunk data stored
	uploads    atomic.Uint64
	retrievals atomic.Uint64 // fetches, found or not
}

var _ bps.Storage = (*simStorage)(nil)

func newSimStorage() *simStorage { return &simStorage{chunks: make(map[string]swarm.Chunk)} }

func (st *simStorage) CheckBatch(context.Context, []byte) error { return nil }

// Upload stores the SOC (id ‖ signature ‖ data at its address) and its
// wrapped chunk (data at its own address), built with bee's soc and cac.
func (st *simStorage) Upload(_ context.Context, _ []byte, owner, id, sig, data []byte) error {
	wrapped, err := cac.NewWithDataSpan(data)
	if err != nil {
		return err
	}
	addr, err := soc.CreateAddress(id, owner)
	if err != nil {
		return err
	}
	socData := make([]byte, 0, len(id)+len(sig)+len(data))
	socData = append(append(append(socData, id...), sig...), data...)
	st.mu.Lock()
	st.chunks[addr.ByteString()] = swarm.NewChunk(addr, socData)
	st.chunks[wrapped.Address().ByteString()] = wrapped
	st.mu.Unlock()
	st.stored.Add(uint64(len(socData) + len(data)))
	st.uploads.Add(1)
	return nil
}

var errNotStored = errors.New("bps-sim: chunk not stored")

func (st *simStorage) Fetch(_ context.Context, addr swarm.Address) (swarm.Chunk, error) {
	st.retrievals.Add(1)
	st.mu.Lock()
	defer st.mu.Unlock()
	if ch, ok := st.chunks[addr.ByteString()]; ok {
		return ch, nil
	}
	return nil, errNotStored
}

// PersistResult is what persistence did in a run.
type PersistResult struct {
	Uploads     uint64 `json:"uploads"`      // updates stored
	BytesStored uint64 `json:"bytes_stored"` // SOC and wrapped chunk data
	Retrievals  uint64 `json:"retrievals"`   // chunks fetched for recovery
	Recovered   uint64 `json:"recovered"`    // missed updates recovered, verified
	Unrecovered uint64 `json:"unrecovered"`  // missed updates not recovered (not stored, or past the bound)
}

// upload stores what a publisher published: data is update index of the
// feed on sp's topic for storage (bps.StorageUpdate: under the channel's
// own id).
func (st *simStorage) upload(ctx context.Context, sp *bps.Spec, owner []byte, index uint64, data []byte) error {
	const idSize, sigSize = swarm.HashSize, swarm.SocSignatureSize
	if len(data) < idSize+sigSize+swarm.SpanSize {
		return errors.New("bps-sim: not a SOC")
	}
	return st.Upload(ctx, nil, owner, bps.FeedID(sp.Topic, index), data[idSize:idSize+sigSize], data[idSize+sigSize:])
}

// recoverGap fetches updates from…to of owner's feed in sp, at most
// maxRecover (the latest), and returns the indices recovered.
func (st *simStorage) recoverGap(ctx context.Context, sp *bps.Spec, owner []byte, from, to uint64, res *persistCounts) []uint64 {
	if to-from+1 > maxRecover {
		res.unrecovered.Add(to - from + 1 - maxRecover)
		from = to - maxRecover + 1
	}
	var got []uint64
	for i := from; i <= to; i++ {
		if _, err := bps.FetchUpdate(ctx, st, sp, owner, i); err != nil {
			res.unrecovered.Add(1)
			continue
		}
		res.recovered.Add(1)
		got = append(got, i)
	}
	return got
}

// persistCounts are the run's recovery counts.
type persistCounts struct {
	recovered, unrecovered atomic.Uint64
}

func (s *sim) collectPersistence(res *Result) {
	if s.store == nil {
		return
	}
	res.Persistence = &PersistResult{
		Uploads: s.store.uploads.Load(), BytesStored: s.store.stored.Load(), Retrievals: s.store.retrievals.Load(),
		Recovered: s.persisted.recovered.Load(), Unrecovered: s.persisted.unrecovered.Load(),
	}
}
