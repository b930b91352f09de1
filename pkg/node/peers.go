// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Connect connects the node to the peer at underlay (a multiaddr ending in
// /p2p/<peer id>) as bee's POST /connect does, in process: an ordinary
// peer of bee's kademlia, which is what a bootnode is not. bee v2.8.1
// leaves a peer it reached as a bootnode out of salud's look at the
// network (GET /status of every full peer, from which it learns the
// network's storage radius) and out of pushsync's choice of a storer. A
// node whose only full peer is its bootnode therefore has no storage
// radius, and until it has one its uploads and retrievals wait (see
// StorageRadius). It returns the peer's overlay.
func (n *Node) Connect(ctx context.Context, underlay string) (swarm.Address, error) {
	if !strings.HasPrefix(underlay, "/") {
		return swarm.ZeroAddress, fmt.Errorf("connect %q: not a multiaddr", underlay)
	}
	rec := httptest.NewRecorder()
	n.in.APIServer.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/connect"+underlay, nil).WithContext(ctx))
	if rec.Code != http.StatusOK {
		return swarm.ZeroAddress, fmt.Errorf("connect %s: %w", underlay, failure(rec))
	}
	var resp struct {
		Address swarm.Address `json:"address"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		return swarm.ZeroAddress, fmt.Errorf("connect %s: %w", underlay, err)
	}
	return resp.Address, nil
}

// StorageRadius is the storage radius the node works with (bee's GET
// /topology depth), and whether it has one yet. bee v2.8.1 learns it from
// the first round of salud that reaches a full peer which is not a
// bootnode: a light node takes the network's, a full node's reserve starts
// at it. Until then pushsync (uploading, and storing a chunk a peer
// pushes) and retrieval wait for it — a node's first round runs at its
// first connection, the next 10 s later, then 20 s, 40 s… — and a full
// node without a full peer never has one.
func (n *Node) StorageRadius() (radius uint8, known bool, err error) {
	rec := httptest.NewRecorder()
	n.in.APIServer.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/topology", nil))
	if rec.Code != http.StatusOK {
		return 0, false, fmt.Errorf("bee /topology: %w", failure(rec))
	}
	var resp struct {
		Depth *uint8 `json:"depth"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		return 0, false, fmt.Errorf("bee /topology: %w", err)
	}
	if resp.Depth == nil {
		return 0, false, fmt.Errorf("bee /topology: no depth")
	}
	// kademlia starts at swarm.MaxPO and is told the radius once known.
	return *resp.Depth, *resp.Depth < swarm.MaxPO, nil
}
