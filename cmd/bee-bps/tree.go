// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ethersphere/bps/pkg/treeview"
	"github.com/spf13/cobra"
)

// bee-bps tree: the picture of a live cluster. Each node's GET /pubsub/
// states the node's place in every cohort it takes part in (one entry per
// cohort: its role, depth, parents, and how many children it has); the
// command reads them all and draws each cohort's tree with the renderer the
// simulator uses (pkg/treeview). As in the simulator, a node is drawn at
// the depth it states and under the parents it names: one node's word
// about another is used only for nodes that were not read (a node named as
// a parent, or a broker's or relay's connection, whose API was not given
// or did not answer), which are drawn as "unreported".

// Bounds of a tree read.
const (
	treeReaders     = 16      // nodes read at once
	treeMaxBody     = 8 << 20 // bytes of one node's GET /pubsub/ answer
	treeMaxNodes    = 4096    // APIs one command reads
	treeDefaultWait = 5 * time.Second
)

// pubsubEntry is what the tree reads of one GET /pubsub/ entry
// (docs/api.md, "GET /pubsub/").
type pubsubEntry struct {
	TopicAddress string   `json:"topicAddress"`
	Role         string   `json:"role"`
	Relay        bool     `json:"relay"`
	Connections  []string `json:"connections"`
	Cohort       string   `json:"cohort"`
	Binding      string   `json:"binding"`
	Depth        uint32   `json:"depth"`
	Parents      []string `json:"parents"`
	Children     int      `json:"children"`
}

// treeTarget is a node to read: its API, and its overlay if known (from a
// dev cluster's info file; otherwise read from bee's GET /addresses).
type treeTarget struct {
	API     string
	Overlay string
}

// nodeReport is one node's read.
type nodeReport struct {
	treeTarget
	Entries []pubsubEntry
	Err     error
}

// treeFilter keeps the cohorts a tree command draws.
type treeFilter struct {
	topic  string // hex topic address; "" any
	cohort string // a prefix of the cohort's short name; "" any
}

func (f treeFilter) keep(e pubsubEntry) bool {
	return (f.topic == "" || strings.EqualFold(e.TopicAddress, f.topic)) &&
		(f.cohort == "" || strings.HasPrefix(e.Cohort, f.cohort))
}

// readCluster reads every target's GET /pubsub/ (and its overlay, where
// not known), at most treeReaders at once, each within the client's
// timeout. The reports are in the targets' order.
func readCluster(ctx context.Context, client *http.Client, targets []treeTarget) []nodeReport {
	out := make([]nodeReport, len(targets))
	sem := make(chan struct{}, treeReaders)
	var wg sync.WaitGroup
	for i, tg := range targets {
		out[i].treeTarget = tg
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
				defer func() { <-sem }()
			case <-ctx.Done():
				out[i].Err = ctx.Err()
				return
			}
			out[i].Entries, out[i].Overlay, out[i].Err = readNode(ctx, client, tg)
		})
	}
	wg.Wait()
	return out
}

// readNode reads one node's cohorts, and its overlay if not known.
func readNode(ctx context.Context, client *http.Client, tg treeTarget) ([]pubsubEntry, string, error) {
	overlay := tg.Overlay
	if overlay == "" {
		var a struct {
			Overlay string `json:"overlay"`
		}
		if err := fetchJSON(ctx, client, tg.API+"/addresses", &a); err != nil {
			return nil, "", err
		}
		if _, err := hex.DecodeString(a.Overlay); err != nil || a.Overlay == "" {
			return nil, "", fmt.Errorf("%s/addresses: no overlay in the answer", tg.API)
		}
		overlay = a.Overlay
	}
	var resp struct {
		Topics []pubsubEntry `json:"topics"`
	}
	if err := fetchJSON(ctx, client, tg.API+"/pubsub/", &resp); err != nil {
		return nil, overlay, err
	}
	return resp.Topics, overlay, nil
}

