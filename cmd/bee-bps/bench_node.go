// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/wsclient"
	"github.com/spf13/cobra"
)

// bench-node measures the real-node path the way bee-js's GSOC client uses
// it (issue 11, item 4): a publishing session on one node and subscribing
// sessions on others, all on the broker's implicit ANCHOR cohort of one SOC
// address, driven through the WebSocket bridge by this project's own client
// (pkg/wsclient, GSOC mode). It prints the node-path round trip (from the
// publisher's frame written to each subscriber's frame read) and the
// broker's process CPU per publication, read from the node's /metrics
// (bee_process_cpu_seconds_total, which bee's registry serves). Run against
// separate bee-bps start processes, the broker's CPU is its own; on a
// bee-bps dev cluster every node shares one process, and the output says so.

// benchNodeFlags are bench-node's options.
type benchNodeFlags struct {
	cluster     string
	apis        []string
	subscribers string
	messages    int
	warmup      int
	rate        float64
	size        int
	rounds      int
	idle        time.Duration
	drain       time.Duration
	joinTimeout time.Duration
	server      string   // the --cluster/--api nodes' server: serverBPS or serverPR5435
	pr5435      []string // a second cluster, of bee #5435 nodes, measured in the same run
	brokerPID   int      // the --api broker's process on this host: its CPU from /proc, in ns
	pr5435PID   int      // the same for the --pr5435 broker
	counts      []int    // parsed from subscribers
}

// The servers bench-node speaks to. Both serve bee-js's GSOC mode on
// /pubsub/<SOC address>; bee pull request #5435 (the GSOC pubsub that
// preceded BPS) takes only a multiaddr as peer and ignores
// swarm-soc-fields, sending signature ‖ span ‖ payload.
const (
	serverBPS    = "bps"
	serverPR5435 = "pr5435"
)

