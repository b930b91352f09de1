// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Command bench-compare runs BPS and gossipsub side by side on the same
// transport — go-libp2p's mocknet, every link with the same latency — with
// the same number of subscribers, the same 1 KB messages and one publisher
// at a steady rate, and prints for each: delivered %, p50/p99 latency,
// duplicate receptions, bytes written and CPU time per delivery, and the
// ratios BPS/gossipsub.
//
// BPS is pkg/bps, unchanged, over libp2p streams (adapter.go), in two
// topologies: a star (singlehop, one broker whose fan-out bound is raised
// to N) and a tree (multihop, SWIP-61: a broker with a bounded fan-out,
// every subscriber a relay with a bounded capacity and two parents;
// -bps-tree). gossipsub is
// go-libp2p-pubsub with its default parameters on N+1 hosts in a random
// graph. See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	pubsub "github.com/libp2p/go-libp2p-pubsub"
)

// config is one invocation's parameters, the same for both systems.
type config struct {
	sizes    []int
	messages int
	warmup   int     // messages sent and delivered before the measurement
	rate     float64 // messages per second, at most
	budget   float64 // deliveries per second across all subscribers, at most
	size     int     // payload bytes
	latency  time.Duration
	dials    int // gossipsub: random peers each host dials
	drain    time.Duration
	meshWait time.Duration
	idle     time.Duration // measure CPU use without traffic this long
	seed     int64
	systems  map[string]bool // "bps" (the star), "gossipsub"
	tree     bool            // also run BPS as a multihop tree
	fanout   int             // tree: the broker's children
	relayCap int             // tree: children per relay
	parents  int             // tree: parents per subscriber (the broker's children keep 1)
	lazy     bool            // tree: lazy push (the second parent announces, sends when asked)
	joinPar  int             // subscriptions joining at once
}

// result is one system's run at one N.
type result struct {
	name          string
	n, messages   int
	expected      int // n * messages
	delivered     int // first deliveries at the subscribers
	duplicates    uint64
	p50, p99      time.Duration
	bytes, writes uint64
	cpu, wall     time.Duration
	rate          float64       // messages per second this run published at
	idleLoad      float64       // cores used without traffic
	verify        time.Duration // CPU of one signature check, calibrated
	notes         []string
}

func (r result) per(v float64) float64 {
	if r.delivered == 0 {
		return 0
	}
	return v / float64(r.delivered)
}

func (r result) deliveredPct() float64 {
	if r.expected == 0 {
		return 0
	}
	return 100 * float64(r.delivered) / float64(r.expected)
}

func (r result) cpuPer() time.Duration { return time.Duration(r.per(float64(r.cpu))) }

// idlePer is the CPU the nodes would have used without traffic during the
// window, per delivery: their timers and heartbeats.
func (r result) idlePer() time.Duration { return time.Duration(r.per(r.idleLoad * float64(r.wall))) }

// restPer is CPU/delivery beyond the idle share and the one signature
// check a delivery takes.
func (r result) restPer() time.Duration { return r.cpuPer() - r.idlePer() - r.verify }

