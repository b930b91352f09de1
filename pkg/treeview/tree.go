// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package treeview draws a BPS cohort's tree (SWIP-61) from every node's
// own report of its place: its depth, its parents and its children. The
// simulator (cmd/bps-sim) draws the trees of a run with it, and
// `bee-bps tree` the trees of a live cluster, from each node's GET /pubsub/.
package treeview

// Roles of the nodes in a cohort's tree.
const (
	RoleBroker     = "broker"
	RolePublisher  = "publisher"
	RoleSubscriber = "subscriber"
	// RoleUnreported is a node others name (as a parent, or as a child)
	// whose own report was not read: bee-bps tree, for a node whose API was
	// not given or did not answer.
	RoleUnreported = "unreported"
)

// Node is one node of a cohort's tree.
type Node struct {
	Overlay  string `json:"overlay"` // hex
	Role     string `json:"role"`
	Depth    int    `json:"depth"`    // as the node states it; -1: not in the tree (detached)
	Parents  []int  `json:"parents"`  // indices into Tree.Nodes, the shallowest first
	Children int    `json:"children"` // distinct child peers, as the node reports them
	Failed   bool   `json:"failed"`   // a relay killed during the run: drawn where it was
	Lost     []int  `json:"lost"`     // a failed relay's children when it failed
}

// Tree is one cohort's tree: the root (the broker) first.
type Tree struct {
	Cohort string `json:"cohort"`
	Nodes  []Node `json:"nodes"`
}

// Stats summarises a cohort's tree.
type Stats struct {
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

// Stats computes the summary of t.
func (t Tree) Stats() Stats {
	s := Stats{Depth: map[int]int{}, Parents: map[int]int{}, Fanout: map[int]int{}, DepthFanout: map[int][]int{}, ByRole: map[string]int{}}
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
		if i == 0 && n.Role == RoleBroker {
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

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
