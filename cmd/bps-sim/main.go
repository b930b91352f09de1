// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Command bps-sim shows what BPS cohorts do at scale. It builds a network of
// nodes in one process on the in-memory transport of pkg/bps/streamtest —
// every node a pkg/bps Service with its own overlay and key — lays them out
// in SWIP-74 cohorts (a broker, a publisher, up to 64 subscribers each),
// runs publishers at a rate over links with latency, bandwidth and loss,
// with optional churn, and prints what happened: delivery ratio, latency
// percentiles, duplicates, bytes and CPU per delivery, depth, joins by
// status, SWIP-74's counters, and the memory the network took.
//
//	bps-sim                      # 1,000 nodes, the default scenario
//	bps-sim -nodes 10000 -json   # the same at 10,000 nodes; JSON on stdout, the table on stderr
//	bps-sim -nodes 2000 -churn 5 -kill-brokers 0.1 -png cdf.png
//
// Subscribers rejoin whenever their subscription ends, waiting out SWIP-74's
// backoff; latency is measured from the publisher stamping the payload to
// the subscriber having verified the delivery, so it includes signing,
// verification and this machine's CPU contention, not only the links.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/ethersphere/bps/pkg/treeview"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bps-sim:", err)
		os.Exit(1)
	}
}

// cli is what the command line asks for: the scenario and the outputs.
type cli struct {
	Scenario
	asJSON      bool
	pngPath     string
	cpuProfile  string
	treePath    string
	treeSample  int
	treeCohorts int
}

