// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"reflect"
	"testing"

	"github.com/ethersphere/bps/pkg/bps"
)

// TestNodeDefaults: a full node started with no bps-* option runs
// bps.NodeOptions and bps.DefaultPrices, the one source of the node's
// defaults that bps-sim reads too (cmd/bps-sim: TestDefaultsAreTheNodes).
// TestLazyPushFlag: lazy push is the node's default, and --bps-lazy-push
// false turns it off (every frame whole, asked for and sent).
func TestLazyPushFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		off  bool
	}{{nil, false}, {[]string{"--bps-lazy-push=false"}, true}, {[]string{"--bps-lazy-push"}, false}} {
		_, o, _, err := parseStart(t, append(tc.args, "--password", "x")...)
		if err != nil {
			t.Fatal(err)
		}
		if o.NoLazyPush != tc.off {
			t.Errorf("%v: NoLazyPush %t, want %t", tc.args, o.NoLazyPush, tc.off)
		}
	}
}

func TestNodeDefaults(t *testing.T) {
	v, err := parseStartOptions(t)
	if err != nil {
		t.Fatal(err)
	}
	o, err := bpsOptions(v)
	if err != nil {
		t.Fatal(err)
	}
	d := bps.NodeOptions()
	want := bps.Options{
		Bounds: bps.Bounds{
			MaxStreamsPerCohort: d.MaxStreamsPerCohort,
			MaxCohorts:          d.MaxCohorts,
			MaxCohortsPerPeer:   d.MaxCohortsPerPeer,
			QueueLen:            d.QueueLen,
		},
		Timing: bps.Timing{
			Inactivity:      d.Inactivity,
			ClaimDeadline:   d.ClaimDeadline,
			RevocationGrace: d.RevocationGrace,
		},
		Tree: bps.Tree{
			RelayCapacity: d.RelayCapacity,
			NoLazyPush:    d.NoLazyPush,
			Heartbeat:     d.Heartbeat,
		},
		Wire: d.Wire,
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("bee-bps's default options %+v, want bps.NodeOptions' %+v", o, want)
	}
	if o.RelayCapacity != bps.DefaultRelayCapacity || o.RelayCapacity == 0 || o.SingleParent {
		t.Errorf("a full node relays %d children with single parent %t, want %d and two parents", o.RelayCapacity, o.SingleParent, bps.DefaultRelayCapacity)
	}
	p, err := bpsPrices(v)
	if err != nil || p != bps.DefaultPrices() {
		t.Errorf("bee-bps's default prices %+v (%v), want %+v", p, err, bps.DefaultPrices())
	}
}
