// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestHostileStrangerJoinsRationed: a peer with no stream in the cohort
// sends a full node 50 multihop Joins; they start at most
// Bounds.PeerProbeRounds probe rounds, the rest are answered from the
// pool and counted, and a joiner from another prefix still gets a round
// of its own.
func TestHostileStrangerJoinsRationed(t *testing.T) {
	t.Parallel()
	const bound = 3
	net := newNetwork(t)
	sp := feedSpec(t, "stranger's joins", newKey(t))
	broker := newNode(t, net, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1, PeerProbeRounds: bound}, Tree: bps.Tree{ProbeWait: 200 * time.Millisecond}})
	kid, stranger, honest := newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})
	for honest.Overlay().Bytes()[0] == stranger.Overlay().Bytes()[0] {
		honest = newNode(t, net, bps.Options{})
	}
	for _, n := range []*tnode{kid, stranger, honest} {
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	if a := openRaw(t, kid, broker).join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Listen: true, Multihop: true}); a.Status != pb.Status_OK {
		t.Fatal(a.Status)
	}
	const joins = 50
	began := time.Now()
	for range joins {
		if a := openRaw(t, stranger, broker).join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Listen: true, Multihop: true}); a.Status != pb.Status_FULL {
			t.Fatalf("a stranger's join: %v, want FULL", a)
		}
	}
	// The bound's bucket refills at the bound per 10 s.
	most := bound + int(float64(bound)*time.Since(began).Seconds()/10) + 1
	if n := broker.rec.count(kind(bps.EventProbe)); n > most {
		t.Fatalf("a stranger's %d joins made the node probe %d times, want at most %d", joins, n, most)
	}
	if n := broker.svc.Rationed(); n < joins-most {
		t.Fatalf("%d joins rationed, want at least %d", n, joins-most)
	}
	before := broker.rec.count(kind(bps.EventProbe))
	if a := openRaw(t, honest, broker).join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress, Listen: true, Multihop: true}); a.Status != pb.Status_FULL {
		t.Fatalf("an honest join: %v, want FULL", a)
	}
	if n := broker.rec.count(kind(bps.EventProbe)); n != before+1 {
		t.Fatalf("an honest joiner from another prefix made the node probe %d times, want 1", n-before)
	}
}