func (c *command) initBenchNodeCmd() {
	var f benchNodeFlags
	cmd := &cobra.Command{
		Use:   "bench-node",
		Short: "Measure a cluster's node path in bee-js's GSOC mode: round-trip p50/p99, the broker's CPU per publication and per extra delivery",
		Long: `Measure a running cluster through its WebSocket bridges, in bee-js's GSOC
mode, with this project's client: a publishing session on the second node,
subscribing sessions on the nodes after it (round robin), the first node the
broker. For each subscriber count of --subscribers, in --rounds interleaved
rounds, it publishes --messages messages of --size bytes at --rate a second
and prints the round trip from the publisher's frame written to each
subscriber's frame read (p50, p99; the frame signed before this clock
starts), the same from before the frame is built and signed (signed p50,
signed p99: the clock of an application's publish, as the JavaScript
client's send() measures it) and the broker's CPU per publication: the
growth of process_cpu_seconds_total on the broker's /metrics, less its idle
rate measured for --idle before the runs. The difference between the largest
and the smallest subscriber count gives the CPU per extra delivery.

The nodes come from --cluster (the file bee-bps dev --info-file writes; its
first node is the broker) and --api (more nodes, in order, e.g. separate
bee-bps start processes; with no --cluster the first --api is the broker).
The broker's CPU is its process's: run the broker as a process of its own
to read it alone (bee-bps dev --nodes 1 and bee-bps start for the others).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return f.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.cluster, "cluster", "", "the `file` bee-bps dev --info-file wrote: its nodes, the first the broker")
	fl.StringSliceVar(&f.apis, "api", nil, "more nodes' API URLs, in order (repeat or comma-separate); without --cluster the first is the broker, the second the publisher's")
	fl.StringVar(&f.subscribers, "subscribers", "1,5", "subscriber counts to measure, comma separated; each run has that many subscribing sessions")
	fl.IntVar(&f.messages, "messages", 200, "measured messages per run")
	fl.IntVar(&f.warmup, "warmup", 5, "messages every subscriber must have received before a run is measured")
	fl.Float64Var(&f.rate, "rate", 20, "messages per second")
	fl.IntVar(&f.size, "size", 64, "payload bytes (8 to 4096)")
	fl.IntVar(&f.rounds, "rounds", 2, "rounds; each runs every subscriber count once, interleaved")
	fl.DurationVar(&f.idle, "idle", 20*time.Second, "measure the broker's idle CPU this long, once before the runs, and subtract it (0: none); /metrics counts in ticks of 10 ms")
	fl.DurationVar(&f.drain, "drain", 10*time.Second, "wait this long after the last message for stragglers")
	fl.DurationVar(&f.joinTimeout, "join-timeout", 30*time.Second, "bound on the warm-up: every subscriber attached and receiving")
	fl.StringVar(&f.server, "server", serverBPS, "what serves the --cluster and --api nodes: bps, or pr5435 (bee pull request #5435's GSOC pubsub: the broker is named by its loopback underlay)")
	fl.IntVar(&f.brokerPID, "broker-pid", 0, "the broker's process id, when it runs on this host: its CPU is read from /proc/<pid>/task/*/schedstat (nanoseconds) instead of /metrics (ticks of 10 ms)")
	fl.IntVar(&f.pr5435PID, "pr5435-broker-pid", 0, "--broker-pid for the --pr5435 cluster's broker")
	fl.StringSliceVar(&f.pr5435, "pr5435", nil, "API URLs of a second cluster, of bee #5435 nodes (the first its broker, the second its publisher's): every run is repeated on it, interleaved, and the ratios printed")
	c.root.AddCommand(cmd)
}

// check validates the options and parses --subscribers.
func (f *benchNodeFlags) check() error {
	if f.server == "" {
		f.server = serverBPS
	}
	if f.server != serverBPS && f.server != serverPR5435 {
		return fmt.Errorf("--server %q: bps or pr5435", f.server)
	}
	if f.server == serverPR5435 && f.cluster != "" {
		return errors.New("--cluster is a bee-bps dev cluster: with --server pr5435 give --api")
	}
	if len(f.pr5435) == 1 {
		return errors.New("--pr5435: give its broker's and its publisher's API URLs at least")
	}
	if f.cluster == "" && len(f.apis) < 2 {
		return errors.New("give --cluster (bee-bps dev's info file) or at least two --api URLs (the broker's, then the publisher's)")
	}
	f.counts = f.counts[:0]
	for _, s := range strings.Split(f.subscribers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return fmt.Errorf("--subscribers %s: %q is not a count of 1 or more", f.subscribers, s)
		}
		f.counts = append(f.counts, n)
	}
	switch {
	case f.messages < 1:
		return fmt.Errorf("--messages %d: must be at least 1", f.messages)
	case f.warmup < 1:
		return fmt.Errorf("--warmup %d: must be at least 1 (it tells when the subscribers are attached)", f.warmup)
	case f.rate <= 0:
		return fmt.Errorf("--rate %g: must be positive", f.rate)
	case f.size < 8 || f.size > 4096:
		return fmt.Errorf("--size %d: must be 8 to 4096 (the first 8 bytes carry the sequence number)", f.size)
	case f.rounds < 1:
		return fmt.Errorf("--rounds %d: must be at least 1", f.rounds)
	case f.idle < 0 || f.drain <= 0 || f.joinTimeout <= 0:
		return errors.New("--idle must not be negative, --drain and --join-timeout must be positive")
	}
	return nil
}

// benchNode is one node of the cluster under measurement.
type benchNode struct {
	name string
	api  string
}

// benchSystem is one cluster under measurement: BPS's, or bee #5435's.
type benchSystem struct {
	name   string // in the output: "BPS" or "#5435"
	server string // serverBPS or serverPR5435
	nodes  []benchNode
	peer   string  // the broker, as the sessions name it
	pid    int     // the broker's process on this host, or 0: its CPU from /metrics
	idle   float64 // the broker's idle CPU rate, in cores
	pubOwn bool    // the publishing node is a process of its own
}

// systemName is how the output names a server's cluster.
func systemName(server string) string {
	if server == serverPR5435 {
		return "#5435"
	}
	return "BPS"
}

// nodes lists a cluster's nodes, the broker first, and the broker's peer
// string for the sessions: for BPS its first underlay where the info file
// has one, else its overlay from GET /addresses; for #5435, which takes
// only a multiaddr, its loopback underlay from GET /addresses.
func benchNodes(ctx context.Context, cluster string, apis []string, server string) (nodes []benchNode, peer string, err error) {
	if cluster != "" {
		b, err := os.ReadFile(cluster)
		if err != nil {
			return nil, "", fmt.Errorf("--cluster %s: %w", cluster, pathErr(err))
		}
		var c devCluster
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, "", fmt.Errorf("--cluster %s: not a bee-bps dev --info-file file: %w", cluster, err)
		}
		for _, n := range c.Nodes {
			nodes = append(nodes, benchNode{name: n.Name, api: n.API})
		}
		if len(c.Nodes) > 0 && len(c.Nodes[0].Underlays) > 0 {
			peer = c.Nodes[0].Underlays[0]
		}
	}
	for i, a := range apis {
		nodes = append(nodes, benchNode{name: fmt.Sprintf("api-%d", i), api: strings.TrimRight(a, "/")})
	}
	if len(nodes) < 2 {
		return nil, "", fmt.Errorf("%d nodes: need the broker and a publishing node at least", len(nodes))
	}
	if peer == "" {
		var a struct {
			Overlay  string   `json:"overlay"`
			Underlay []string `json:"underlay"`
		}
		if err := benchGetJSON(ctx, nodes[0].api+"/addresses", &a); err != nil {
			return nil, "", fmt.Errorf("the broker's addresses: %w", err)
		}
		peer = a.Overlay
		if server == serverPR5435 {
			peer = loopbackUnderlay(a.Underlay)
			if peer == "" {
				return nil, "", fmt.Errorf("the broker %s lists no underlay", nodes[0].api)
			}
		}
	}
	return nodes, peer, nil
}

// loopbackUnderlay is the first of underlays on 127.0.0.1, else the first.
func loopbackUnderlay(underlays []string) string {
	for _, u := range underlays {
		if strings.HasPrefix(u, "/ip4/127.0.0.1/") {
			return u
		}
	}
	if len(underlays) > 0 {
		return underlays[0]
	}
	return ""
}

func benchGetJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// procStat is a node's process as its /metrics tells it.
type procStat struct {
	cpu   time.Duration // process_cpu_seconds_total
	start float64       // process_start_time_seconds: names the process
}

// processStat reads process_cpu_seconds_total and process_start_time_seconds
// from api's /metrics (Prometheus text format).
func processStat(ctx context.Context, api string) (procStat, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/metrics", nil)
	if err != nil {
		return procStat{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return procStat{}, fmt.Errorf("metrics: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return procStat{}, fmt.Errorf("GET %s/metrics: %s", api, resp.Status)
	}
	return parseProcStat(resp.Body)
}

func parseProcStat(r io.Reader) (procStat, error) {
	var (
		st           procStat
		cpuOK, stOK  bool
		sc           = bufio.NewScanner(r)
		metricValues = map[string]*float64{}
	)
	var cpu float64
	metricValues["process_cpu_seconds_total"] = &cpu
	metricValues["process_start_time_seconds"] = &st.start
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		p, ok := metricValues[strings.TrimPrefix(f[0], "bee_")] // bee's registry prefixes its namespace
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			return procStat{}, fmt.Errorf("metrics: %s %q: %w", f[0], f[1], err)
		}
		*p = v
		cpuOK = cpuOK || p == &cpu
		stOK = stOK || p == &st.start
	}
	if err := sc.Err(); err != nil {
		return procStat{}, fmt.Errorf("metrics: %w", err)
	}
	if !cpuOK || !stOK {
		return procStat{}, errors.New("metrics: no process_cpu_seconds_total or process_start_time_seconds (is this a bee node's API?)")
	}
	st.cpu = time.Duration(cpu * float64(time.Second))
	return st, nil
}

// benchRun is one measured run.
type benchRun struct {
	system         string
	round, subs    int
	expected       int
	delivered      int
	p50, p99       time.Duration // frame written → read (signed before the clock)
	signedP50      time.Duration // frame built and signed → read: the publish's own clock
	signedP99      time.Duration
	wall           time.Duration
	brokerCPU      time.Duration // the broker process's CPU over the window
	brokerIdle     float64       // its idle CPU rate, in cores
	publisherCPU   time.Duration // the publishing node's process, if another one
	publisherOwn   bool          // the publishing node is a process of its own
	warmupAttempts int
}

func (r benchRun) perPub(d time.Duration) time.Duration {
	return d / time.Duration(max(r.expected/max(r.subs, 1), 1))
}

// brokerPerPub is the broker's CPU per publication, less its idle rate.
func (r benchRun) brokerPerPub() time.Duration {
	return r.perPub(r.brokerCPU - time.Duration(r.brokerIdle*float64(r.wall)))
}

func (f *benchNodeFlags) run(ctx context.Context, w io.Writer) error {
	var systems []*benchSystem
	nodes, peer, err := benchNodes(ctx, f.cluster, f.apis, f.server)
	if err != nil {
		return err
	}
	systems = append(systems, &benchSystem{name: systemName(f.server), server: f.server, nodes: nodes, peer: peer, pid: f.brokerPID})
	if len(f.pr5435) > 0 {
		nodes, peer, err := benchNodes(ctx, "", f.pr5435, serverPR5435)
		if err != nil {
			return fmt.Errorf("--pr5435: %w", err)
		}
		systems = append(systems, &benchSystem{name: systemName(serverPR5435), server: serverPR5435, nodes: nodes, peer: peer, pid: f.pr5435PID})
		if systems[0].name == systems[1].name { // two #5435 clusters
			systems[0].name += " (--api)"
		}
	}
	fmt.Fprintf(w, "bench-node: GSOC mode through the WebSocket bridge (pkg/wsclient); %d messages of %d B at %g/s per run, subscriber counts %v, %d rounds interleaved; CPU from each node's /metrics process_cpu_seconds_total (ticks of 10 ms) unless said below\n",
		f.messages, f.size, f.rate, f.counts, f.rounds)
	for _, sys := range systems {
		if err := sys.describe(ctx, w); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)

	key, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		return err
	}
	signer := crypto.NewDefaultSigner(key)
	// Each broker's idle rate, once: /metrics counts CPU in ticks of 10 ms,
	// so a short sample would be mostly rounding. The systems' idle windows
	// overlap: the same wait measures them all.
	if f.idle > 0 {
		s0 := make([]procStat, len(systems))
		for i, sys := range systems {
			if s0[i], err = sys.brokerStat(ctx); err != nil {
				return err
			}
		}
		t0 := time.Now()
		select {
		case <-time.After(f.idle):
		case <-ctx.Done():
			return ctx.Err()
		}
		for i, sys := range systems {
			s1, err := sys.brokerStat(ctx)
			if err != nil {
				return err
			}
			sys.idle = float64(s1.cpu-s0[i].cpu) / float64(time.Since(t0))
			fmt.Fprintf(w, "%s broker's process idle: %.4f cores (over %s, before the runs)\n", sys.name, sys.idle, f.idle)
		}
		fmt.Fprintln(w)
	}
	var runs []benchRun
	fmt.Fprintln(w, "| system | round | subscribers | delivered | p50 | p99 | broker CPU/publication | less idle | publishing node CPU/publication | signed p50 | signed p99 |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for round := range f.rounds {
		for _, s := range f.counts {
			for _, sys := range systems {
				r, err := f.runOnce(ctx, sys, signer, s)
				if err != nil {
					return fmt.Errorf("%s, round %d, %d subscribers: %w", sys.name, round+1, s, err)
				}
				r.system, r.round, r.publisherOwn = sys.name, round+1, sys.pubOwn
				runs = append(runs, r)
				pubCPU := "same process"
				if sys.pubOwn {
					pubCPU = usec(r.perPub(r.publisherCPU))
				}
				fmt.Fprintf(w, "| %s | %d | %d | %d/%d | %s | %s | %s | %s | %s | %s | %s |\n", r.system, r.round, r.subs, r.delivered, r.expected,
					msec(r.p50), msec(r.p99), usec(r.perPub(r.brokerCPU)), usec(r.brokerPerPub()), pubCPU, msec(r.signedP50), msec(r.signedP99))
			}
		}
	}
	for _, sys := range systems {
		printBenchNodeSummary(w, sys.name, f.counts, runs)
	}
	if len(systems) > 1 {
		printBenchNodeRatios(w, systems[0].name, systems[1].name, f.counts, runs)
	}
	return nil
}

// brokerStat is the broker's process CPU: from /proc where its pid is
// known, else from its /metrics.
func (sys *benchSystem) brokerStat(ctx context.Context) (procStat, error) {
	if sys.pid <= 0 {
		return processStat(ctx, sys.nodes[0].api)
	}
	cpu, err := schedCPU(fmt.Sprintf("/proc/%d", sys.pid))
	return procStat{cpu: cpu}, err
}

// schedCPU is the CPU time of the process at dir (/proc/<pid>): the sum of
// its threads' time on a CPU, the first field of each
// task/<tid>/schedstat, in nanoseconds. A thread that exited takes its
// time with it; the Go runtime rarely ends one.
func schedCPU(dir string) (time.Duration, error) {
	tasks, err := os.ReadDir(dir + "/task")
	if err != nil {
		return 0, fmt.Errorf("broker's cpu: %w", err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/task/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("broker's cpu: %s: %w", t.Name(), err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// describe prints what the system's cluster is and notes whether its
// broker and publisher have processes of their own.
func (sys *benchSystem) describe(ctx context.Context, w io.Writer) error {
	stats := make([]procStat, len(sys.nodes))
	for i, n := range sys.nodes {
		var err error
		if stats[i], err = processStat(ctx, n.api); err != nil {
			return fmt.Errorf("%s %s (%s): %w", sys.name, n.name, n.api, err)
		}
	}
	var shared []string // nodes in the broker's process
	for i, s := range stats[1:] {
		if s.start == stats[0].start {
			shared = append(shared, sys.nodes[i+1].name)
		}
	}
	sys.pubOwn = stats[1].start != stats[0].start
	fmt.Fprintf(w, "  %s: broker %s (%s), publisher on %s, subscribers on %s\n",
		sys.name, sys.nodes[0].name, sys.peer, sys.nodes[1].name, subscriberNodes(sys.nodes))
	if sys.pid > 0 {
		fmt.Fprintf(w, "  the %s broker's CPU from /proc/%d/task/*/schedstat (nanoseconds)\n", sys.name, sys.pid)
	}
	if len(shared) > 0 {
		fmt.Fprintf(w, "  the %s broker shares its process with %s (same process_start_time_seconds): its CPU below is theirs too\n", sys.name, strings.Join(shared, ", "))
	}
	return nil
}

// printBenchNodeSummary prints, per subscriber count, the system's medians
// over the rounds, and the broker's CPU per extra delivery.
func printBenchNodeSummary(w io.Writer, system string, counts []int, runs []benchRun) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s, medians over the rounds:\n", system)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subscribers | p50 | p99 | broker CPU/publication (less idle) | publishing node CPU/publication | signed p50 | signed p99 |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|")
	cpuAt := map[int]time.Duration{}
	uniq := slices.Compact(slices.Sorted(slices.Values(counts)))
	for _, s := range uniq {
		var p50, p99, sp50, sp99, cpu, pub []time.Duration
		own := false
		for _, r := range runs {
			if r.system == system && r.subs == s {
				p50, p99, cpu = append(p50, r.p50), append(p99, r.p99), append(cpu, r.brokerPerPub())
				sp50, sp99 = append(sp50, r.signedP50), append(sp99, r.signedP99)
				pub, own = append(pub, r.perPub(r.publisherCPU)), r.publisherOwn
			}
		}
		cpuAt[s] = median(cpu)
		pubCPU := "same process"
		if own {
			pubCPU = usec(median(pub))
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s |\n", s, msec(median(p50)), msec(median(p99)), usec(cpuAt[s]), pubCPU, msec(median(sp50)), msec(median(sp99)))
	}
	if len(uniq) > 1 {
		lo, hi := uniq[0], uniq[len(uniq)-1]
		extra := (cpuAt[hi] - cpuAt[lo]) / time.Duration(hi-lo)
		fmt.Fprintf(w, "\n%s broker CPU per extra delivery: %s ((%s − %s) ÷ %d more subscribers)\n", system, usec(extra), usec(cpuAt[hi]), usec(cpuAt[lo]), hi-lo)
	}
}

// printBenchNodeRatios prints, per subscriber count, a's figures over b's:
// the ratio of the medians and the range of the rounds' ratios (each round
// ran a and b back to back).
func printBenchNodeRatios(w io.Writer, a, b string, counts []int, runs []benchRun) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%s ÷ %s, same run (ratio of the medians; in brackets the range of the rounds' ratios):\n", a, b)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| subscribers | p50 | p99 | broker CPU/publication (less idle) |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|")
	pick := func(r benchRun, k int) time.Duration {
		switch k {
		case 0:
			return r.p50
		case 1:
			return r.p99
		}
		return r.brokerPerPub()
	}
	for _, s := range slices.Compact(slices.Sorted(slices.Values(counts))) {
		cells := make([]string, 3)
		for k := range cells {
			var as, bs []time.Duration
			var ratios []float64
			byRound := map[int]time.Duration{}
			for _, r := range runs {
				if r.subs == s && r.system == b {
					bs = append(bs, pick(r, k))
					byRound[r.round] = pick(r, k)
				}
			}
			for _, r := range runs {
				if r.subs == s && r.system == a {
					as = append(as, pick(r, k))
					if d, ok := byRound[r.round]; ok && d > 0 {
						ratios = append(ratios, float64(pick(r, k))/float64(d))
					}
				}
			}
			cells[k] = fmt.Sprintf("%s [%s]", ratio(median(as), median(bs)), ratioRange(ratios))
		}
		fmt.Fprintf(w, "| %d | %s | %s | %s |\n", s, cells[0], cells[1], cells[2])
	}
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", float64(a)/float64(b))
}

func ratioRange(r []float64) string {
	if len(r) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f–%.2f×", slices.Min(r), slices.Max(r))
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(d))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func subscriberNodes(nodes []benchNode) string {
	if len(nodes) < 3 {
		return nodes[1].name
	}
	names := make([]string, 0, len(nodes)-2)
	for _, n := range nodes[2:] {
		names = append(names, n.name)
	}
	return strings.Join(names, ", ")
}

// subscriberNode is where subscriber i's session opens: the nodes after the
// publisher's in turn, or the publisher's node in a cluster of two.
func subscriberNode(nodes []benchNode, i int) benchNode {
	if len(nodes) < 3 {
		return nodes[1]
	}
	return nodes[2+i%(len(nodes)-2)]
}

// warmBase is the first warm-up message's sequence number; measured
// messages count from 0.
const warmBase = 1 << 62

// runOnce runs one measurement with subs subscribing sessions on a fresh
// SOC (a random id), hence a fresh cohort.
func (f *benchNodeFlags) runOnce(ctx context.Context, sys *benchSystem, signer crypto.Signer, subs int) (r benchRun, err error) {
	nodes := sys.nodes
	r = benchRun{subs: subs, expected: subs * f.messages, brokerIdle: sys.idle}
	id := make([]byte, 32)
	if _, err := rand.Read(id); err != nil {
		return r, err
	}
	owner, err := signer.EthereumAddress()
	if err != nil {
		return r, err
	}
	topic, err := wsclient.GSOCAddress(id, owner.Bytes())
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The GSOC client's frames, signature ‖ span ‖ payload: swarm-soc-fields
	// is left to the node's default, which #5435 does not read.
	opts := func(api string) wsclient.Options {
		return wsclient.Options{API: api, Peer: sys.peer, Mode: wsclient.GSOC, Topic: topic}
	}

	// Two clocks per measured message, unix nanos: built, before its frame
	// is built and signed (an application's publish); sent, once it is
	// signed, as the frame is written.
	built := make([]atomic.Int64, f.messages)
	sent := make([]atomic.Int64, f.messages)
	var (
		wg       sync.WaitGroup // the readers
		lmu      sync.Mutex     // guards lat and signed
		lat      []time.Duration
		signed   []time.Duration
		got      atomic.Int64 // measured first deliveries
		allIn    = make(chan struct{})
		allOnce  sync.Once
		warm     = make([]atomic.Int64, subs) // warm-up frames per subscriber
		sessions []*wsclient.Session
	)
	defer func() {
		cancel() // a reader's Next returns when its context ends
		for _, s := range sessions {
			_ = s.Close()
		}
		wg.Wait()
	}()
	for i := range subs {
		s, err := wsclient.Subscribe(ctx, opts(subscriberNode(nodes, i).api))
		if err != nil {
			return r, fmt.Errorf("subscriber %d: %w", i, err)
		}
		sessions = append(sessions, s)
		wg.Add(1)
		go func() {
			defer wg.Done()
			seen := make([]bool, f.messages)
			var own, ownSigned []time.Duration
			defer func() {
				lmu.Lock()
				lat = append(lat, own...)
				signed = append(signed, ownSigned...)
				lmu.Unlock()
			}()
			for {
				m, text, err := s.Next(ctx)
				if err != nil {
					return
				}
				if text != nil || len(m.Payload) < 8 {
					continue
				}
				seq := binary.BigEndian.Uint64(m.Payload)
				if seq >= warmBase {
					warm[i].Add(1)
					continue
				}
				if seq >= uint64(f.messages) || seen[seq] {
					continue
				}
				seen[seq] = true
				now := time.Now().UnixNano()
				own = append(own, time.Duration(now-sent[seq].Load()))
				ownSigned = append(ownSigned, time.Duration(now-built[seq].Load()))
				if got.Add(1) == int64(r.expected) {
					allOnce.Do(func() { close(allIn) })
				}
			}
		}()
	}
	pub, err := wsclient.PublishGSOC(ctx, opts(nodes[1].api), owner.Bytes(), id)
	if err != nil {
		return r, fmt.Errorf("publisher: %w", err)
	}
	sessions = append(sessions, pub)
	var pubEnd atomic.Pointer[error] // why the publisher's session ended: the node's close reason
	wg.Add(1)
	go func() { // a GSOC publisher's session receives the cohort too
		defer wg.Done()
		for {
			if _, _, err := pub.Next(ctx); err != nil {
				pubEnd.Store(&err)
				return
			}
		}
	}()
	sendErr := func(err error) error {
		if why := pubEnd.Load(); why != nil && ctx.Err() == nil {
			return fmt.Errorf("%w (the session: %w)", err, *why)
		}
		return err
	}
	payload := func(seq uint64) []byte {
		p := make([]byte, f.size)
		binary.BigEndian.PutUint64(p, seq)
		return p
	}

	// Warm-up: the subscribers' nodes join the broker when their sessions
	// open; GSOC sessions say nothing when they are attached, so messages
	// are sent until every subscriber has received --warmup of them.
	deadline := time.Now().Add(f.joinTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for seq := uint64(warmBase); ; seq++ {
		ready := true
		for i := range warm {
			ready = ready && warm[i].Load() >= int64(f.warmup)
		}
		if ready {
			break
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("warm-up: not every subscriber received %d messages within %s", f.warmup, f.joinTimeout)
		}
		if err := pub.SendGSOC(signer, id, payload(seq)); err != nil {
			return r, fmt.Errorf("warm-up: %w", sendErr(err))
		}
		r.warmupAttempts++
		select {
		case <-tick.C:
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}

	// The measured window.
	b0, err := sys.brokerStat(ctx)
	if err != nil {
		return r, err
	}
	p0, err := processStat(ctx, nodes[1].api)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	every := time.NewTicker(time.Duration(float64(time.Second) / f.rate))
	defer every.Stop()
	for seq := range f.messages {
		if seq > 0 {
			select {
			case <-every.C:
			case <-ctx.Done():
				return r, ctx.Err()
			}
		}
		// Signed before the first clock (sent) starts: its round trip is
		// the nodes'. The second (built) starts before the payload, the
		// frame and its signature: an application's publish → receive.
		built[seq].Store(time.Now().UnixNano())
		frame, err := wsclient.GSOCFrame(signer, id, payload(uint64(seq)))
		if err != nil {
			return r, err
		}
		sent[seq].Store(time.Now().UnixNano())
		if err := pub.SendFrame(frame); err != nil {
			return r, fmt.Errorf("message %d: %w", seq, sendErr(err))
		}
	}
	drain := time.NewTimer(f.drain)
	defer drain.Stop()
	select {
	case <-allIn:
	case <-drain.C:
	case <-ctx.Done():
		return r, ctx.Err()
	}
	r.wall = time.Since(t0)
	b1, err := sys.brokerStat(ctx)
	if err != nil {
		return r, err
	}
	p1, err := processStat(ctx, nodes[1].api)
	if err != nil {
		return r, err
	}
	r.brokerCPU, r.publisherCPU = b1.cpu-b0.cpu, p1.cpu-p0.cpu
	r.delivered = int(got.Load())

	cancel()
	for _, s := range sessions {
		_ = s.Close()
	}
	sessions = nil
	wg.Wait()
	slices.Sort(lat)
	slices.Sort(signed)
	r.p50, r.p99 = quantile(lat, 0.50), quantile(lat, 0.99)
	r.signedP50, r.signedP99 = quantile(signed, 0.50), quantile(signed, 0.99)
	return r, nil
}

// quantile is the q-quantile (nearest rank) of sorted d.
func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func msec(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}
func usec(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}
