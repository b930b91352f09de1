// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/treeview"
	"github.com/ethersphere/bps/pkg/treeview/treeviewtest"
)

// Overlays of the canned cluster: B brokers; A1 relays; A2 publishes; C1
// and C2 are below them; D is between parents; U (a parent of C2) and X (a
// child of B) are not read.
var (
	ovB  = strings.Repeat("b", 64)
	ovA1 = strings.Repeat("a1", 32)
	ovA2 = strings.Repeat("a2", 32)
	ovC1 = strings.Repeat("c1", 32)
	ovC2 = strings.Repeat("c2", 32)
	ovD  = strings.Repeat("d", 64)
	ovU  = strings.Repeat("e", 64)
	ovX  = strings.Repeat("f", 64)
)

func topicOf(name string) string {
	h, _ := crypto.LegacyKeccak256([]byte(name))
	return hex.EncodeToString(h)
}

// cannedTopics is each canned node's GET /pubsub/ answer: cohort
// "c1c1c1c1c1c1c1c1" on topic "one", with everyone, and cohort
// "c2c2c2c2c2c2c2c2" on topic "two", B and A1 only.
func cannedTopics() map[string]string {
	one, two := topicOf("one"), topicOf("two")
	e := func(topic, cohort, role string, relay bool, depth int, parents, conns []string, children int) string {
		b, _ := json.Marshal(map[string]any{
			"topicAddress": topic, "mode": 4, "role": role, "relay": relay, "connections": conns, "binding": "feed",
			"cohort": cohort, "streams": len(conns), "depth": depth, "parents": parents, "children": children,
			"parentLag": []int{}, "probes": 0, "reparents": 0, "withheld": 0,
		})
		return string(b)
	}
	c1, c2 := "c1c1c1c1c1c1c1c1", "c2c2c2c2c2c2c2c2"
	page := func(es ...string) string {
		return `{"topics":[` + strings.Join(es, ",") + `],"audience":{"streamsPerCohort":64}}`
	}
	return map[string]string{
		ovB: page(
			e(one, c1, "broker", false, 0, []string{}, []string{ovA1, ovA2, ovX}, 3),
			e(two, c2, "broker", false, 0, []string{}, []string{ovA1}, 1)),
		ovA1: page(
			e(two, c2, "subscriber", false, 1, []string{ovB}, []string{ovB}, 0),
			e(one, c1, "subscriber", true, 1, []string{ovB}, []string{ovB, ovC1, ovC2}, 2)),
		ovA2: page(e(one, c1, "publisher", true, 1, []string{ovB}, []string{ovB, ovC1}, 1)),
		ovC1: page(e(one, c1, "subscriber", false, 2, []string{ovA1, ovA2}, []string{ovA1, ovA2}, 0)),
		ovC2: page(e(one, c1, "subscriber", false, 2, []string{ovA1, strings.ToUpper(ovU)}, []string{ovA1, ovU}, 0)),
		ovD:  page(e(one, c1, "subscriber", false, 0, []string{}, []string{}, 0)),
	}
}

// cannedReports are the canned nodes' reads, as readCluster returns them.
func cannedReports(t *testing.T) []nodeReport {
	t.Helper()
	var out []nodeReport
	for ov, body := range cannedTopics() {
		var resp struct {
			Topics []pubsubEntry `json:"topics"`
		}
		if err := json.Unmarshal([]byte(body), &resp); err != nil {
			t.Fatal(err)
		}
		out = append(out, nodeReport{treeTarget: treeTarget{Overlay: ov}, Entries: resp.Topics})
	}
	return out
}

// edgesOf lists a tree's nodes as "overlay role depth" and its edges as
// "child<parent" (first parent) and "child<<parent" (further ones), by the
// overlays' first four characters.
func edgesOf(tr treeview.Tree) (nodes, edges []string) {
	for _, n := range tr.Nodes {
		nodes = append(nodes, fmt.Sprintf("%s %s %d", n.Overlay[:4], n.Role, n.Depth))
		for k, p := range n.Parents {
			arrow := "<"
			if k > 0 {
				arrow = "<<"
			}
			edges = append(edges, n.Overlay[:4]+arrow+tr.Nodes[p].Overlay[:4])
		}
	}
	slices.Sort(nodes[min(1, len(nodes)):]) // the root stays first
	slices.Sort(edges)
	return nodes, edges
}

