// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"slices"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
)

// TestTreePositions: a broker is the root of the cohort it brokers — depth
// 0, no parent, its members' nodes as children, each once however many
// streams it holds — and a node that subscribes or publishes there has the
// broker as its one parent, one level down. A position goes when its last
// stream does.
func TestTreePositions(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "tree-positions", admin)

	sub := subscribe(t, cl[0], broker, sp)
	p := publish(t, cl[1], broker, sp, admin, 0)
	sub2 := subscribe(t, cl[1], broker, sp)
	broker.rec.wait(t, "claim", kind(bps.EventClaim))

	want := []swarm.Address{cl[0].Overlay(), cl[1].Overlay()}
	slices.SortFunc(want, func(a, b swarm.Address) int { return a.Compare(b) })
	root := broker.svc.Tree()
	if len(root) != 1 || root[0].Depth != 0 || len(root[0].Parents) != 0 || root[0].Streams != 3 ||
		!slices.EqualFunc(root[0].Children, want, swarm.Address.Equal) {
		t.Fatalf("broker: %+v, want the root with children %v over 3 streams", root, want)
	}
	if got := broker.svc.CohortPeers(sp); !slices.EqualFunc(got, want, swarm.Address.Equal) {
		t.Fatalf("cohort peers %v, want %v", got, want)
	}
	for i, c := range cl {
		pos := c.svc.Tree()
		if len(pos) != 1 || pos[0].Depth != 1 || len(pos[0].Children) != 0 ||
			len(pos[0].Parents) != 1 || !pos[0].Parents[0].Equal(broker.Overlay()) ||
			string(pos[0].Spec.Canonical()) != string(sp.Canonical()) {
			t.Fatalf("client %d: %+v, want depth 1 under the broker", i, pos)
		}
	}

	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if pos := cl[0].svc.Tree(); len(pos) != 0 {
		t.Fatalf("client 0 after its stream closed: %+v, want no position", pos)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if pos := cl[1].svc.Tree(); len(pos) != 1 || len(pos[0].Parents) != 1 {
		t.Fatalf("client 1 with one stream left: %+v, want its parent", pos)
	}
	if err := sub2.Close(); err != nil {
		t.Fatal(err)
	}
	broker.rec.waitN(t, 3, "all streams left", kind(bps.EventLeave))
	if pos := broker.svc.Tree(); len(pos) != 0 {
		t.Fatalf("broker after every stream left: %+v", pos)
	}
}
