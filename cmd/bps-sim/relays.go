// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"errors"
	"sync/atomic"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest/bpsnet"
)

// applyRelays sets the service options of a multihop run. This pkg/bps has
// no relays yet: every subscriber joins its broker (SWIP-74).
func applyRelays(_ *bps.Options, sc Scenario) error {
	if sc.RelayCapacity > 0 || sc.Parents > 1 || sc.ProbeWait > 0 {
		return errors.New("-relay-capacity, -parents 2 and -probe-wait need a pkg/bps with relays (SWIP-61)")
	}
	return nil
}

// withDialer returns the options of the node self will hold: this pkg/bps
// joins only the broker it is given, to which the layout connects every
// node, so there is nothing to dial.
func withDialer(o bps.Options, _ *bpsnet.Network, _ *atomic.Pointer[bpsnet.Node]) bps.Options {
	return o
}
