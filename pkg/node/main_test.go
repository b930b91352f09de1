// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// started by an init function of a package bee imports
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),

		// Left behind by bee v2.8.1's node.Shutdown, by name:
		// the warm-up waiter (node.go:1183) blocks until the node has
		// stabilised, which a short-lived node never does;
		goleak.IgnoreTopFunction("github.com/ethersphere/bee/v2/pkg/node.NewBee.func15"),
		// skip lists of pushsync and retrieval are never closed;
		goleak.IgnoreTopFunction("github.com/ethersphere/bee/v2/pkg/skippeers.(*List).worker"),
		// libp2p's UPnP discovery outlives the host for a few seconds;
		goleak.IgnoreAnyFunction("github.com/libp2p/go-libp2p/p2p/net/nat/internal/nat.discoverNATs.func1"),
		// a leveldb store is left open.
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mpoolDrain"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).compactionError"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mCompaction"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).tCompaction"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*session).refLoop"),
	)
}
