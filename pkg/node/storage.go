// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/ethersphere/bee/v2/pkg/addressbook"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	ma "github.com/multiformats/go-multiaddr"
)

// Storage is the node's Swarm storage through bee's own API handler, in
// process: uploads go through bee's stamper and pushsync (POST /chunks,
// POST /soc with swarm-postage-batch-id, pushed at once, not deferred),
// retrieval through bee's netstore (GET /chunks), a batch is judged by GET
// /stamps/{id}. Nothing is reimplemented: bee stamps, pushes and retrieves
// with its own code. It satisfies bps.Storage.
type Storage struct {
	bee http.Handler
}

// ErrNotStored is Fetch's answer for a chunk the network does not hold.
var ErrNotStored = errors.New("chunk not found")

// StorageError is a non-2xx answer of bee's API: its status and message.
type StorageError struct {
	Status  int
	Message string
}

func (e *StorageError) Error() string {
	return fmt.Sprintf("bee api: %d %s", e.Status, e.Message)
}

// StatusCode is bee's status.
func (e *StorageError) StatusCode() int { return e.Status }

// storageConn is what a PubSubHandlerFactory gets as its Connector: bee's
// libp2p service, and the node's Storage, which a handler that persists and
// recovers finds by asserting its methods (pkg/api does, for bps.Storage).
type storageConn struct {
	Connector
	*Storage
	book addressbook.Getter
}

// Underlays are the underlays bee's addressbook holds for overlay, as the
// peer signed them (api.AddressBook): a dApp may name a broker by overlay
// and the node dials it, as bee's own topology would.
func (c storageConn) Underlays(overlay swarm.Address) ([]ma.Multiaddr, error) {
	a, _, err := c.book.Get(overlay)
	if err != nil {
		return nil, err
	}
	return a.Underlays, nil
}

// call runs one request through bee's handler and returns the recorded
// answer.
func (s *Storage) call(ctx context.Context, method, path string, body []byte, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body)).WithContext(ctx)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	s.bee.ServeHTTP(rec, req)
	return rec
}

// failure turns a non-2xx answer into a *StorageError carrying bee's
// message.
func failure(rec *httptest.ResponseRecorder) error {
	var m struct {
		Message string `json:"message"`
	}
	msg := rec.Body.String()
	if json.Unmarshal(rec.Body.Bytes(), &m) == nil && m.Message != "" {
		msg = m.Message
	}
	return &StorageError{Status: rec.Code, Message: msg}
}

// stampInfo is what GET /stamps/{id} answers that a batch check reads.
type stampInfo struct {
	Usable        bool   `json:"usable"`
	Utilization   uint32 `json:"utilization"`
	Depth         uint8  `json:"depth"`
	BucketDepth   uint8  `json:"bucketDepth"`
	ImmutableFlag bool   `json:"immutableFlag"`
	Exists        bool   `json:"exists"`
}

// CheckBatch asks bee (GET /stamps/{id}) whether the node can stamp with
// batch: bee's own answer if not (404: not the node's or unknown, 400: not
// usable, 503: the postage listener has not synced), 402 if its fullest
// bucket is full and the batch immutable (every stamp would fail), else
// nil. The error, if any, is a *StorageError.
func (s *Storage) CheckBatch(ctx context.Context, batch []byte) error {
	rec := s.call(ctx, http.MethodGet, "/stamps/"+hex.EncodeToString(batch), nil)
	if rec.Code != http.StatusOK {
		return failure(rec)
	}
	var st stampInfo
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		return &StorageError{Status: http.StatusInternalServerError, Message: "GET /stamps: " + err.Error()}
	}
	switch {
	case !st.Exists:
		return &StorageError{Status: http.StatusNotFound, Message: "batch does not exist"}
	case !st.Usable:
		return &StorageError{Status: http.StatusBadRequest, Message: "batch not usable"}
	case st.ImmutableFlag && st.Depth >= st.BucketDepth && uint64(st.Utilization) >= 1<<(st.Depth-st.BucketDepth):
		return &StorageError{Status: http.StatusPaymentRequired, Message: "batch exhausted: its immutable buckets are full"}
	}
	return nil
}

// Upload stores the wrapped chunk (POST /chunks: span ‖ payload) and the
// SOC (POST /soc/{owner}/{id}?sig=…), both stamped with batch and pushed to
// the network before it returns — the two at once: bee's feed reader
// retrieves the wrapped chunk by its own address, pot descent too
// (SWIP-65).
func (s *Storage) Upload(ctx context.Context, batch []byte, owner, id, sig, data []byte) error {
	b := hex.EncodeToString(batch)
	var wrapped error
	done := make(chan struct{})
	go func() {
		defer close(done)
		rec := s.call(ctx, http.MethodPost, "/chunks", data,
			"Swarm-Postage-Batch-Id", b, "Content-Type", "application/octet-stream")
		if rec.Code != http.StatusCreated {
			wrapped = fmt.Errorf("wrapped chunk: %w", failure(rec))
		}
	}()
	path := fmt.Sprintf("/soc/%s/%s?sig=%s", hex.EncodeToString(owner), hex.EncodeToString(id), hex.EncodeToString(sig))
	rec := s.call(ctx, http.MethodPost, path, data,
		"Swarm-Postage-Batch-Id", b, "Swarm-Deferred-Upload", "false", "Content-Type", "application/octet-stream")
	<-done
	if rec.Code != http.StatusCreated {
		return errors.Join(fmt.Errorf("soc: %w", failure(rec)), wrapped)
	}
	return wrapped
}

// Fetch retrieves the chunk at addr (GET /chunks/{address}): from the
// node's store or the network, by bee's retrieval. A chunk nobody holds is
// ErrNotStored.
func (s *Storage) Fetch(ctx context.Context, addr swarm.Address) (swarm.Chunk, error) {
	rec := s.call(ctx, http.MethodGet, "/chunks/"+addr.String(), nil)
	switch rec.Code {
	case http.StatusOK:
		return swarm.NewChunk(addr, rec.Body.Bytes()), nil
	case http.StatusNotFound:
		return nil, fmt.Errorf("%w: %s", ErrNotStored, addr)
	}
	return nil, failure(rec)
}