func fetchJSON(ctx context.Context, client *http.Client, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, treeMaxBody+1))
	switch {
	case err != nil:
		return fmt.Errorf("GET %s: %w", url, err)
	case len(b) > treeMaxBody:
		return fmt.Errorf("GET %s: the answer is larger than %d bytes", url, treeMaxBody)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, bytes.TrimSpace(b))
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// liveTrees assembles the trees of the cohorts f keeps from the nodes'
// reports: one per cohort, the cohorts a read node brokers first, then by
// name. In each, the broker is node 0; every read node with an entry for
// the cohort is drawn at the depth it states (a non-broker without a
// parent as detached) under the parents it names. A parent, or a broker's
// or relay's connection, that no read node is, is added as unreported: at
// one below its parent's depth, or one above its shallowest child's.
func liveTrees(reports []nodeReport, f treeFilter) []treeview.Tree {
	type member struct {
		overlay string
		e       pubsubEntry
	}
	byCohort := map[string][]member{}
	for _, r := range reports {
		if r.Err != nil {
			continue
		}
		for _, e := range r.Entries {
			if f.keep(e) {
				byCohort[e.Cohort] = append(byCohort[e.Cohort], member{overlay: strings.ToLower(r.Overlay), e: e})
			}
		}
	}
	brokered := func(ms []member) bool {
		return slices.ContainsFunc(ms, func(m member) bool { return m.e.Role == treeview.RoleBroker })
	}
	cohorts := make([]string, 0, len(byCohort))
	for c := range byCohort {
		cohorts = append(cohorts, c)
	}
	slices.SortFunc(cohorts, func(a, b string) int {
		ba, bb := brokered(byCohort[a]), brokered(byCohort[b])
		if ba != bb {
			if ba {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})

	trees := make([]treeview.Tree, 0, len(cohorts))
	for _, c := range cohorts {
		ms := byCohort[c]
		slices.SortStableFunc(ms, func(a, b member) int {
			if ra, rb := a.e.Role == treeview.RoleBroker, b.e.Role == treeview.RoleBroker; ra != rb {
				if ra {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.overlay, b.overlay)
		})
		t := treeview.Tree{Cohort: c}
		index := map[string]int{}
		var parents [][]string
		var read []pubsubEntry // the read nodes' entries, by index
		for _, m := range ms {
			if _, dup := index[m.overlay]; dup {
				continue // one entry per cohort per node; a second is ignored
			}
			n := treeview.Node{Overlay: m.overlay, Role: m.e.Role, Depth: int(m.e.Depth), Children: m.e.Children}
			if m.e.Role != treeview.RoleBroker && len(m.e.Parents) == 0 {
				n.Depth = -1 // between parents: detached
			}
			index[m.overlay] = len(t.Nodes)
			t.Nodes = append(t.Nodes, n)
			read = append(read, m.e)
			ps := make([]string, len(m.e.Parents))
			for i, p := range m.e.Parents {
				ps[i] = strings.ToLower(p)
			}
			parents = append(parents, ps)
		}
		reported := len(t.Nodes)
		unreported := func(overlay string, depth int) int {
			if i, ok := index[overlay]; ok {
				if i >= reported {
					t.Nodes[i].Depth = min(t.Nodes[i].Depth, depth)
				}
				return i
			}
			index[overlay] = len(t.Nodes)
			t.Nodes = append(t.Nodes, treeview.Node{Overlay: overlay, Role: treeview.RoleUnreported, Depth: depth})
			parents = append(parents, nil)
			return len(t.Nodes) - 1
		}
		// The parents no read node is, one above the child.
		for i := range reported {
			for _, p := range parents[i] {
				if _, ok := index[p]; !ok || index[p] >= reported {
					j := unreported(p, max(t.Nodes[i].Depth-1, 0))
					t.Nodes[j].Children++
				}
			}
		}
		// The children no read node is: a connection that is not a
		// parent, one below the node that names it.
		for i, e := range read {
			if t.Nodes[i].Depth < 0 {
				continue // detached: its connections place nothing
			}
			for _, conn := range e.Connections {
				conn = strings.ToLower(conn)
				if slices.Contains(parents[i], conn) {
					continue
				}
				if j, ok := index[conn]; ok && j < reported {
					continue // a read node names its own parents
				}
				j := unreported(conn, t.Nodes[i].Depth+1)
				if self := t.Nodes[i].Overlay; !slices.Contains(parents[j], self) {
					parents[j] = append(parents[j], self)
				}
			}
		}
		for i := range t.Nodes {
			for _, p := range parents[i] {
				if j, ok := index[p]; ok && j != i {
					t.Nodes[i].Parents = append(t.Nodes[i].Parents, j)
				}
			}
			// The shallowest parent first: the one the node's depth comes from.
			slices.SortStableFunc(t.Nodes[i].Parents, func(a, b int) int { return cmp.Compare(t.Nodes[a].Depth, t.Nodes[b].Depth) })
		}
		trees = append(trees, t)
	}
	return trees
}

// treeFormat is what a tree command writes.
type treeFormat string

const (
	formatSVG  treeFormat = "svg"
	formatHTML treeFormat = "html"
	formatJSON treeFormat = "json" // the trees as data (treeview.Tree)
)

// treeSnapshot is one read of the cluster, drawn.
type treeSnapshot struct {
	trees   []treeview.Tree
	reports []nodeReport
	at      time.Time
}

// title heads the picture: when, and how many nodes answered.
func (s treeSnapshot) title() string {
	ok := 0
	for _, r := range s.reports {
		if r.Err == nil {
			ok++
		}
	}
	t := fmt.Sprintf("bee-bps tree: %d of %d nodes read at %s, %d cohort%s", ok, len(s.reports), s.at.UTC().Format(time.TimeOnly+" UTC"), len(s.trees), plural(len(s.trees)))
	return t
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// write draws the snapshot as format; refresh, if positive, makes an HTML
// page reload itself.
func (s treeSnapshot) write(w io.Writer, format treeFormat, refresh time.Duration) error {
	o := treeview.Options{Title: s.title(), Parents: 2, Refresh: refresh}
	switch format {
	case formatHTML:
		return treeview.WriteHTML(w, s.trees, o)
	case formatJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(s.trees)
	default:
		return treeview.WriteSVG(w, s.trees, o)
	}
}

// treeFlags are the tree command's.
type treeFlags struct {
	cluster  string
	apis     []string
	topic    string
	cohort   string
	out      string
	format   string
	watch    bool
	listen   string
	interval time.Duration
	timeout  time.Duration
}

// targets are the nodes to read: the cluster file's and the --api ones.
func (f *treeFlags) targets() ([]treeTarget, error) {
	var out []treeTarget
	if f.cluster != "" {
		b, err := os.ReadFile(f.cluster)
		if err != nil {
			return nil, fmt.Errorf("--cluster %s: %w", f.cluster, pathErr(err))
		}
		var c devCluster
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, fmt.Errorf("--cluster %s: not a bee-bps dev --info-file file: %w", f.cluster, err)
		}
		for _, n := range c.Nodes {
			out = append(out, treeTarget{API: strings.TrimRight(n.API, "/"), Overlay: n.Overlay})
		}
	}
	for _, a := range f.apis {
		if !strings.HasPrefix(a, "http://") && !strings.HasPrefix(a, "https://") {
			return nil, fmt.Errorf("--api %s: want a URL, http://host:port", a)
		}
		out = append(out, treeTarget{API: strings.TrimRight(a, "/")})
	}
	switch {
	case len(out) == 0:
		return nil, errors.New("--cluster or --api is required: the nodes to read")
	case len(out) > treeMaxNodes:
		return nil, fmt.Errorf("%d nodes: at most %d", len(out), treeMaxNodes)
	}
	return out, nil
}

// formatOf is the format asked for, or the one --out's extension names.
func (f *treeFlags) formatOf() (treeFormat, error) {
	switch strings.ToLower(f.format) {
	case "svg":
		return formatSVG, nil
	case "html":
		return formatHTML, nil
	case "json":
		return formatJSON, nil
	case "":
	default:
		return "", fmt.Errorf("--format %s: want svg, html or json", f.format)
	}
	switch strings.ToLower(filepath.Ext(f.out)) {
	case ".html", ".htm":
		return formatHTML, nil
	case ".json":
		return formatJSON, nil
	}
	return formatSVG, nil
}

func (c *command) initTreeCmd() {
	var f treeFlags
	cmd := &cobra.Command{
		Use:   "tree",
		Short: "Draw the tree of each cohort of a running cluster",
		Long: `Read every node's GET /pubsub/ and draw each cohort's tree (SWIP-61):
the broker at the top, every depth a row below it, each node under the
parents it names. Nodes are read from a dev cluster's info file (--cluster)
and from --api URLs; a parent or child no read node is (its API not given,
or not answering) is drawn as "unreported".

Once (the default): an SVG, an HTML page or the trees as JSON, to --out or
standard output. With --watch: a page served on a loopback address that
reads the cluster again each time it reloads, at most once per --interval,
and reloads itself every --interval.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			targets, err := f.targets()
			if err != nil {
				return err
			}
			format, err := f.formatOf()
			if err != nil {
				return err
			}
			var filter treeFilter
			if f.topic != "" {
				b, err := hash32("topic", f.topic)
				if err != nil {
					return err
				}
				filter.topic = hex.EncodeToString(b)
			}
			filter.cohort = strings.ToLower(f.cohort)
			if f.interval < 100*time.Millisecond {
				return fmt.Errorf("--interval %s: at least 100ms", f.interval)
			}
			client := &http.Client{Timeout: f.timeout}
			read := func(ctx context.Context) treeSnapshot {
				reports := readCluster(ctx, client, targets)
				for _, r := range reports {
					if r.Err != nil {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", r.API, r.Err)
					}
				}
				return treeSnapshot{trees: liveTrees(reports, filter), reports: reports, at: time.Now()}
			}
			if f.watch {
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				ln, err := listenLoopback(ctx, f.listen)
				if err != nil {
					return err
				}
				return serveTree(ctx, cmd.OutOrStdout(), ln, f.interval, read)
			}
			snap := read(cmd.Context())
			if !slices.ContainsFunc(snap.reports, func(r nodeReport) bool { return r.Err == nil }) {
				return errors.New("no node answered")
			}
			if len(snap.trees) == 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), "no cohort: the nodes read take part in none (or none the filter keeps)")
			}
			if f.out == "" || f.out == "-" {
				return snap.write(cmd.OutOrStdout(), format, 0)
			}
			var b bytes.Buffer
			if err := snap.write(&b, format, 0); err != nil {
				return err
			}
			return writeAtomic(f.out, b.Bytes(), 0o644)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cluster, "cluster", "", "the `file` bee-bps dev --info-file wrote: every node in it is read")
	fl.StringArrayVar(&f.apis, "api", nil, "a node's API `URL` to read (repeatable; with or without --cluster)")
	fl.StringVar(&f.topic, "topic", "", "draw only the cohorts on this topic (64 hex characters, or a name hashed with keccak256)")
	fl.StringVar(&f.cohort, "cohort", "", "draw only the cohort whose name (GET /pubsub/'s cohort) starts with this")
	fl.StringVar(&f.out, "out", "", "write to this `file` (.svg, .html or .json; default: SVG on standard output)")
	fl.StringVar(&f.format, "format", "", "svg, html or json (default: from --out's extension, else svg)")
	fl.BoolVar(&f.watch, "watch", false, "serve a page that redraws the cluster every --interval, on --listen")
	fl.StringVar(&f.listen, "listen", "127.0.0.1:0", "with --watch: the loopback `address` to serve on")
	fl.DurationVar(&f.interval, "interval", 2*time.Second, "with --watch: how often the page reloads (and the cluster is read, at most)")
	fl.DurationVar(&f.timeout, "timeout", treeDefaultWait, "how long one node's read may take")
	c.root.AddCommand(cmd)
}

// serveTree serves the live picture on a loopback address until ctx ends:
// GET / is the HTML page, reloading itself every interval; GET /tree.svg
// the SVG alone, GET /tree.json the trees. A request reads the cluster
// unless the last read is younger than interval; one read at a time.
//
// Served rather than a file rewritten on a timer: the browser reloads the
// page by itself (a file needs the reader to reload it), nothing is read
// while nobody looks, and nothing is written to disk. Loopback only: the
// page shows the cluster's overlays and is not authenticated.
func serveTree(ctx context.Context, out io.Writer, ln net.Listener, interval time.Duration, read func(context.Context) treeSnapshot) error {
	var (
		mu   sync.Mutex
		last treeSnapshot
	)
	snapshot := func(r *http.Request) treeSnapshot {
		mu.Lock()
		defer mu.Unlock()
		if !last.at.IsZero() && time.Since(last.at) < interval {
			return last
		}
		snap := read(r.Context())
		if r.Context().Err() == nil {
			last = snap // a read the browser gave up on is not kept
		}
		return snap
	}
	mux := http.NewServeMux()
	serve := func(format treeFormat, contentType string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var b bytes.Buffer
			if err := snapshot(r).write(&b, format, interval); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", contentType)
			w.Header().Set("Cache-Control", "no-store")
			_, _ = w.Write(b.Bytes())
		}
	}
	mux.HandleFunc("GET /{$}", serve(formatHTML, "text/html; charset=utf-8"))
	mux.HandleFunc("GET /tree.svg", serve(formatSVG, "image/svg+xml"))
	mux.HandleFunc("GET /tree.json", serve(formatJSON, "application/json"))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(out, "serving the cluster's tree on http://%s/ (every %s); Ctrl-C to stop\n", ln.Addr(), interval)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-done
	return err
}

// listenLoopback listens on listen, a loopback address only: the page
// shows the cluster's overlays and is not authenticated.
func listenLoopback(ctx context.Context, listen string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("--listen %s: %w", listen, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("--listen %s: a loopback address only (127.0.0.1, ::1, localhost): the page is not authenticated", listen)
	}
	return (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
}
