// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

// synthTree builds a tree the way SWIP-61 grows one, without a network: a
// root with rootCap children, then every node under the shallowest nodes
// with room (capacity relayCap), with a second parent beside the first at
// the same depth when parents is 2. Every failEvery-th relay (0: none)
// failed: it is marked and its children lose it as a parent.
func synthTree(n, rootCap, relayCap, parents, failEvery int) CohortTree {
	t := CohortTree{Cohort: "synthetic"}
	t.Nodes = append(t.Nodes, TreeNode{Overlay: "00", Role: roleBroker, Depth: 0})
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
		nd := TreeNode{Overlay: fmt.Sprintf("%04x", i), Role: roleSubscriber, Depth: t.Nodes[p].Depth + 1, Parents: []int{p}}
		if i == 1 {
			nd.Role = rolePublisher
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

// svgCounts is what a picture holds, by class.
type svgCounts struct {
	nodes, p1, p2, stubs, lost, failed, half int
	byClass                                  map[string]int
	rows                                     map[int][3]int // depth → nodes, drawn, failed (data attributes)
	depthLabels                              []string
}

// countSVG parses an SVG (or the SVG in an HTML page) and counts its marks;
// it fails on anything that is not well-formed XML.
func countSVG(t *testing.T, b []byte) svgCounts {
	t.Helper()
	if i := bytes.Index(b, []byte("<svg")); i > 0 {
		j := bytes.LastIndex(b, []byte("</svg>"))
		b = b[i : j+len("</svg>")]
	}
	c := svgCounts{byClass: map[string]int{}, rows: map[int][3]int{}}
	dec := xml.NewDecoder(bytes.NewReader(b))
	inDepth, inLegend := false, false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("svg is not well-formed: %v", err)
		}
		switch el := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			classes := strings.Fields(attr["class"])
			has := func(k string) bool {
				for _, c := range classes {
					if c == k {
						return true
					}
				}
				return false
			}
			for _, cl := range classes {
				c.byClass[el.Name.Local+"."+cl]++
			}
			inDepth = el.Name.Local == "text" && has("depth")
			if el.Name.Local == "g" && has("legend") {
				inLegend = true
			}
			if inLegend {
				continue // the legend's marks are not the tree's
			}
			if el.Name.Local == "g" && has("row") {
				d, _ := strconv.Atoi(attr["data-depth"])
				n, _ := strconv.Atoi(attr["data-nodes"])
				k, _ := strconv.Atoi(attr["data-drawn"])
				f, _ := strconv.Atoi(attr["data-failed"])
				r := c.rows[d]
				c.rows[d] = [3]int{r[0] + n, r[1] + k, r[2] + f}
			}
			if el.Name.Local == "circle" && has("node") {
				c.nodes++
				if has("failed") {
					c.failed++
				}
				if has("half") {
					c.half++
				}
			}
			if el.Name.Local == "line" && has("edge") {
				switch {
				case has("p1"):
					c.p1++
				case has("p2"):
					c.p2++
				case has("stub"):
					c.stubs++
				case has("lost"):
					c.lost++
				}
			}
		case xml.CharData:
			if inDepth {
				c.depthLabels = append(c.depthLabels, string(el))
				inDepth = false
			}
		case xml.EndElement:
			inDepth = false
			if el.Name.Local == "g" {
				inLegend = false
			}
		}
	}
	return c
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
	if err := writeTreeSVG(&out, []CohortTree{tr}, treeOptions{Parents: 2}); err != nil {
		t.Fatal(err)
	}
	got := countSVG(t, out.Bytes())
	if got.nodes != want.nodes || got.p1 != want.p1 || got.p2 != want.p2 || got.lost != want.lost ||
		got.failed != want.failed || got.half != want.half || got.stubs != 0 {
		t.Fatalf("drew %d nodes, %d first-parent edges, %d second-parent edges, %d lost, %d failed, %d short a parent, %d stubs; want %+v",
			got.nodes, got.p1, got.p2, got.lost, got.failed, got.half, got.stubs, want)
	}
	if len(got.depthLabels) != len(depths) {
		t.Fatalf("depth labels %q for %d depths", got.depthLabels, len(depths))
	}
	for d := range depths {
		if got.depthLabels[d] != fmt.Sprintf("depth %d", d) {
			t.Fatalf("depth labels %q", got.depthLabels)
		}
	}
	st := tr.stats()
	for d, n := range st.Depth {
		if r := got.rows[d]; r[0] != n || r[1] != n+r[2] {
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
	if err := writeTreeSVG(&out, []CohortTree{tr}, treeOptions{Parents: 2}); err != nil {
		t.Fatal(err)
	}
	if out.Len() > 2<<20 {
		t.Fatalf("%d bytes for 10,000 nodes", out.Len())
	}
	got := countSVG(t, out.Bytes())
	st := tr.stats()
	total, drawn := 0, 0
	for d, r := range got.rows {
		if r[0] != st.Depth[d] {
			t.Fatalf("depth %d: row says %d nodes, the tree has %d", d, r[0], st.Depth[d])
		}
		if r[1] > autoPerDepth {
			t.Fatalf("depth %d: %d drawn, more than %d", d, r[1], autoPerDepth)
		}
		total += r[0] + r[2]
		drawn += r[1]
	}
	if total != len(tr.Nodes) || got.nodes != drawn || drawn >= len(tr.Nodes)/4 {
		t.Fatalf("%d nodes in rows of %d; %d circles for %d drawn", total, len(tr.Nodes), got.nodes, drawn)
	}
	// Every drawn node with a parent (all but the root and the orphans of
	// failed relays) has its first-parent edge or a stub.
	orphans := 0
	for _, n := range tr.Nodes {
		if n.Depth > 0 && len(n.Parents) == 0 {
			orphans++
		}
	}
	if got.p1+got.stubs < drawn-1-orphans {
		t.Fatalf("%d edges and %d stubs for %d drawn nodes", got.p1, got.stubs, drawn)
	}
	t.Logf("%d bytes, %d of %d nodes drawn, %d edges (%d second parents), %d stubs", out.Len(), drawn, len(tr.Nodes), got.p1, got.p2, got.stubs)
}

// The HTML page carries the same picture and the depth table.
func TestTreeHTML(t *testing.T) {
	t.Parallel()
	tr := synthTree(30, 4, 3, 1, 0)
	var page, svg bytes.Buffer
	if err := writeTreeHTML(&page, []CohortTree{tr}, treeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := writeTreeSVG(&svg, []CohortTree{tr}, treeOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(page.Bytes(), []byte("<!doctype html>")) || !bytes.Contains(page.Bytes(), svg.Bytes()[:len(svg.Bytes())-1]) {
		t.Fatal("the page does not embed the picture")
	}
	if n := bytes.Count(page.Bytes(), []byte("<tr><td>")); n != tr.stats().MaxDepth+1 {
		t.Fatalf("%d rows in the depth table", n)
	}
}