// load is the process's CPU use during the run, in cores.
func (r result) load() float64     { return ratio(float64(r.cpu), float64(r.wall)) }
func (r result) bytesPer() float64 { return r.per(float64(r.bytes)) }

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, os.Stdout, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench-compare:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("bench-compare", flag.ContinueOnError)
	ns := fs.String("n", "100,400,1000", "subscriber counts, comma separated")
	fs.IntVar(&cfg.messages, "messages", 20, "measured messages the publisher sends")
	fs.IntVar(&cfg.warmup, "warmup", 2, "messages sent and delivered before the measurement starts")
	fs.Float64Var(&cfg.rate, "rate", 20, "messages per second (lowered by -budget at large N)")
	fs.Float64Var(&cfg.budget, "budget", 250, "deliveries per second, all subscribers together: the rate at N is min(rate, budget/N), so that N simulated nodes fit the machine's cores")
	fs.IntVar(&cfg.size, "size", 1024, "payload bytes (at most 4096: one chunk)")
	fs.DurationVar(&cfg.latency, "latency", 10*time.Millisecond, "one-way latency of every link")
	fs.IntVar(&cfg.dials, "dials", 10, "gossipsub: random peers each host dials")
	fs.DurationVar(&cfg.drain, "drain", 10*time.Second, "wait after the last message for stragglers")
	fs.DurationVar(&cfg.idle, "idle", 2*time.Second, "measure CPU use without traffic this long, after the warm-up")
	fs.DurationVar(&cfg.meshWait, "mesh-wait", 10*time.Second, "gossipsub: bound on the wait for the mesh to form")
	fs.Int64Var(&cfg.seed, "seed", 1, "seed of the gossipsub graph")
	systems := fs.String("systems", "bps,gossipsub", "which systems to run: bps (the star; the tree is -bps-tree), gossipsub")
	fs.BoolVar(&cfg.tree, "bps-tree", true, "also run BPS as a multihop tree (SWIP-61): a broker with -bps-fanout children, relays with -bps-relay-capacity, -bps-parents parents")
	fs.IntVar(&cfg.fanout, "bps-fanout", 16, "tree: children the broker takes (its MaxStreamsPerCohort)")
	fs.IntVar(&cfg.relayCap, "bps-relay-capacity", 16, "tree: children each subscriber takes as a relay (RelayCapacity)")
	fs.IntVar(&cfg.parents, "bps-parents", 2, "tree: parents per subscriber, 1 or 2 (the broker's own children keep one)")
	fs.BoolVar(&cfg.lazy, "bps-lazy", true, "tree: lazy push, the node's default (off: bps.Options.NoLazyPush): of two parents one sends each delivery whole, the other announces it and sends it when asked")
	fs.IntVar(&cfg.joinPar, "join-parallel", 16, "BPS: subscriptions joining at once")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.systems = make(map[string]bool)
	for _, f := range strings.Split(*systems, ",") {
		switch f = strings.TrimSpace(f); f {
		case "bps", "gossipsub":
			cfg.systems[f] = true
		case "":
		default:
			return cfg, fmt.Errorf("-systems: unknown system %q (bps, gossipsub)", f)
		}
	}
	for _, f := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return cfg, fmt.Errorf("-n: bad subscriber count %q", f)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	switch {
	case cfg.messages < 1 || cfg.warmup < 0:
		return cfg, fmt.Errorf("-messages must be at least 1, -warmup at least 0")
	case cfg.rate <= 0 || cfg.budget <= 0:
		return cfg, fmt.Errorf("-rate and -budget must be positive")
	case cfg.size < 8 || cfg.size > 4096:
		return cfg, fmt.Errorf("-size must be 8..4096")
	case cfg.dials < 1:
		return cfg, fmt.Errorf("-dials must be at least 1")
	case cfg.tree && (cfg.fanout < 1 || cfg.relayCap < 1):
		return cfg, fmt.Errorf("-bps-fanout and -bps-relay-capacity must be at least 1")
	case cfg.parents < 1 || cfg.parents > 2:
		return cfg, fmt.Errorf("-bps-parents must be 1 or 2")
	case cfg.joinPar < 1:
		return cfg, fmt.Errorf("-join-parallel must be at least 1")
	}
	return cfg, nil
}

