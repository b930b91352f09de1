// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ethersphere/bps/pkg/treeview"
	"github.com/ethersphere/bps/pkg/treeview/treeviewtest"
)

// checkTreeCommand draws the live cluster cl, whose every node but the
// broker subscribes to the cohort on topic name (TestDevClusterTree):
// bee-bps tree --cluster (the info file dev writes) draws one cohort whose
// nodes are the cluster's, the broker at the root, each at the depth and
// under the parents its own GET /pubsub/ states; the SVG holds a dot per
// node and an edge per parent.
func checkTreeCommand(ctx context.Context, t *testing.T, cl devCluster, name string) {
	t.Helper()
	dir := t.TempDir()
	info := filepath.Join(dir, "bps-dev.json")
	if err := writeJSON(info, cl); err != nil {
		t.Fatal(err)
	}

	// What each node states, before and after the drawing: the tree is
	// compared with it only if nothing moved in between.
	states := func() []treeEntry {
		es := make([]treeEntry, len(cl.Nodes))
		for i := 1; i < len(cl.Nodes); i++ {
			es[i] = treeOf(ctx, t, cl.Nodes[i].API)
		}
		return es
	}
	var (
		trees  []treeview.Tree
		before []treeEntry
	)
	jsonPath, svgPath := filepath.Join(dir, "tree.json"), filepath.Join(dir, "tree.svg")
	waitFor(ctx, t, "a still tree", func() bool {
		before = states()
		for _, path := range []string{jsonPath, svgPath} {
			if err, out := execute(t, "tree", "--cluster", info, "--topic", name, "--out", path); err != nil {
				t.Fatalf("tree: %v\n%s", err, out)
			}
		}
		return slices.EqualFunc(before, states(), func(a, b treeEntry) bool {
			return a.Depth == b.Depth && slices.Equal(a.Parents, b.Parents) && a.Children == b.Children
		})
	})
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &trees); err != nil {
		t.Fatal(err)
	}
	if len(trees) != 1 || len(trees[0].Nodes) != len(cl.Nodes) {
		t.Fatalf("%d trees, want 1 of %d nodes: %+v", len(trees), len(cl.Nodes), trees)
	}
	tr := trees[0]
	if root := tr.Nodes[0]; root.Overlay != cl.Nodes[0].Overlay || root.Role != treeview.RoleBroker || root.Depth != 0 {
		t.Fatalf("the root is %+v, want the broker %s", root, cl.Nodes[0].Overlay)
	}
	byOverlay := map[string]treeview.Node{}
	for _, n := range tr.Nodes {
		byOverlay[n.Overlay] = n
	}
	edges, second := 0, 0
	for i := 1; i < len(cl.Nodes); i++ {
		n, ok := byOverlay[cl.Nodes[i].Overlay]
		e := before[i]
		if !ok || n.Role != e.Role || n.Depth != int(e.Depth) || n.Children != e.Children {
			t.Fatalf("node %d drawn as %+v; it states %+v", i, n, e)
		}
		var parents []string
		for _, p := range n.Parents {
			parents = append(parents, tr.Nodes[p].Overlay)
		}
		slices.Sort(parents)
		stated := slices.Clone(e.Parents)
		slices.Sort(stated)
		if !slices.Equal(parents, stated) {
			t.Fatalf("node %d drawn under %v; it states %v", i, parents, stated)
		}
		if len(parents) > 0 && tr.Nodes[n.Parents[0]].Depth != n.Depth-1 {
			t.Fatalf("node %d at depth %d: its first parent is at %d", i, n.Depth, tr.Nodes[n.Parents[0]].Depth)
		}
		edges += min(len(parents), 1)
		second += max(len(parents)-1, 0)
	}
	st := tr.Stats()
	if st.MaxDepth < 2 || st.Detached != 0 || edges != len(cl.Nodes)-1 {
		t.Fatalf("depth %d, %d detached, %d nodes with a parent, want 2 or more, 0, %d", st.MaxDepth, st.Detached, edges, len(cl.Nodes)-1)
	}

	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	got := treeviewtest.Count(t, svg)
	if got.Nodes != len(cl.Nodes) || got.P1 != edges || got.P2 != second || got.Stubs != 0 || got.ByClass["circle.unreported"] != 0 ||
		!strings.Contains(string(svg), `class="node broker"`) {
		t.Fatalf("the picture: %d nodes, %d first-parent edges, %d second, %d stubs; want %d, %d, %d, 0",
			got.Nodes, got.P1, got.P2, got.Stubs, len(cl.Nodes), edges, second)
	}
	t.Logf("depth %d, %d relays, %d nodes with two parents", st.MaxDepth, st.Relays, second)
}