// parseFlags reads the command line: DefaultScenario (the node's defaults)
// changed by the flags given.
func parseFlags(args []string, stderr io.Writer) (cli, error) {
	c := cli{Scenario: DefaultScenario()}
	sc := &c.Scenario
	fs := flag.NewFlagSet("bps-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&sc.Nodes, "nodes", sc.Nodes, "nodes in the network")
	fs.IntVar(&sc.Fanout, "fanout", sc.Fanout, "subscribers per cohort, at most (sets the number of cohorts)")
	fs.IntVar(&sc.Cohorts, "cohorts", sc.Cohorts, "cohorts, one broker each (0: as few as -fanout allows; more subscribers than the broker's bound meet FULL)")
	fs.IntVar(&sc.Publishers, "publishers", sc.Publishers, "nodes publishing as the admin, per cohort")
	fs.Float64Var(&sc.Rate, "rate", sc.Rate, "updates per second per cohort")
	durFlag(fs, &sc.Duration, "duration", "how long the publishers publish")
	fs.IntVar(&sc.Payload, "payload", sc.Payload, "payload bytes per update (8 to 4096)")
	durFlag(fs, &sc.Latency, "latency", "one-way latency of every link")
	durFlag(fs, &sc.Latency, "link-latency", "the same as -latency")
	fs.Int64Var(&sc.Bandwidth, "bandwidth", sc.Bandwidth, "bytes per second per link direction (0: unlimited)")
	fs.Int64Var(&sc.Uplink, "uplink", sc.Uplink, "bytes per second per node, all its links together (0: unlimited)")
	fs.Float64Var(&sc.Loss, "loss", sc.Loss, "probability a write is lost and retransmitted 200ms later")
	fs.Float64Var(&sc.Churn, "churn", sc.Churn, "subscriber node restarts per second, network-wide")
	durFlag(fs, &sc.Downtime, "downtime", "how long a churned or killed node stays down")
	fs.Float64Var(&sc.KillBrokers, "kill-brokers", sc.KillBrokers, "fraction of brokers killed halfway through and restarted after -downtime")
	fs.IntVar(&sc.RelayCapacity, "relay-capacity", sc.RelayCapacity, "children a subscriber accepts per cohort as a relay (SWIP-61; the node's default; 0: it does not relay)")
	fs.IntVar(&sc.BrokerCapacity, "broker-capacity", sc.BrokerCapacity, "subscriber streams a broker admits per cohort (the node's default)")
	durFlag(fs, &sc.ProbeWait, "probe-wait", "how long a node at capacity waits for its subtree's candidates (the node's default)")
	fs.IntVar(&sc.Parents, "parents", sc.Parents, "parents a subscriber keeps: 1 or 2 (the node's default: 2)")
	durFlag(fs, &sc.Heartbeat, "heartbeat", "the root's heartbeat period (the node's default, 2s; negative: none, as before issue 24)")
	fs.BoolVar(&sc.LazyParents, "lazy-parents", sc.LazyParents, "lazy push: the second parent announces each delivery and sends it when asked (the node's default: true; -lazy-parents=false: both parents send every delivery whole)")
	fs.Float64Var(&sc.FailRelays, "fail-relays", sc.FailRelays, "fraction of relays killed halfway through (they stay down)")
	fs.BoolVar(&sc.Persist, "persist", sc.Persist, "publishers store every update (SOC and wrapped chunk); a subscriber recovers a gap from storage with bps.FetchUpdate (SWIP-65)")
	price := fs.Bool("price", true, "charge for depth on bee's accounting (false: charge nothing, as -delivery-price 0 -publish-price 0)")
	fs.Uint64Var(&sc.DeliveryPrice, "delivery-price", sc.DeliveryPrice, "accounting units a child owes its parent per frame delivered (the node's default; 0 with -publish-price 0: free)")
	fs.Uint64Var(&sc.PublishPrice, "publish-price", sc.PublishPrice, "accounting units per publication per hop up")
	fs.Float64Var(&sc.JoinRate, "join-rate", sc.JoinRate, "subscribers starting per second (0: all at once)")
	durFlag(fs, &sc.JoinWait, "join-wait", "with relays, how long to wait for every subscriber to have a parent before publishing")
	durFlag(fs, &sc.BackoffMin, "backoff-min", "the clients' shortest backoff")
	durFlag(fs, &sc.BackoffMax, "backoff-max", "the clients' longest backoff")
	fs.IntVar(&sc.QueueLen, "queue", sc.QueueLen, "outbound queue per subscriber stream, in frames")
	virtualFlags(fs, &sc.VirtualTime)
	fs.Int64Var(&sc.Seed, "seed", sc.Seed, "seed of overlays, keys, losses, churn and phases")
	durFlag(fs, &sc.Drain, "drain", "how long to wait, at most, for deliveries in flight once publishing ends")
	fs.Float64Var(&sc.Byzantine, "byzantine", sc.Byzantine, "fraction of the subscribers that attack (-attack); never a broker or a publisher")
	fs.StringVar(&sc.Attack, "attack", sc.Attack, "what the -byzantine nodes do, otherwise following the protocol:"+attackNames())
	fs.IntVar(&sc.AttackK, "attack-k", sc.AttackK, "-attack withhold drops every k-th message")
	durFlag(fs, &sc.AttackDelay, "attack-delay", "-attack delay holds every message this long")
	fs.IntVar(&sc.AttackFlood, "attack-flood", sc.AttackFlood, "frames (or refer Joins) per burst of a flood attack")
	fs.IntVar(&sc.PeerProbeRounds, "peer-probe-rounds", sc.PeerProbeRounds, "probe rounds one peer's Joins may start at a node per 10 s (0: the node's default; -1: no ration)")
	fs.IntVar(&sc.PrefixProbeRounds, "prefix-probe-rounds", sc.PrefixProbeRounds, "probe rounds the Joins of peers sharing an overlay's first byte may start at a node per 10 s (0: the node's default; -1: no ration)")
	fs.BoolVar(&c.asJSON, "json", false, "write the result as JSON to stdout, and the table to stderr")
	fs.StringVar(&c.pngPath, "png", "", "write the latency CDF as a PNG to this file")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file")
	fs.StringVar(&c.treePath, "tree", "", "draw the cohorts' trees as they were at the end of the run to this file: SVG, or an HTML page if it ends in .html")
	fs.IntVar(&c.treeSample, "tree-sample", treeview.AutoPerDepth, "nodes drawn per depth, at most: a wider depth is sampled (its counts stay whole)")
	fs.IntVar(&c.treeCohorts, "tree-cohorts", 1, "how many cohorts -tree draws, the first ones")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if !*price {
		sc.DeliveryPrice, sc.PublishPrice = 0, 0
	}
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	sc := c.Scenario

	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	fmt.Fprintf(stderr, "bps-sim: %d nodes, %s of publishing...\n", sc.Nodes, sc.Duration)
	res, err := Run(ctx, sc)
	if err != nil {
		return err
	}
	return c.output(res, stdout, stderr)
}

// output writes what the command line asks for of res.
func (c cli) output(res *Result, stdout, stderr io.Writer) error {
	if c.pngPath != "" {
		f, err := os.Create(c.pngPath)
		if err != nil {
			return err
		}
		if err := writeCDF(f, res); err != nil {
			_ = f.Close()
			return fmt.Errorf("write %s: %w", c.pngPath, err)
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	if c.treePath != "" {
		if err := writeTreeFile(c.treePath, res, c.treeSample, c.treeCohorts); err != nil {
			return err
		}
	}
	if c.asJSON {
		if err := writeTable(stderr, res); err != nil {
			return err
		}
		return writeJSON(stdout, res)
	}
	return writeTable(stdout, res)
}

// writeTreeFile draws the first k cohorts' trees of res to path.
func writeTreeFile(path string, res *Result, perDepth, k int) error {
	trees := res.Trees[:min(max(k, 1), len(res.Trees))]
	sc := res.Scenario
	o := treeview.Options{
		PerDepth: perDepth,
		Parents:  sc.Parents,
		Title: fmt.Sprintf("bps-sim: %d nodes, relay capacity %d, %d parent%s, %s links, %.0f%% of relays failed",
			res.Build.Nodes, sc.RelayCapacity, sc.Parents, plural(sc.Parents), sc.Latency, 100*sc.FailRelays),
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	write := treeview.WriteSVG
	if strings.HasSuffix(strings.ToLower(path), ".html") {
		write = treeview.WriteHTML
	}
	if err := write(f, trees, o); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// durFlag binds a Dur to a duration flag.
func durFlag(fs *flag.FlagSet, d *Dur, name, usage string) {
	fs.Func(name, fmt.Sprintf("%s (default %s)", usage, time.Duration(*d)), func(s string) error {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		*d = Dur(v)
		return nil
	})
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