func run(ctx context.Context, w io.Writer, cfg config) error {
	p := pubsub.DefaultGossipSubParams()
	fmt.Fprintf(w, "bench-compare: %d messages of %d B from one publisher at min(%g/s, %g deliveries/s ÷ N); links %s one way (go-libp2p mocknet); GOMAXPROCS %d\n",
		cfg.messages, cfg.size, cfg.rate, cfg.budget, cfg.latency, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "  BPS star: pkg/bps over libp2p streams, singlehop: one broker, MaxStreamsPerCohort raised from %d to N: one broker's fan-out, not a tree\n",
		bps.DefaultMaxStreamsPerCohort)
	if cfg.tree {
		fmt.Fprintf(w, "  BPS tree: multihop (SWIP-61): the broker takes %d children, every subscriber relays for up to %d and keeps %d parents (the broker's children keep 1); joiners attach where the probe sends them\n",
			cfg.fanout, cfg.relayCap, cfg.parents)
	}
	fmt.Fprintf(w, "  gossipsub v0.19.0: default parameters (D=%d, D_lo=%d, D_hi=%d, heartbeat %s), N+1 hosts subscribed, each dialing %d random others, Ed25519 signing\n",
		p.D, p.Dlo, p.Dhi, p.HeartbeatInterval, cfg.dials)
	fmt.Fprintln(w, "  from the first publish until every subscriber has every message: bytes written on the protocol's streams by every node, CPU of the whole process (getrusage)")
	fmt.Fprintln(w)

	var rows []row
	for _, n := range cfg.sizes {
		at := cfg
		at.rate = min(cfg.rate, cfg.budget/float64(n))
		bpsVerify, gossipVerify, err := calibrate(200)
		if err != nil {
			return fmt.Errorf("calibrate: %w", err)
		}
		var rw row
		for _, sys := range []string{"bps", "bps-tree", "gossipsub"} {
			if sys == "bps-tree" && !cfg.tree || sys != "bps-tree" && !cfg.systems[sys] {
				continue
			}
			runtime.GC()
			debug.FreeOSMemory()
			var r result
			start := time.Now()
			switch sys {
			case "bps", "bps-tree":
				r, err = runBPS(ctx, at, n, sys == "bps-tree")
				r.verify = bpsVerify
			default:
				r, err = runGossipsub(ctx, at, n)
				r.verify = gossipVerify
			}
			if err != nil {
				return fmt.Errorf("%s at N=%d: %w", sys, n, err)
			}
			r.rate = at.rate
			r.notes = append(r.notes, "loadavg "+loadavg())
			fmt.Fprintf(os.Stderr, "  %s N=%d at %g/s: %s\n", r.name, n, at.rate, time.Since(start).Round(time.Millisecond))
			switch sys {
			case "gossipsub":
				rw.gossip = &r
			default:
				rw.bps = append(rw.bps, &r)
			}
		}
		rows = append(rows, rw)
	}
	printTable(w, rows)
	return nil
}

// row is one N's results: the BPS topologies run, and gossipsub.
type row struct {
	bps    []*result
	gossip *result
}

func printTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| N | system | rate | delivered | p50 | p99 | duplicates/delivery | bytes/delivery | writes/delivery | CPU/delivery | of which idle | of which signature check | rest | process load | notes |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, rw := range rows {
		for _, r := range append(slices.Clone(rw.bps), rw.gossip) {
			if r == nil {
				continue
			}
			fmt.Fprintf(w, "| %d | %s | %g/s | %.2f %% | %s | %s | %.2f | %.0f | %.2f | %s | %s | %s | %s | %.2f cores | %s |\n",
				r.n, r.name, r.rate, r.deliveredPct(), ms(r.p50), ms(r.p99), r.per(float64(r.duplicates)),
				r.bytesPer(), r.per(float64(r.writes)), us(r.cpuPer()), us(r.idlePer()), us(r.verify), us(r.restPer()),
				r.load(), strings.Join(r.notes, "; "))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Ratios BPS/gossipsub, same run (goals: CPU/delivery ≤ 1/50, bytes/delivery ≤ 1/5, BPS p99 below gossipsub p50):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| N | BPS | CPU/delivery | CPU/delivery without idle | rest | bytes/delivery | p50 | p99 | BPS p99 / gossipsub p50 | CPU goal | bytes goal | latency goal |")
	fmt.Fprintln(w, "|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
	for _, rw := range rows {
		g := rw.gossip
		if g == nil {
			continue
		}
		for _, b := range rw.bps {
			cpu := ratio(float64(b.cpuPer()), float64(g.cpuPer()))
			by := ratio(b.bytesPer(), g.bytesPer())
			lat := ratio(float64(b.p99), float64(g.p50))
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", b.n, strings.TrimPrefix(b.name, "BPS "),
				fx(cpu), fx(ratio(float64(b.cpuPer()-b.idlePer()), float64(g.cpuPer()-g.idlePer()))),
				fx(ratio(float64(b.restPer()), float64(g.restPer()))), fx(by),
				fx(ratio(float64(b.p50), float64(g.p50))), fx(ratio(float64(b.p99), float64(g.p99))), fx(lat),
				verdict(cpu <= 1.0/50), verdict(by <= 1.0/5), verdict(lat < 1))
		}
	}
}

// loadavg is the machine's 1-minute load average, as /proc/loadavg says.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "unknown"
	}
	return f[0]
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func fx(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 0.01:
		return fmt.Sprintf("%.4f×", v)
	case v < 10:
		return fmt.Sprintf("%.2f×", v)
	default:
		return fmt.Sprintf("%.0f×", v)
	}
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }
func us(d time.Duration) string { return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond)) }
