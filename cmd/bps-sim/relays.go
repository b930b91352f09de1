// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest/bpsnet"
)

// applyRelays sets the service options of a multihop run (SWIP-61): every
// node relays up to RelayCapacity children per cohort, and a subscriber
// keeps two parents unless Parents is 1.
func applyRelays(o *bps.Options, sc Scenario) {
	o.RelayCapacity = sc.RelayCapacity
	o.SingleParent = sc.Parents < 2
	o.NoLazyPush = !sc.LazyParents
	o.ProbeWait = time.Duration(sc.ProbeWait)
	o.Heartbeat = time.Duration(sc.Heartbeat)
}

// withDialer returns the options of the node self will hold: it names its
// overlay as its underlay in the candidates it offers, and it reaches a
// candidate or a reparent's target by connecting to it on the in-memory
// network, as a bee node dials an underlay. self is set once the node
// exists; after a restart the overlay finds the node's new incarnation.
func withDialer(o bps.Options, net *bpsnet.Network, self *atomic.Pointer[bpsnet.Node]) bps.Options {
	o.Underlays = func() [][]byte {
		nd := self.Load()
		if nd == nil {
			return nil
		}
		return [][]byte{nd.Overlay().Bytes()}
	}
	o.Connect = func(ctx context.Context, peer swarm.Address, _ [][]byte) error {
		nd := self.Load()
		if nd == nil {
			return errors.New("bps-sim: node not started")
		}
		me, ok := net.Lookup(nd.Overlay())
		if !ok {
			return errors.New("bps-sim: node gone")
		}
		them, ok := net.Lookup(peer)
		if !ok {
			return errors.New("bps-sim: no such node")
		}
		return net.Connect(me, them)
	}
	return o
}
