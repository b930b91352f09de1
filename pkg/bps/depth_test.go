// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protodelim"
)

// TestAckDepthBroker: a broker's Ack states depth 0 (SWIP-61;
// docs/protocol.md, "Depth") and the subscriber that reads it sits one
// level below: over the wire, the subscriber's Tree shows depth 1 under
// the broker, the broker's depth 0 with the subscriber as its child.
func TestAckDepthBroker(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "ack-depth-broker", admin)

	if ack := openRaw(t, cl[1], broker).join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress}); ack.GetStatus() != pb.Status_OK || ack.GetDepth() != 0 {
		t.Fatalf("broker's Ack: %v, want OK at depth 0", ack)
	}
	sub := subscribe(t, cl[0], broker, sp)
	defer func() { _ = sub.Close() }()
	broker.rec.waitN(t, 2, "both joins", kind(bps.EventJoin))

	pos := cl[0].svc.Tree()
	if len(pos) != 1 || pos[0].Depth != 1 || len(pos[0].Parents) != 1 || !pos[0].Parents[0].Equal(broker.Overlay()) {
		t.Fatalf("subscriber: %+v, want depth 1 under the broker", pos)
	}
	want := []swarm.Address{cl[0].Overlay(), cl[1].Overlay()}
	slices.SortFunc(want, func(a, b swarm.Address) int { return a.Compare(b) })
	root := broker.svc.Tree()
	if len(root) != 1 || root[0].Depth != 0 || len(root[0].Parents) != 0 ||
		!slices.EqualFunc(root[0].Children, want, swarm.Address.Equal) {
		t.Fatalf("broker: %+v, want the root at depth 0 with children %v", root, want)
	}
}

// referringRoot is a cohort's root that is full: it answers every Join
// FULL, naming to at depth as the one candidate. A node at a depth other
// than the root's is reached only through a candidate — a parent reached
// as the root must state 0 (TestHostileNamedBrokerDepth) — so the tests
// that put a node under a parent stating some depth name this root as the
// broker.
func referringRoot(t *testing.T, net *streamtest.Network, to swarm.Address, depth uint32) *streamtest.Node {
	t.Helper()
	nd := net.NewNode()
	if err := nd.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			if err := protodelim.UnmarshalFrom(newByteReader(s), new(pb.Join)); err != nil {
				return err
			}
			ack := &pb.Ack{Status: pb.Status_FULL, Multihop: true, Candidates: []*pb.Candidate{{Overlay: to.Bytes(), Depth: depth}}}
			if _, err := s.Write(bps.EncodeFrame(ack)); err != nil {
				return err
			}
			return s.FullClose()
		}}}}); err != nil {
		t.Fatal(err)
	}
	return nd
}

// statingParent is a node that answers every Join OK stating depth, then
// holds the stream until the joiner closes it.
func statingParent(t *testing.T, net *streamtest.Network, depth uint32) *streamtest.Node {
	t.Helper()
	return ackingParent(t, net, &pb.Ack{Status: pb.Status_OK, Depth: depth})
}

// TestAckDepthStated: a node's depth is one below its shallowest parent's
// stated depth. (A parent stating a depth past the bound is refused, so no
// depth wraps to the root's 0: TestHostileParentDepthBound.)
func TestAckDepthStated(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin := newKey(t)
	sp := feedSpec(t, "ack-depth-stated", admin)
	deep, shallow, far := statingParent(t, net, 4), statingParent(t, net, 2), statingParent(t, net, 40)
	client := newNode(t, net, bps.Options{})
	for _, p := range []*streamtest.Node{deep, shallow, far} {
		if err := net.Connect(client.Node, p); err != nil {
			t.Fatal(err)
		}
	}
	depth := func(what string, want uint32, parents ...*streamtest.Node) {
		t.Helper()
		pos := client.svc.Tree()
		overlays := make([]swarm.Address, 0, len(parents))
		for _, p := range parents {
			overlays = append(overlays, p.Overlay())
		}
		slices.SortFunc(overlays, func(a, b swarm.Address) int { return a.Compare(b) })
		if len(pos) != 1 || pos[0].Depth != want || !slices.EqualFunc(pos[0].Parents, overlays, swarm.Address.Equal) {
			t.Fatalf("%s: %+v, want depth %d under %v", what, pos, want, overlays)
		}
	}
	stated := map[*streamtest.Node]uint32{deep: 4, shallow: 2, far: 40}
	sub := func(p *streamtest.Node) *bps.Subscription {
		t.Helper()
		root := referringRoot(t, net, p.Overlay(), stated[p])
		if err := net.Connect(client.Node, root); err != nil {
			t.Fatal(err)
		}
		s, err := client.svc.Subscribe(ctxT(t), root.Overlay(), sp)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	subFar := sub(far)
	depth("under a parent at depth 40", 41, far)
	subDeep := sub(deep)
	depth("under parents at depths 4 and 40", 5, deep, far)
	subShallow := sub(shallow)
	depth("under parents at depths 2, 4 and 40", 3, deep, shallow, far)
	if err := subShallow.Close(); err != nil {
		t.Fatal(err)
	}
	depth("the shallow parent gone", 5, deep, far)
	for _, s := range []*bps.Subscription{subDeep, subFar} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if pos := client.svc.Tree(); len(pos) != 0 {
		t.Fatalf("every parent gone: %+v, want no position", pos)
	}
}