// The trees assembled from the canned reads: the broker first, every read
// node at its stated depth under the parents it names (the shallowest
// first), a node between parents detached, a parent nobody read one above
// its child, a broker's connection nobody read one below the broker; the
// other cohort in its own tree; the filters keep one cohort.
func TestLiveTrees(t *testing.T) {
	t.Parallel()
	trees := liveTrees(cannedReports(t), treeFilter{})
	if len(trees) != 2 || trees[0].Cohort != "c1c1c1c1c1c1c1c1" || trees[1].Cohort != "c2c2c2c2c2c2c2c2" {
		t.Fatalf("trees %+v", trees)
	}
	nodes, edges := edgesOf(trees[0])
	wantNodes := []string{"bbbb broker 0", "a1a1 subscriber 1", "a2a2 publisher 1", "c1c1 subscriber 2", "c2c2 subscriber 2", "dddd subscriber -1", "eeee unreported 1", "ffff unreported 1"}
	wantEdges := []string{"a1a1<bbbb", "a2a2<bbbb", "c1c1<<a2a2", "c1c1<a1a1", "c2c2<<eeee", "c2c2<a1a1", "ffff<bbbb"}
	if !slices.Equal(nodes, wantNodes) || !slices.Equal(edges, wantEdges) {
		t.Fatalf("cohort one:\nnodes %q\nwant  %q\nedges %q\nwant  %q", nodes, wantNodes, edges, wantEdges)
	}
	for _, n := range trees[0].Nodes {
		want := map[string]int{ovB: 3, ovA1: 2, ovA2: 1, ovU: 1}[n.Overlay] // U: C2 names it
		if n.Children != want {
			t.Errorf("%s: %d children, want %d", n.Overlay[:4], n.Children, want)
		}
	}
	st := trees[0].Stats()
	if st.Detached != 1 || st.MaxDepth != 2 || st.RootFanout != 3 {
		t.Fatalf("stats %+v", st)
	}
	nodes, edges = edgesOf(trees[1])
	if !slices.Equal(nodes, []string{"bbbb broker 0", "a1a1 subscriber 1"}) || !slices.Equal(edges, []string{"a1a1<bbbb"}) {
		t.Fatalf("cohort two: %q %q", nodes, edges)
	}

	for _, f := range []treeFilter{{cohort: "c2"}, {topic: topicOf("two")}, {topic: topicOf("two"), cohort: "c2c2"}} {
		if got := liveTrees(cannedReports(t), f); len(got) != 1 || got[0].Cohort != "c2c2c2c2c2c2c2c2" || len(got[0].Nodes) != 2 {
			t.Errorf("filter %+v: %d trees", f, len(got))
		}
	}
	if got := liveTrees(cannedReports(t), treeFilter{cohort: "ff"}); len(got) != 0 {
		t.Errorf("a filter no cohort passes: %d trees", len(got))
	}
	// A node that did not answer is not read: its cohorts' trees show it
	// where others name it, as unreported.
	reports := cannedReports(t)
	for i := range reports {
		if reports[i].Overlay == ovA1 {
			reports[i].Err = io.ErrUnexpectedEOF
		}
	}
	nodes, _ = edgesOf(liveTrees(reports, treeFilter{})[0])
	if !slices.Contains(nodes, "a1a1 unreported 1") {
		t.Fatalf("a node that did not answer: %q", nodes)
	}
}

// cannedCluster serves each canned node's GET /addresses and GET /pubsub/
// on its own port, and returns their URLs.
func cannedCluster(t *testing.T) []string {
	t.Helper()
	var apis []string
	for ov, body := range cannedTopics() {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /addresses", func(w http.ResponseWriter, _ *http.Request) {
			fmt.Fprintf(w, `{"overlay":%q,"underlay":[]}`, ov)
		})
		mux.HandleFunc("GET /pubsub/", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		apis = append(apis, srv.URL)
	}
	slices.Sort(apis)
	return apis
}

