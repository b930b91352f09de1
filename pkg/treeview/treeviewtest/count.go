// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package treeviewtest reads back what package treeview drew, for tests.
package treeviewtest

import (
	"bytes"
	"encoding/xml"
	"io"
	"strconv"
	"strings"
	"testing"
)

// Counts is what a picture holds, by class.
type Counts struct {
	Nodes, P1, P2, Stubs, Lost, Failed, Half int
	ByClass                                  map[string]int
	Rows                                     map[int][3]int // depth → nodes, drawn, failed (data attributes)
	DepthLabels                              []string
}

// Count parses an SVG (or the SVG in an HTML page) and counts its marks;
// it fails on anything that is not well-formed XML.
func Count(t testing.TB, b []byte) Counts {
	t.Helper()
	if i := bytes.Index(b, []byte("<svg")); i > 0 {
		j := bytes.LastIndex(b, []byte("</svg>"))
		b = b[i : j+len("</svg>")]
	}
	c := Counts{ByClass: map[string]int{}, Rows: map[int][3]int{}}
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
				c.ByClass[el.Name.Local+"."+cl]++
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
				r := c.Rows[d]
				c.Rows[d] = [3]int{r[0] + n, r[1] + k, r[2] + f}
			}
			if el.Name.Local == "circle" && has("node") {
				c.Nodes++
				if has("failed") {
					c.Failed++
				}
				if has("half") {
					c.Half++
				}
			}
			if el.Name.Local == "line" && has("edge") {
				switch {
				case has("p1"):
					c.P1++
				case has("p2"):
					c.P2++
				case has("stub"):
					c.Stubs++
				case has("lost"):
					c.Lost++
				}
			}
		case xml.CharData:
			if inDepth {
				c.DepthLabels = append(c.DepthLabels, string(el))
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
