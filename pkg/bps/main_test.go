// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"testing"

	"go.uber.org/goleak"
)

// leakOptions are goleak's exceptions: none, but for what a build-tagged
// benchmark file adds (fanout_libp2p_bench_test.go: libp2p's).
var leakOptions []goleak.Option

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, leakOptions...)
}
