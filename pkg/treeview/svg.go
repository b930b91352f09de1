// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package treeview

import (
	"bufio"
	"cmp"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// The tree of a run as a picture: a self-contained SVG (or an HTML page
// around it), one panel per cohort. The broker is at the top and every
// depth is a row below it; a node is a dot under the parent it takes its
// depth from, joined to it by a dark line and to its second parent, if it
// has one, by a light one. A dot grows with the node's fan-out; relays that
// failed during the run are red, with red dashed lines to the children they
// had. Beside each row: how many nodes are at that depth, how many relay,
// how many have two parents, and a histogram of their fan-out.
//
// A row with more nodes than the per-depth budget is sampled: the nodes
// under parents already drawn first, one per parent in turn, so that what
// is drawn is a connected piece of the tree in proportion; a node whose
// parent was not drawn gets a short stub instead of its edge. The counts
// and histograms beside the rows are always over every node. At 10,000
// nodes the file stays around 150 KB.

// Options shape the picture.
type Options struct {
	// PerDepth is how many nodes a row draws at most; 0: AutoPerDepth.
	PerDepth int
	// Parents is how many parents a node should have (2 with two parents):
	// a live node with fewer is ringed.
	Parents int
	// Title heads the picture.
	Title string
	// Refresh, if positive, makes the HTML page reload itself this often
	// (a live picture served by bee-bps tree --watch).
	Refresh time.Duration
}

const (
	AutoPerDepth = 200 // nodes a row draws by default: a wider row is sampled

	svgTop      = 64  // title and legend
	svgLeft     = 120 // depth labels
	svgPanel    = 300 // the counts and histograms beside the rows
	svgRowH     = 120 // per depth
	svgMinW     = 840 // the drawing area's least width
	svgSpacing  = 9   // least horizontal room per drawn node
	svgMaxW     = 14000
	svgPadY     = 28 // above a panel's first row
	svgHistW    = 200
	svgHistH    = 44
	svgHistBins = 40
)

// treeCSS styles the picture's classes.
const treeCSS = `
text{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;font-size:12px;fill:#222}
.title{font-size:16px;font-weight:600}
.note{fill:#555}
.depth{font-weight:600}
.band{fill:#f6f7f9}
.edge{stroke-width:.8;fill:none}
.p1{stroke:#4a5560;stroke-opacity:.55}
.p2{stroke:#5f87ad;stroke-opacity:.4;stroke-dasharray:3 2}
.stub{stroke:#4a5560;stroke-opacity:.35}
.lost{stroke:#d62728;stroke-opacity:.7;stroke-dasharray:4 3}
.node{stroke:#fff;stroke-width:.5}
.broker{fill:#111}
.publisher{fill:#2ca02c}
.relay{fill:#1f77b4}
.leaf{fill:#9aa6b2}
.failed{fill:#d62728}
.unreported{fill:#fff;stroke:#6b7785;stroke-width:1;stroke-dasharray:2 1}
.half{stroke:#ff7f0e;stroke-width:1.5}
.bar{fill:#1f77b4}
.bar0{fill:#9aa6b2}
.axis{stroke:#888;stroke-width:.5}
`

// rowLayout is one depth of a panel.
type rowLayout struct {
	depth int
	all   []int // every node at this depth, in drawing order
	drawn []int // the ones drawn, in drawing order
}

// panelLayout is one cohort's picture.
type panelLayout struct {
	t      Tree
	st     Stats
	rows   []rowLayout
	x, y   []float64 // per node, NaN if not drawn
	drawn  int
	width  float64 // of the drawing area
	height float64
}

// layoutTree places t's nodes.
func layoutTree(t Tree, o Options) *panelLayout {
	p := &panelLayout{t: t, st: t.Stats(), x: make([]float64, len(t.Nodes)), y: make([]float64, len(t.Nodes))}
	for i := range p.x {
		p.x[i], p.y[i] = math.NaN(), math.NaN()
	}
	budget := o.PerDepth
	if budget <= 0 {
		budget = AutoPerDepth
	}
	maxDepth := -1
	for _, n := range t.Nodes {
		maxDepth = max(maxDepth, n.Depth)
	}
	byDepth := make([][]int, maxDepth+1)
	for i, n := range t.Nodes {
		if n.Depth >= 0 {
			byDepth[n.Depth] = append(byDepth[n.Depth], i)
		}
	}
	// Order each row under the row above: by the rank of the node's first
	// parent, then by overlay; a node whose first parent is not above it
	// goes to the right end.
	rank := make([]int, len(t.Nodes))
	drawn := make([]bool, len(t.Nodes))
	parentRank := func(i int) int {
		n := t.Nodes[i]
		if len(n.Parents) == 0 || t.Nodes[n.Parents[0]].Depth != n.Depth-1 || n.Depth == 0 {
			return math.MaxInt
		}
		return rank[n.Parents[0]]
	}
	maxDrawn := 0
	for d, row := range byDepth {
		slices.SortStableFunc(row, func(a, b int) int {
			if c := cmp.Compare(parentRank(a), parentRank(b)); c != 0 {
				return c
			}
			return strings.Compare(t.Nodes[a].Overlay, t.Nodes[b].Overlay)
		})
		for k, i := range row {
			rank[i] = k
		}
		sel := sampleRow(t, row, drawn, budget)
		for _, i := range sel {
			drawn[i] = true
		}
		p.rows = append(p.rows, rowLayout{depth: d, all: row, drawn: sel})
		maxDrawn = max(maxDrawn, len(sel))
		p.drawn += len(sel)
	}
	p.width = min(max(float64(svgMinW), float64(maxDrawn*svgSpacing)), svgMaxW)
	for r, row := range p.rows {
		y := float64(svgPadY) + float64(r)*svgRowH + svgRowH/2
		p.placeRow(row.drawn)
		for _, i := range row.drawn {
			p.y[i] = y
		}
	}
	p.height = float64(svgPadY) + float64(max(len(p.rows), 1))*svgRowH + 16
	return p
}

// placeRow places a row's drawn nodes (in drawing order): each group of
// siblings centred under its first parent, if that is drawn, a node
// without one where its rank puts it; then pushed apart, in order, to at
// least the row's spacing and into the drawing area.
func (p *panelLayout) placeRow(drawn []int) {
	k := len(drawn)
	if k == 0 {
		return
	}
	left, right := float64(svgLeft)+4, float64(svgLeft)+p.width-4
	gap := min((right-left)/float64(k), 36)
	want := make([]float64, k)
	first := func(i int) int {
		if ps := p.t.Nodes[i].Parents; len(ps) > 0 && !math.IsNaN(p.x[ps[0]]) {
			return ps[0]
		}
		return -1
	}
	for a := 0; a < k; {
		b := a
		for b < k && first(drawn[b]) == first(drawn[a]) {
			b++
		}
		for j := a; j < b; j++ {
			if f := first(drawn[j]); f >= 0 {
				want[j] = p.x[f] + (float64(j-a)-float64(b-a-1)/2)*gap
			} else {
				want[j] = left + (float64(j)+0.5)*(right-left)/float64(k)
			}
		}
		a = b
	}
	x := make([]float64, k)
	for j := range x {
		x[j] = max(want[j], left)
		if j > 0 {
			x[j] = max(x[j], x[j-1]+gap)
		}
	}
	for j := k - 1; j >= 0; j-- {
		x[j] = min(x[j], right)
		if j < k-1 {
			x[j] = min(x[j], x[j+1]-gap)
		}
	}
	for j, i := range drawn {
		p.x[i] = x[j]
	}
}

// sampleRow picks at most budget nodes of a row (in drawing order): failed
// relays in their proportion, spread along the row, then round robin over
// the drawn parents' children, each parent's relays before its leaves so
// that the rows below have parents drawn, then over the rest; returned in
// drawing order.
func sampleRow(t Tree, row []int, drawn []bool, budget int) []int {
	if len(row) <= budget {
		return slices.Clone(row)
	}
	picked := make(map[int]bool, budget)
	var failed []int
	for _, i := range row {
		if t.Nodes[i].Failed {
			failed = append(failed, i)
		}
	}
	if nf := (len(failed)*budget + len(row) - 1) / len(row); nf > 0 {
		for j := range nf {
			picked[failed[j*len(failed)/nf]] = true
		}
	}
	// Groups of consecutive nodes under the same first parent.
	var under, rest [][]int
	for k := 0; k < len(row); {
		j := k
		first := func(i int) int {
			if ps := t.Nodes[i].Parents; len(ps) > 0 {
				return ps[0]
			}
			return -1
		}
		for j < len(row) && first(row[j]) == first(row[k]) {
			j++
		}
		g := slices.Clone(row[k:j])
		slices.SortStableFunc(g, func(a, b int) int {
			return cmp.Compare(boolInt(t.Nodes[a].Children == 0), boolInt(t.Nodes[b].Children == 0))
		})
		if f := first(row[k]); f >= 0 && drawn[f] {
			under = append(under, g)
		} else {
			rest = append(rest, g)
		}
		k = j
	}
	for _, groups := range [][][]int{under, rest} {
		for round := 0; len(picked) < budget; round++ {
			took := false
			for _, g := range groups {
				if round < len(g) && len(picked) < budget {
					if !picked[g[round]] {
						picked[g[round]] = true
					}
					took = true
				}
			}
			if !took {
				break
			}
		}
	}
	out := make([]int, 0, len(picked))
	for _, i := range row {
		if picked[i] {
			out = append(out, i)
		}
	}
	return out
}

// nodeClass names a node's look.
func nodeClass(n Node, root bool, o Options) string {
	c := "node "
	switch {
	case n.Failed:
		c += "failed"
	case root:
		c += RoleBroker
	case n.Role == RoleUnreported:
		c += RoleUnreported
	case n.Role == RolePublisher:
		c += RolePublisher
	case n.Children > 0:
		c += "relay"
	default:
		c += "leaf"
	}
	if !n.Failed && n.Role != RoleUnreported && n.Depth > 1 && o.Parents > 1 && len(n.Parents) < o.Parents {
		c += " half"
	}
	return c
}

func nodeRadius(n Node, root bool) float64 {
	if root {
		return 9
	}
	return min(2.6+1.3*math.Sqrt(float64(n.Children)), 9)
}

// WriteSVG draws the trees as one SVG document.
func WriteSVG(w io.Writer, trees []Tree, o Options) error {
	bw := bufio.NewWriter(w)
	if err := drawTrees(bw, trees, o, true); err != nil {
		return err
	}
	return bw.Flush()
}

// drawTrees writes the <svg> element; standalone adds the XML namespace
// declaration a file needs.
func drawTrees(w *bufio.Writer, trees []Tree, o Options, standalone bool) error {
	panels := make([]*panelLayout, len(trees))
	width, height := float64(svgMinW), float64(svgTop)
	for i, t := range trees {
		panels[i] = layoutTree(t, o)
		width = max(width, panels[i].width)
		height += panels[i].height
	}
	total := float64(svgLeft) + width + svgPanel
	ns := ""
	if standalone {
		ns = ` xmlns="http://www.w3.org/2000/svg"`
	}
	fmt.Fprintf(w, `<svg%s class="bps-tree" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" data-cohorts="%d">`+"\n",
		ns, total, height, total, height, len(trees))
	fmt.Fprintf(w, "<style>%s</style>\n", treeCSS)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="#fff"/>`+"\n")
	title := o.Title
	if title == "" {
		title = "BPS cohort tree"
	}
	fmt.Fprintf(w, `<text class="title" x="16" y="24">%s</text>`+"\n", esc(title))
	unreported := false
	for _, t := range trees {
		unreported = unreported || slices.ContainsFunc(t.Nodes, func(n Node) bool { return n.Role == RoleUnreported })
	}
	legend(w, 16, 48, unreported)
	y := float64(svgTop)
	for _, p := range panels {
		drawPanel(w, p, o, y, width)
		y += p.height
	}
	_, err := fmt.Fprintln(w, "</svg>")
	return err
}

// legend draws what the marks mean; unreported: some node is.
func legend(w *bufio.Writer, x, y float64, unreported bool) {
	items := []struct{ mark, label string }{
		{`<circle class="node broker" cx="%.0f" cy="%.0f" r="5"/>`, "broker (root)"},
		{`<circle class="node publisher" cx="%.0f" cy="%.0f" r="4"/>`, "publisher"},
		{`<circle class="node relay" cx="%.0f" cy="%.0f" r="5"/>`, "relay (size: fan-out)"},
		{`<circle class="node leaf" cx="%.0f" cy="%.0f" r="3"/>`, "leaf"},
		{`<circle class="node failed" cx="%.0f" cy="%.0f" r="4"/>`, "failed relay"},
		{`<circle class="node leaf half" cx="%.0f" cy="%.0f" r="3"/>`, "one parent short"},
	}
	if unreported {
		items = append(items, struct{ mark, label string }{`<circle class="node unreported" cx="%.0f" cy="%.0f" r="3"/>`, "unreported (not read)"})
	}
	for _, it := range items {
		fmt.Fprintf(w, `<g class="legend">`+it.mark, x+5, y-4)
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f">%s</text></g>`+"\n", x+14, y, esc(it.label))
		x += 24 + float64(len(it.label))*6.2
	}
	lines := []struct{ class, label string }{{"p1", "first parent"}, {"p2", "second parent"}, {"lost", "a failed relay's former child"}}
	for _, l := range lines {
		fmt.Fprintf(w, `<g class="legend"><line class="edge %s" x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f"/>`, l.class, x, y-4, x+22, y-4)
		fmt.Fprintf(w, `<text x="%.0f" y="%.0f">%s</text></g>`+"\n", x+26, y, esc(l.label))
		x += 36 + float64(len(l.label))*6.2
	}
}

