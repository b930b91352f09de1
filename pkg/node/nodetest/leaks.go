// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package nodetest holds what tests that start real bee nodes share.
package nodetest

import "go.uber.org/goleak"

// LeakOptions are the goleak exceptions, by name, for goroutines bee v2.8.1
// leaves behind after node.Shutdown (and one an imported package starts at
// init). Anything else still running fails the test.
func LeakOptions() []goleak.Option {
	return []goleak.Option{
		// started by an init function of a package bee imports
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),
		// the warm-up waiter (bee's node.go:1183) blocks until the node has
		// stabilised, which a short-lived node never does;
		goleak.IgnoreTopFunction("github.com/ethersphere/bee/v2/pkg/node.NewBee.func15"),
		// skip lists of pushsync and retrieval are never closed;
		goleak.IgnoreTopFunction("github.com/ethersphere/bee/v2/pkg/skippeers.(*List).worker"),
		// libp2p's UPnP discovery outlives the host for a few seconds;
		goleak.IgnoreAnyFunction("github.com/libp2p/go-libp2p/p2p/net/nat/internal/nat.discoverNATs.func1"),
		// a light node syncs postage in the background (bee's node.go:965)
		// and waits for the listener's first sync, which a node shut down
		// before it never sends;
		goleak.IgnoreTopFunction("github.com/ethersphere/bee/v2/pkg/postage/batchservice.(*batchService).Start"),
		// a leveldb store is left open.
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mpoolDrain"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).compactionError"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mCompaction"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).tCompaction"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*session).refLoop"),
	}
}
