// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package treeview

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ethersphere/bps/pkg/treeview/treeviewtest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// synthTree builds a tree the way SWIP-61 grows one, without a network: a
// root with rootCap children, then every node under the shallowest nodes
// with room (capacity relayCap), with a second parent beside the first at
// the same depth when parents is 2. Every failEvery-th relay (0: none)
// failed: it is marked and its children lose it as a parent.
func synthTree(n, rootCap, relayCap, parents, failEvery int) Tree {
	t := Tree{Cohort: "synthetic"}
	t.Nodes = append(t.Nodes, Node{Overlay: "00", Role: RoleBroker, Depth: 0})
	capOf := func(i int) int {
		if i == 0 {
			return rootCap
		}
		return relayCap
	}
	var room []int // nodes with room, shallowest first
	room = append(room, 0)
	for i := 1; i < n; i++ {
		for len(room) > 0 && t.Nodes[room[0]].Children >= capOf(room[0]) {
			room = room[1:]
		}
		if len(room) == 0 {
			break
		}
		p := room[0]
		nd := Node{Overlay: fmt.Sprintf("%04x", i), Role: RoleSubscriber, Depth: t.Nodes[p].Depth + 1, Parents: []int{p}}
		if i == 1 {
			nd.Role = RolePublisher
		}
		t.Nodes[p].Children++
		if parents == 2 {
			for _, q := range room[1:] {
				if t.Nodes[q].Depth == t.Nodes[p].Depth && t.Nodes[q].Children < capOf(q) {
					nd.Parents = append(nd.Parents, q)
					t.Nodes[q].Children++
					break
				}
			}
		}
		t.Nodes = append(t.Nodes, nd)
		room = append(room, i)
	}
	if failEvery > 0 {
		k := 0
		for i := 1; i < len(t.Nodes); i++ {
			if t.Nodes[i].Children == 0 {
				continue
			}
			if k++; k%failEvery != 0 {
				continue
			}
			t.Nodes[i].Failed = true
			for j := range t.Nodes {
				for x, p := range t.Nodes[j].Parents {
					if p == i {
						t.Nodes[i].Lost = append(t.Nodes[i].Lost, j)
						t.Nodes[j].Parents = append(t.Nodes[j].Parents[:x:x], t.Nodes[j].Parents[x+1:]...)
						break
					}
				}
			}
		}
	}
	return t
}

// A small multihop tree drawn whole: every node a dot, every parent an
// edge (the second parent's lighter), the failed relay red with dashed
// lines to the children it had, the depths labelled.
func TestTreeSVGSmall(t *testing.T) {
	t.Parallel()
	tr := synthTree(40, 4, 4, 2, 3)
	var want struct{ nodes, p1, p2, lost, failed, half int }
	depths := map[int]bool{}
	for _, n := range tr.Nodes {
		want.nodes++
		depths[n.Depth] = true
		if n.Failed {
			want.failed++
			want.lost += len(n.Lost)
		}
		if len(n.Parents) > 0 {
			want.p1++
		}
		if len(n.Parents) > 1 {
			want.p2++
		}
		if !n.Failed && n.Depth > 1 && len(n.Parents) < 2 {
			want.half++
		}
	}
	if want.failed == 0 || want.p2 == 0 || want.lost == 0 || len(depths) < 4 {
		t.Fatalf("the synthetic tree is too plain: %+v, %d depths", want, len(depths))
	}
	var out bytes.Buffer
	if err := WriteSVG(&out, []Tree{tr}, Options{Parents: 2}); err != nil {
		t.Fatal(err)
	}
	got := treeviewtest.Count(t, out.Bytes())
	if got.Nodes != want.nodes || got.P1 != want.p1 || got.P2 != want.p2 || got.Lost != want.lost ||
		got.Failed != want.failed || got.Half != want.half || got.Stubs != 0 {
		t.Fatalf("drew %d nodes, %d first-parent edges, %d second-parent edges, %d lost, %d failed, %d short a parent, %d stubs; want %+v",
			got.Nodes, got.P1, got.P2, got.Lost, got.Failed, got.Half, got.Stubs, want)
	}
	if len(got.DepthLabels) != len(depths) {
		t.Fatalf("depth labels %q for %d depths", got.DepthLabels, len(depths))
	}
	for d := range depths {
		if got.DepthLabels[d] != fmt.Sprintf("depth %d", d) {
			t.Fatalf("depth labels %q", got.DepthLabels)
		}
	}
	st := tr.Stats()
	for d, n := range st.Depth {
		if r := got.Rows[d]; r[0] != n || r[1] != n+r[2] {
			t.Fatalf("depth %d: row says %d nodes, %d drawn, %d failed; the tree has %d live", d, r[0], r[1], r[2], n)
		}
	}
	if !bytes.Contains(out.Bytes(), []byte(`class="node broker"`)) || !bytes.Contains(out.Bytes(), []byte(`class="node publisher"`)) {
		t.Fatal("no broker or no publisher drawn")
	}
}

