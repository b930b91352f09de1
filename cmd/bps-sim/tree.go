// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"cmp"
	"slices"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
)

// The tree of a cohort as the run left it, assembled from every node's own
// report of its place (bps.Service.Tree): its depth, its parents and its
// children. Nothing here trusts one node's view of another: a node is drawn
// at the depth it states and under the parents it names; a parent's list of
// children is used only for the relays that failed, whose children no
// longer name them.

// Roles of the nodes in a cohort's tree.
const (
	roleBroker     = "broker"
	rolePublisher  = "publisher"
	roleSubscriber = "subscriber"
)

// TreeNode is one node of a cohort's tree.
type TreeNode struct {
	Overlay  string `json:"overlay"` // hex
	Role     string `json:"role"`
	Depth    int    `json:"depth"`    // as the node states it; -1: not in the tree (detached)
	Parents  []int  `json:"parents"`  // indices into CohortTree.Nodes, the shallowest first
	Children int    `json:"children"` // distinct child peers, as the node reports them
	Failed   bool   `json:"failed"`   // a relay killed during the run: drawn where it was
	Lost     []int  `json:"lost"`     // a failed relay's children when it failed
}

// CohortTree is one cohort's tree: the root (the broker) first.
type CohortTree struct {
	Cohort string     `json:"cohort"`
	Nodes  []TreeNode `json:"nodes"`
}

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
func buildTree(key string, members []member, failed []failedRelay) CohortTree {
	t := CohortTree{Cohort: key}
	index := make(map[string]int, len(members)+len(failed))
	type raw struct {
		parents  []swarm.Address
		children []swarm.Address
	}
	var raws []raw
	add := func(a swarm.Address, n TreeNode, r raw) {
		if _, ok := index[a.ByteString()]; ok {
			return
		}
		index[a.ByteString()] = len(t.Nodes)
		t.Nodes = append(t.Nodes, n)
		raws = append(raws, r)
	}
	// The broker first, so that it is node 0.
	slices.SortStableFunc(members, func(a, b member) int {
		return cmp.Compare(boolInt(a.role != roleBroker), boolInt(b.role != roleBroker))
	})
	for _, m := range members {
		n := TreeNode{Overlay: m.overlay.String(), Role: m.role, Depth: -1}
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
			add(f.overlay, TreeNode{Overlay: f.overlay.String(), Role: roleSubscriber}, raw{})
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

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TreeStats summarises a cohort's tree.
type TreeStats struct {
	Nodes       int            `json:"nodes"`
	Detached    int            `json:"detached"` // no position in the cohort at the end
	Failed      int            `json:"failed"`
	MaxDepth    int            `json:"max_depth"`
	Depth       map[int]int    `json:"depth"`       // nodes by depth (failed relays excluded)
	Parents     map[int]int    `json:"parents"`     // live non-root nodes by number of parents
	Fanout      map[int]int    `json:"fanout"`      // live nodes by number of children
	Relays      int            `json:"relays"`      // live non-root nodes with a child
	MaxFanout   int            `json:"max_fanout"`  // children of the busiest non-root node
	DepthFanout map[int][]int  `json:"-"`           // per depth, nodes by number of children
	ByRole      map[string]int `json:"by_role"`     // live nodes in the tree by role
	Skewed      int            `json:"skewed"`      // depth not one below the shallowest parent's depth now (a parent moved)
	RootFanout  int            `json:"root_fanout"` // the broker's children
}

// stats computes the summary of t.
func (t CohortTree) stats() TreeStats {
	s := TreeStats{Depth: map[int]int{}, Parents: map[int]int{}, Fanout: map[int]int{}, DepthFanout: map[int][]int{}, ByRole: map[string]int{}}
	for i, n := range t.Nodes {
		s.Nodes++
		switch {
		case n.Failed:
			s.Failed++
			continue
		case n.Depth < 0:
			s.Detached++
			continue
		}
		s.Depth[n.Depth]++
		s.ByRole[n.Role]++
		s.MaxDepth = max(s.MaxDepth, n.Depth)
		s.Fanout[n.Children]++
		h := s.DepthFanout[n.Depth]
		for len(h) <= n.Children {
			h = append(h, 0)
		}
		h[n.Children]++
		s.DepthFanout[n.Depth] = h
		if i == 0 && n.Role == roleBroker {
			s.RootFanout = n.Children
			continue
		}
		s.Parents[len(n.Parents)]++
		if n.Children > 0 {
			s.Relays++
			s.MaxFanout = max(s.MaxFanout, n.Children)
		}
		if len(n.Parents) > 0 && t.Nodes[n.Parents[0]].Depth != n.Depth-1 {
			s.Skewed++
		}
	}
	return s
}