// drawPanel draws one cohort's tree with its top at y.
func drawPanel(w *bufio.Writer, p *panelLayout, o Options, y, width float64) {
	t, st := p.t, p.st
	fmt.Fprintf(w, `<g class="cohort" data-cohort="%s" data-nodes="%d" data-drawn="%d" transform="translate(0 %.0f)">`+"\n",
		esc(t.Cohort), len(t.Nodes), p.drawn, y)
	head := fmt.Sprintf("cohort %s: %d nodes, depth ≤ %d, %d relays (max fan-out %d), %d failed, %d detached",
		short(t.Cohort, 48), len(t.Nodes), st.MaxDepth, st.Relays, st.MaxFanout, st.Failed, st.Detached)
	if p.drawn < len(t.Nodes)-st.Detached {
		head += fmt.Sprintf("; %d drawn (sampled per depth)", p.drawn)
	}
	fmt.Fprintf(w, `<text class="note" x="16" y="16">%s</text>`+"\n", esc(head))

	// Bands and their labels, counts and histograms.
	for r, row := range p.rows {
		top := float64(svgPadY) + float64(r)*svgRowH
		if r%2 == 0 {
			fmt.Fprintf(w, `<rect class="band" x="0" y="%.0f" width="%.0f" height="%d"/>`+"\n", top, float64(svgLeft)+width+svgPanel, svgRowH)
		}
		n := len(row.all)
		relays, two, failed := 0, 0, 0
		for _, i := range row.all {
			nd := t.Nodes[i]
			switch {
			case nd.Failed:
				failed++
				continue
			case nd.Children > 0 && row.depth > 0:
				relays++
			}
			if len(nd.Parents) >= 2 {
				two++
			}
		}
		fmt.Fprintf(w, `<g class="row" data-depth="%d" data-nodes="%d" data-drawn="%d" data-failed="%d">`, row.depth, n-failed, len(row.drawn), failed)
		fmt.Fprintf(w, `<text class="depth" x="12" y="%.0f">depth %d</text>`, top+svgRowH/2-4, row.depth)
		fmt.Fprintf(w, `<text class="note" x="12" y="%.0f">%d node%s</text>`, top+svgRowH/2+12, n-failed, plural(n-failed))
		if len(row.drawn) < n {
			fmt.Fprintf(w, `<text class="note" x="12" y="%.0f">%d drawn</text>`, top+svgRowH/2+26, len(row.drawn))
		}
		px := float64(svgLeft) + width + 16
		info := fmt.Sprintf("%d relay%s", relays, plural(relays))
		if row.depth > 0 {
			info += fmt.Sprintf(", %d with 2 parents", two)
		}
		if failed > 0 {
			info += fmt.Sprintf(", %d failed", failed)
		}
		if row.depth == 0 {
			info = fmt.Sprintf("the root: fan-out %d", st.RootFanout)
		}
		fmt.Fprintf(w, `<text class="note" x="%.0f" y="%.0f">%s</text>`, px, top+18, esc(info))
		if row.depth > 0 {
			histogram(w, px, top+26, st.DepthFanout[row.depth])
		}
		fmt.Fprintln(w, "</g>")
	}

	// Edges under the nodes.
	fmt.Fprintln(w, `<g class="edges">`)
	for _, row := range p.rows {
		for _, i := range row.drawn {
			n := t.Nodes[i]
			for k, par := range n.Parents {
				class := "p1"
				if k > 0 {
					class = "p2"
				}
				if math.IsNaN(p.x[par]) {
					if k == 0 {
						fmt.Fprintf(w, `<line class="edge stub" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", p.x[i], p.y[i]-svgRowH*0.3, p.x[i], p.y[i])
					}
					continue
				}
				fmt.Fprintf(w, `<line class="edge %s" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", class, p.x[par], p.y[par], p.x[i], p.y[i])
			}
			if n.Failed {
				for _, c := range n.Lost {
					if !math.IsNaN(p.x[c]) {
						fmt.Fprintf(w, `<line class="edge lost" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", p.x[i], p.y[i], p.x[c], p.y[c])
					}
				}
			}
		}
	}
	fmt.Fprintln(w, "</g>")

	// Nodes, deepest first so that the shallow ones are on top.
	fmt.Fprintln(w, `<g class="nodes">`)
	for r := len(p.rows) - 1; r >= 0; r-- {
		for _, i := range p.rows[r].drawn {
			n := t.Nodes[i]
			root := i == 0 && n.Role == RoleBroker && n.Depth == 0
			fmt.Fprintf(w, `<circle class="%s" cx="%.1f" cy="%.1f" r="%.1f"><title>%s %s, depth %d, %d parent%s, %d child%s%s</title></circle>`+"\n",
				nodeClass(n, root, o), p.x[i], p.y[i], nodeRadius(n, root),
				n.Role, short(n.Overlay, 12), n.Depth, len(n.Parents), plural(len(n.Parents)), n.Children, childPlural(n.Children), failedNote(n))
		}
	}
	fmt.Fprintln(w, "</g>")
	fmt.Fprintln(w, "</g>")
}

// histogram draws counts[k] (nodes with k children) as bars, bucketed to
// at most svgHistBins bars, the leaves (k = 0) in grey. Bars are on a
// square-root scale so that the few relays show beside the many leaves.
func histogram(w *bufio.Writer, x, y float64, counts []int) {
	if len(counts) == 0 {
		return
	}
	bucket := max((len(counts)+svgHistBins-1)/svgHistBins, 1)
	bins := make([]int, (len(counts)+bucket-1)/bucket)
	for k, c := range counts {
		bins[k/bucket] += c
	}
	top := 0
	for _, c := range bins {
		top = max(top, c)
	}
	bw := math.Min(float64(svgHistW)/float64(len(bins)), 14)
	fmt.Fprintf(w, `<g class="hist" data-bins="%d">`, len(bins))
	for b, c := range bins {
		if c == 0 {
			continue
		}
		h := float64(svgHistH) * math.Sqrt(float64(c)/float64(top))
		class := "bar"
		if b == 0 && bucket == 1 {
			class = "bar0"
		}
		lo, hi := b*bucket, min((b+1)*bucket, len(counts))-1
		label := fmt.Sprintf("%d", lo)
		if hi > lo {
			label = fmt.Sprintf("%d–%d", lo, hi)
		}
		fmt.Fprintf(w, `<rect class="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s children: %d nodes</title></rect>`,
			class, x+float64(b)*bw, y+svgHistH-h, math.Max(bw-1, 0.5), h, label, c)
	}
	fmt.Fprintf(w, `<line class="axis" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`, x, y+svgHistH, x+float64(len(bins))*bw, y+svgHistH)
	fmt.Fprintf(w, `<text class="note" x="%.1f" y="%.1f">fan-out 0…%d</text>`, x, y+svgHistH+14, len(counts)-1)
	fmt.Fprint(w, "</g>")
}

// WriteHTML writes an HTML page around the picture, with the depth
// distribution as a table.
func WriteHTML(w io.Writer, trees []Tree, o Options) error {
	bw := bufio.NewWriter(w)
	title := o.Title
	if title == "" {
		title = "BPS cohort tree"
	}
	fmt.Fprintf(bw, "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>%s</title>\n", esc(title))
	if o.Refresh > 0 {
		fmt.Fprintf(bw, "<meta http-equiv=\"refresh\" content=\"%d\">\n", max(int(o.Refresh.Round(time.Second)/time.Second), 1))
	}
	fmt.Fprint(bw, "<style>body{font-family:system-ui,sans-serif;margin:16px;color:#222}table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}.scroll{overflow:auto;border:1px solid #ddd}svg{max-width:none}</style>\n")
	fmt.Fprintf(bw, "</head><body>\n<h1>%s</h1>\n", esc(title))
	for _, t := range trees {
		st := t.Stats()
		fmt.Fprintf(bw, "<h2>cohort %s</h2>\n<table><tr><th>depth</th><th>nodes</th><th>relays</th><th>with 2 parents</th><th>failed</th></tr>\n", esc(short(t.Cohort, 64)))
		failedAt := map[int]int{}
		relaysAt := map[int]int{}
		twoAt := map[int]int{}
		for _, n := range t.Nodes {
			switch {
			case n.Failed:
				failedAt[n.Depth]++
			case n.Depth > 0:
				if n.Children > 0 {
					relaysAt[n.Depth]++
				}
				if len(n.Parents) >= 2 {
					twoAt[n.Depth]++
				}
			}
		}
		for d := 0; d <= st.MaxDepth; d++ {
			fmt.Fprintf(bw, "<tr><td>%d</td><td>%d</td><td>%d</td><td>%d</td><td>%d</td></tr>\n", d, st.Depth[d], relaysAt[d], twoAt[d], failedAt[d])
		}
		fmt.Fprintf(bw, "</table>\n<p>%d detached at the end (no parent in the cohort).</p>\n", st.Detached)
	}
	fmt.Fprint(bw, "<div class=\"scroll\">\n")
	if err := drawTrees(bw, trees, o, true); err != nil {
		return err
	}
	fmt.Fprint(bw, "</div>\n</body></html>\n")
	return bw.Flush()
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// short keeps the first n characters of s, with an ellipsis.
func short(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func childPlural(n int) string {
	if n == 1 {
		return ""
	}
	return "ren"
}

func failedNote(n Node) string {
	if n.Failed {
		return fmt.Sprintf(", failed during the run (had %d child%s)", n.Children, childPlural(n.Children))
	}
	return ""
}
