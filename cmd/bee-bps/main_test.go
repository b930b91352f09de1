// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// started by an init function of a package bee imports
		goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"),

		// Left behind by bee v2.8.1's node.Shutdown (see pkg/node's
		// TestMain for what each one is).
		goleak.IgnoreTopFunction("github.com/ethersphere/bee/v2/pkg/node.NewBee.func15"),
		goleak.IgnoreTopFunction("github.com/ethersphere/bee/v2/pkg/skippeers.(*List).worker"),
		goleak.IgnoreAnyFunction("github.com/libp2p/go-libp2p/p2p/net/nat/internal/nat.discoverNATs.func1"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mpoolDrain"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).compactionError"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).mCompaction"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*DB).tCompaction"),
		goleak.IgnoreTopFunction("github.com/syndtr/goleveldb/leveldb.(*session).refLoop"),
	)
}