// A 10,000-node tree is sampled per depth: the rows still count every node,
// at most the budget is drawn per row, every drawn node's first parent is
// drawn or stubbed, and the file stays small.
func TestTreeSVGLarge(t *testing.T) {
	t.Parallel()
	tr := synthTree(10000, 64, 16, 2, 5)
	var out bytes.Buffer
	if err := WriteSVG(&out, []Tree{tr}, Options{Parents: 2}); err != nil {
		t.Fatal(err)
	}
	if out.Len() > 2<<20 {
		t.Fatalf("%d bytes for 10,000 nodes", out.Len())
	}
	got := treeviewtest.Count(t, out.Bytes())
	st := tr.Stats()
	total, drawn := 0, 0
	for d, r := range got.Rows {
		if r[0] != st.Depth[d] {
			t.Fatalf("depth %d: row says %d nodes, the tree has %d", d, r[0], st.Depth[d])
		}
		if r[1] > AutoPerDepth {
			t.Fatalf("depth %d: %d drawn, more than %d", d, r[1], AutoPerDepth)
		}
		total += r[0] + r[2]
		drawn += r[1]
	}
	if total != len(tr.Nodes) || got.Nodes != drawn || drawn >= len(tr.Nodes)/4 {
		t.Fatalf("%d nodes in rows of %d; %d circles for %d drawn", total, len(tr.Nodes), got.Nodes, drawn)
	}
	// Every drawn node with a parent (all but the root and the orphans of
	// failed relays) has its first-parent edge or a stub.
	orphans := 0
	for _, n := range tr.Nodes {
		if n.Depth > 0 && len(n.Parents) == 0 {
			orphans++
		}
	}
	if got.P1+got.Stubs < drawn-1-orphans {
		t.Fatalf("%d edges and %d stubs for %d drawn nodes", got.P1, got.Stubs, drawn)
	}
	t.Logf("%d bytes, %d of %d nodes drawn, %d edges (%d second parents), %d stubs", out.Len(), drawn, len(tr.Nodes), got.P1, got.P2, got.Stubs)
}

// The HTML page carries the same picture and the depth table.
func TestTreeHTML(t *testing.T) {
	t.Parallel()
	tr := synthTree(30, 4, 3, 1, 0)
	var page, svg bytes.Buffer
	if err := WriteHTML(&page, []Tree{tr}, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteSVG(&svg, []Tree{tr}, Options{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(page.Bytes(), []byte("<!doctype html>")) || !bytes.Contains(page.Bytes(), svg.Bytes()[:len(svg.Bytes())-1]) {
		t.Fatal("the page does not embed the picture")
	}
	if n := bytes.Count(page.Bytes(), []byte("<tr><td>")); n != tr.Stats().MaxDepth+1 {
		t.Fatalf("%d rows in the depth table", n)
	}
}
