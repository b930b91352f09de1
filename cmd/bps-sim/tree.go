// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"cmp"
	"slices"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/treeview"
)

// The tree of a cohort as the run left it, assembled from every node's own
// report of its place (bps.Service.Tree): its depth, its parents and its
// children. Nothing here trusts one node's view of another: a node is drawn
// at the depth it states and under the parents it names; a parent's list of
// children is used only for the relays that failed, whose children no
// longer name them.

// member is a node of a cohort as the simulation knows it: where it is
// asked for its place, and in what role.
type member struct {
	overlay swarm.Address
	role    string
	svc     *bps.Service // nil: down
}

// positionOf is a node's position in the cohort keyed key, if it has one.
// A node that brokers the cohort and also follows it elsewhere has two; the
// root's wins, as only the broker brokers it here.
func positionOf(svc *bps.Service, key string) (bps.Position, bool) {
	if svc == nil {
		return bps.Position{}, false
	}
	for _, p := range svc.Tree() {
		if p.Spec != nil && p.Spec.String() == key {
			return p, true
		}
	}
	return bps.Position{}, false
}

// failedRelay is a relay killed during the run, with its position when it
// was killed.
type failedRelay struct {
	overlay swarm.Address
	pos     bps.Position
}

// buildTree assembles a cohort's tree from its members' positions now and
// the positions of the relays that failed, which are drawn where they were
// with the children they had.
func buildTree(key string, members []member, failed []failedRelay) treeview.Tree {
	t := treeview.Tree{Cohort: key}
	index := make(map[string]int, len(members)+len(failed))
	type raw struct {
		parents  []swarm.Address
		children []swarm.Address
	}
	var raws []raw
	add := func(a swarm.Address, n treeview.Node, r raw) {
		if _, ok := index[a.ByteString()]; ok {
			return
		}
		index[a.ByteString()] = len(t.Nodes)
		t.Nodes = append(t.Nodes, n)
		raws = append(raws, r)
	}
	// The broker first, so that it is node 0.
	slices.SortStableFunc(members, func(a, b member) int {
		ab, bb := a.role == treeview.RoleBroker, b.role == treeview.RoleBroker
		switch {
		case ab == bb:
			return 0
		case ab:
			return -1
		}
		return 1
	})
	for _, m := range members {
		n := treeview.Node{Overlay: m.overlay.String(), Role: m.role, Depth: -1}
		var r raw
		if p, ok := positionOf(m.svc, key); ok {
			n.Depth = int(p.Depth)
			n.Children = len(p.Children)
			r = raw{parents: p.Parents, children: p.Children}
		}
		add(m.overlay, n, r)
	}
	for _, f := range failed {
		i, ok := index[f.overlay.ByteString()]
		if !ok {
			add(f.overlay, treeview.Node{Overlay: f.overlay.String(), Role: treeview.RoleSubscriber}, raw{})
			i = index[f.overlay.ByteString()]
		}
		n := &t.Nodes[i]
		if n.Depth >= 0 {
			continue // it came back, and is drawn where it is now
		}
		n.Failed, n.Depth, n.Children = true, int(f.pos.Depth), len(f.pos.Children)
		raws[i] = raw{parents: f.pos.Parents}
		for _, c := range f.pos.Children {
			if j, ok := index[c.ByteString()]; ok {
				n.Lost = append(n.Lost, j)
			}
		}
	}
	for i := range t.Nodes {
		for _, p := range raws[i].parents {
			if j, ok := index[p.ByteString()]; ok {
				t.Nodes[i].Parents = append(t.Nodes[i].Parents, j)
			}
		}
		// The shallowest parent first: the one the node's depth comes from.
		slices.SortStableFunc(t.Nodes[i].Parents, func(a, b int) int { return cmp.Compare(t.Nodes[a].Depth, t.Nodes[b].Depth) })
	}
	return t
}