// The command reads every --api, draws both cohorts, and goes on past a
// node that does not answer, naming it; the SVG holds every node in the
// tree and every parent edge; the HTML page and the JSON say the same.
func TestTreeCommandOnce(t *testing.T) {
	t.Parallel()
	apis := cannedCluster(t)
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // nothing listens there any more
	dir := t.TempDir()
	args := []string{"tree", "--timeout", "10s", "--api", down.URL}
	for _, a := range apis {
		args = append(args, "--api", a)
	}
	svgPath := filepath.Join(dir, "tree.svg")
	err, out := execute(t, append(args, "--out", svgPath)...)
	if err != nil || !strings.Contains(out, down.URL) {
		t.Fatalf("%v; the node that is down not named:\n%s", err, out)
	}
	svg, err := os.ReadFile(svgPath)
	if err != nil {
		t.Fatal(err)
	}
	// Cohort one draws 7 (D is detached), cohort two 2; first-parent
	// edges A1, A2, C1, C2, X and A1; second-parent edges C1's and C2's.
	got := treeviewtest.Count(t, svg)
	if got.Nodes != 9 || got.P1 != 6 || got.P2 != 2 || got.Stubs != 0 || got.Failed != 0 ||
		got.Rows[0] != [3]int{2, 2, 0} || got.Rows[1] != [3]int{5, 5, 0} || got.Rows[2] != [3]int{2, 2, 0} {
		t.Fatalf("%d nodes, %d first-parent edges, %d second, %d stubs, %d failed, rows %v", got.Nodes, got.P1, got.P2, got.Stubs, got.Failed, got.Rows)
	}
	// U and X, not read, drawn as such, and the legend says what they are.
	if n := got.ByClass["circle.unreported"]; n != 2+1 {
		t.Fatalf("%d unreported marks, want U, X and the legend's", n)
	}
	if !bytes.Contains(svg, []byte("6 of 7 nodes read")) {
		t.Fatal("the title does not say how many nodes answered")
	}

	htmlPath := filepath.Join(dir, "tree.html")
	if err, out := execute(t, append(args, "--out", htmlPath, "--cohort", "c2")...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	page, _ := os.ReadFile(htmlPath)
	if !bytes.HasPrefix(page, []byte("<!doctype html>")) || bytes.Contains(page, []byte("http-equiv")) {
		t.Fatalf("not a static HTML page:\n%.300s", page)
	}
	if got := treeviewtest.Count(t, page); got.Nodes != 2 || got.P1 != 1 || got.ByClass["circle.unreported"] != 0 {
		t.Fatalf("--cohort c2: %d nodes, %d edges, %d unreported marks", got.Nodes, got.P1, got.ByClass["circle.unreported"])
	}

	err, out = execute(t, append(args, "--format", "json", "--topic", "one")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var trees []treeview.Tree
	if err := json.Unmarshal([]byte(out[strings.Index(out, "["):]), &trees); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(trees) != 1 || len(trees[0].Nodes) != 8 {
		t.Fatalf("--topic one: %+v", trees)
	}
}

// What the command refuses, before reading anything.
func TestTreeCommandRefuses(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tree"}, "--cluster or --api is required"},
		{[]string{"tree", "--api", "localhost:1633"}, "want a URL"},
		{[]string{"tree", "--api", "http://127.0.0.1:1", "--format", "png"}, "--format png"},
		{[]string{"tree", "--api", "http://127.0.0.1:1", "--topic", "0x12"}, "--topic 0x12"},
		{[]string{"tree", "--api", "http://127.0.0.1:1", "--watch", "--listen", "0.0.0.0:0"}, "a loopback address only"},
		{[]string{"tree", "--api", "http://127.0.0.1:1", "--timeout", "2s"}, "no node answered"},
		{[]string{"tree", "--cluster", "/nonexistent/bps-dev.json"}, "--cluster /nonexistent/bps-dev.json"},
	} {
		refused(t, c.args, []string{c.want})
	}
}

// The live page: served on loopback, reloading itself; the cluster is read
// again only once the interval has passed, and the server stops with its
// context.
func TestTreeServe(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	read := func(context.Context) treeSnapshot {
		reads.Add(1)
		rs := cannedReports(t)
		return treeSnapshot{trees: liveTrees(rs, treeFilter{}), reports: rs, at: time.Now()}
	}
	ln, err := listenLoopback(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var out bytes.Buffer
	go func() { done <- serveTree(ctx, &out, ln, time.Hour, read) }()
	base := "http://" + ln.Addr().String()
	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return b
	}
	page := get("/")
	if !bytes.Contains(page, []byte(`<meta http-equiv="refresh" content="3600">`)) {
		t.Fatalf("the page does not reload itself:\n%.400s", page)
	}
	if got := treeviewtest.Count(t, get("/tree.svg")); got.Nodes != 9 {
		t.Fatalf("/tree.svg: %d nodes", got.Nodes)
	}
	var trees []treeview.Tree
	if err := json.Unmarshal(get("/tree.json"), &trees); err != nil || len(trees) != 2 {
		t.Fatalf("/tree.json: %v, %d trees", err, len(trees))
	}
	if n := reads.Load(); n != 1 {
		t.Fatalf("%d reads of the cluster within one interval", n)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
	if _, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		t.Fatal("still listening after its context ended")
	}
}
