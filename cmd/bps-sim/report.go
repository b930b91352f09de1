// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/treeview"
)

// Dur is a time.Duration that JSON carries as seconds, for plotting.
type Dur time.Duration

// MarshalJSON writes the duration in seconds.
func (d Dur) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, time.Duration(d).Seconds(), 'g', -1, 64), nil
}

// UnmarshalJSON reads seconds.
func (d *Dur) UnmarshalJSON(b []byte) error {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return err
	}
	*d = Dur(f * float64(time.Second))
	return nil
}

func (d Dur) String() string { return round(time.Duration(d)).String() }

// round keeps three significant digits.
func round(d time.Duration) time.Duration {
	for _, r := range []time.Duration{time.Second, time.Millisecond, time.Microsecond} {
		if d >= 100*r {
			return d.Round(r)
		}
		if d >= 10*r {
			return d.Round(r / 10)
		}
		if d >= r {
			return d.Round(r / 100)
		}
	}
	return d
}

// Result is what a run measured. Durations are in seconds in JSON.
type Result struct {
	Scenario Scenario `json:"scenario"`
	Cohorts  int      `json:"cohorts"`
	Build    Build    `json:"build"`

	RunTime Dur     `json:"run_time"` // publishing and draining
	CPU     Dur     `json:"cpu"`      // process CPU time over the run
	CPUUse  float64 `json:"cpu_use"`  // CPU ÷ (run time × GOMAXPROCS)
	Load    float64 `json:"load"`     // the machine's 1-minute load average at the end (-1: unknown)
	Cores   int     `json:"cores"`    // GOMAXPROCS
	Drained bool    `json:"drained"`  // deliveries settled before the drain deadline

	Sent      uint64 `json:"sent"`      // publications sent
	Skipped   uint64 `json:"skipped"`   // publications not sent: no publisher stream
	Published uint64 `json:"published"` // accepted by brokers

	Deliveries        uint64  `json:"deliveries"`          // distinct updates received
	Expected          uint64  `json:"expected"`            // (update, subscriber) pairs attached when accepted and for a while after
	DeliveredAttached uint64  `json:"delivered_attached"`  // of those, received
	DeliveryRatio     float64 `json:"delivery_ratio"`      // delivered_attached / expected
	InFlight          uint64  `json:"in_flight"`           // pairs accepted just before the subscriber detached (a crash, a reset)
	InFlightDelivered uint64  `json:"in_flight_delivered"` // of those, received
	InFlightWindow    Dur     `json:"in_flight_window"`    // how close to a detach counts as in flight
	DeliveryRatioAll  float64 `json:"delivery_ratio_all"`  // deliveries / (published × subscribers)
	DuplicatesPerNode float64 `json:"duplicates_per_node"` // received again, per subscriber
	Latency           Latency `json:"latency"`

	WireBytesPerDelivery   float64           `json:"wire_bytes_per_delivery"`   // every byte on every link during the run
	BrokerBytesPerDelivery float64           `json:"broker_bytes_per_delivery"` // written by brokers, whole run
	CPUPerDelivery         Dur               `json:"cpu_per_delivery"`
	Depth                  map[int]uint64    `json:"depth"`    // deliveries by the subscriber's depth at the end (-1: not in the tree)
	Joins                  map[string]uint64 `json:"joins"`    // brokers' answers by status
	Clients                map[string]uint64 `json:"clients"`  // subscribers' and publishers' outcomes
	Counters               map[string]uint64 `json:"counters"` // SWIP-74's eight and the node's own
	Churned                uint64            `json:"churned"`  // subscriber restarts
	BrokersKilled          uint64            `json:"brokers_killed"`
	PeakRSSMiB             float64           `json:"peak_rss_mib"`   // the process's peak resident set (-1: unknown)
	Hung                   string            `json:"hung,omitempty"` // the shutdown hung: where the goroutines' stacks were written

	Tree    TreeResult     `json:"tree"`
	Virtual *VirtualResult `json:"virtual,omitempty"` // a virtual-time run (virtual.go)
	Pricing *PriceResult   `json:"pricing,omitempty"`
	// Persistence is what -persist stored and recovered (SWIP-65).
	Persistence *PersistResult `json:"persistence,omitempty"`
	// Attack is what -byzantine's attackers did to the honest subscribers.
	Attack *AttackResult   `json:"attack,omitempty"`
	Trees  []treeview.Tree `json:"-"` // every cohort's tree as the run left it (-tree draws them)
}

// Build is what building and joining the network cost.
type Build struct {
	Nodes               int     `json:"nodes"`
	Streams             int     `json:"streams"`    // member streams at the brokers
	Subscribed          int     `json:"subscribed"` // subscribers that joined
	Time                Dur     `json:"time"`       // nodes, services, links
	JoinTime            Dur     `json:"join_time"`
	HeapPerNode         float64 `json:"heap_per_node"`   // bytes, after GC
	HeapPerStream       float64 `json:"heap_per_stream"` // bytes, after GC, both ends
	StackPerStream      float64 `json:"stack_per_stream"`
	GoroutinesPerStream float64 `json:"goroutines_per_stream"`
	SysMiB              float64 `json:"sys_mib"` // memory obtained from the OS at the end
}

// Latency is publish-to-delivery time, including the publisher's signing,
// both hops and the subscriber's verification.
type Latency struct {
	Samples int        `json:"samples"`
	Mean    Dur        `json:"mean"`
	P50     Dur        `json:"p50"`
	P90     Dur        `json:"p90"`
	P99     Dur        `json:"p99"`
	Max     Dur        `json:"max"`
	CDF     []CDFPoint `json:"cdf"`
}

// CDFPoint says that a fraction of the deliveries took at most Latency.
type CDFPoint struct {
	Latency  Dur     `json:"latency"`
	Fraction float64 `json:"fraction"`
}

// collect computes the result from what the slots and brokers saw.
//
// An update is expected at a subscriber if the subscriber was attached when
// the broker accepted it and stayed attached for as long as deliveries take
// (the drain's quiet period, or the run's p99 latency if longer); one
// accepted closer to the subscriber detaching — killed, or its broker killed
// — was in flight when it did, is lost with it, and is counted apart.
func (s *sim) collect(res *Result, wireBytes uint64, end time.Time) {
	var all []time.Duration
	for _, sl := range s.slots {
		sl.mu.Lock()
		all = append(all, sl.latencies...)
		sl.mu.Unlock()
	}
	res.Latency = latency(all)
	grace := max(s.sc.quiet(), time.Duration(res.Latency.P99))
	res.InFlightWindow = Dur(grace)
	var dups, wantAll uint64
	for _, st := range s.cohorts {
		st.mu.Lock()
		accepted := make(map[uint64]time.Time, len(st.accepted))
		for k, v := range st.accepted {
			accepted[k] = v
		}
		brokers := slices.Clone(st.brokers)
		st.mu.Unlock()
		res.Published += uint64(len(accepted))
		wantAll += uint64(len(accepted)) * uint64(len(st.slots))
		for _, b := range brokers {
			res.BrokerBytesPerDelivery += float64(b.Stats().Out.Bytes)
		}
		for _, sl := range st.slots {
			sl.mu.Lock()
			for idx, at := range accepted {
				switch attached(sl.intervals, at, end, grace) {
				case whileAttached:
					res.Expected++
					if sl.seen.test(idx) {
						res.DeliveredAttached++
					}
				case beforeDetach:
					res.InFlight++
					if sl.seen.test(idx) {
						res.InFlightDelivered++
					}
				}
			}
			res.Deliveries += sl.received - sl.dups
			dups += sl.dups
			sl.mu.Unlock()
		}
	}
	if res.Expected > 0 {
		res.DeliveryRatio = float64(res.DeliveredAttached) / float64(res.Expected)
	}
	if wantAll > 0 {
		res.DeliveryRatioAll = float64(res.Deliveries) / float64(wantAll)
	}
	res.DuplicatesPerNode = float64(dups) / float64(max(len(s.slots), 1))
	if res.Deliveries > 0 {
		res.WireBytesPerDelivery = float64(wireBytes) / float64(res.Deliveries)
		res.BrokerBytesPerDelivery /= float64(res.Deliveries)
		res.CPUPerDelivery = Dur(time.Duration(res.CPU) / time.Duration(res.Deliveries))
	} else {
		res.BrokerBytesPerDelivery = 0
	}

	s.counts.mu.Lock()
	res.Joins, res.Clients, res.Counters = map[string]uint64{}, map[string]uint64{}, map[string]uint64{}
	for k, v := range s.counts.m {
		switch {
		case strings.HasPrefix(k, "join "):
			res.Joins[strings.TrimPrefix(k, "join ")] = v
		case strings.HasPrefix(k, "subscri") || strings.HasPrefix(k, "publish") || strings.HasPrefix(k, "restart"):
			res.Clients[k] = v
		default:
			res.Counters[k] = v
		}
	}
	s.counts.mu.Unlock()
	for c := bps.CounterInvalidSOC; c <= bps.CounterRateLimited; c++ {
		res.Counters[c.String()] += 0
	}
	s.mu.Lock()
	res.Sent, res.Skipped, res.Churned, res.BrokersKilled = s.sent, s.skipped, s.churned, s.killed
	s.mu.Unlock()
}

// attachment is where an update's acceptance falls in a subscriber's
// attachments.
type attachment int

const (
	detached      attachment = iota
	whileAttached            // and the subscriber stayed attached long enough to receive it
	beforeDetach             // within grace of the subscriber detaching: in flight when it did
)

// attached places at in the intervals. An interval still open when the run
// ended (end), closed only as the run stopped its followers, counts as
// attached to the end: the run drained before stopping.
func attached(ivs []interval, at, end time.Time, grace time.Duration) attachment {
	for _, iv := range ivs {
		if at.Before(iv.from) {
			continue
		}
		if iv.to.IsZero() || !iv.to.Before(end) {
			if at.Before(end) {
				return whileAttached
			}
			continue
		}
		if at.Before(iv.to.Add(-grace)) {
			return whileAttached
		}
		if at.Before(iv.to) {
			return beforeDetach
		}
	}
	return detached
}

// cdfPoints is how many points of the CDF the JSON carries.
const cdfPoints = 200

func latency(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	slices.Sort(ds)
	q := func(p float64) Dur { return Dur(ds[min(int(p*float64(len(ds))), len(ds)-1)]) }
	var sum time.Duration
	for _, d := range ds {
		sum += d
	}
	l := Latency{Samples: len(ds), Mean: Dur(sum / time.Duration(len(ds))), P50: q(0.5), P90: q(0.9), P99: q(0.99), Max: Dur(ds[len(ds)-1])}
	for i := 1; i <= cdfPoints; i++ {
		f := float64(i) / cdfPoints
		l.CDF = append(l.CDF, CDFPoint{Latency: Dur(ds[max(int(f*float64(len(ds)))-1, 0)]), Fraction: f})
	}
	return l
}

// writeJSON writes the result as indented JSON.
func writeJSON(w io.Writer, res *Result) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// writeTable writes the result as a table.
func writeTable(w io.Writer, res *Result) error {
	sc := res.Scenario
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	perCohort := 0
	if res.Cohorts > 0 {
		perCohort = (res.Build.Nodes - res.Cohorts*(1+sc.Publishers)) / res.Cohorts
	}
	row("scenario", "%d nodes: %d cohorts × (1 broker, %d publisher, ~%d subscribers); %.3g updates/s × %s per cohort, %d B payload",
		res.Build.Nodes, res.Cohorts, sc.Publishers, perCohort, sc.Rate, sc.Duration, sc.Payload)
	row("links", "latency %s, bandwidth %s, uplink %s, loss %.3g; churn %.3g/s (down %s), brokers killed %d; seed %d",
		sc.Latency, rate(sc.Bandwidth), rate(sc.Uplink), sc.Loss, sc.Churn, sc.Downtime, res.BrokersKilled, sc.Seed)
	row("build", "%s for %d nodes; heap %s/node", res.Build.Time, res.Build.Nodes, bytesOf(res.Build.HeapPerNode))
	row("join", "%s for %d member streams (%d of %d subscribers joined); %s heap + %s stack/stream, %.1f goroutines/stream",
		res.Build.JoinTime, res.Build.Streams, res.Build.Subscribed, res.Build.Nodes-res.Cohorts*(1+sc.Publishers),
		bytesOf(res.Build.HeapPerStream), bytesOf(res.Build.StackPerStream), res.Build.GoroutinesPerStream)
	row("memory", "%.0f MiB from the OS at the end, peak RSS %s", res.Build.SysMiB, mib(res.PeakRSSMiB))
	row("publications", "%d sent, %d accepted, %d skipped (no publisher stream)", res.Sent, res.Published, res.Skipped)
	row("delivery ratio", "%.4f of %d while attached; %.4f of every (update, subscriber)", res.DeliveryRatio, res.Expected, res.DeliveryRatioAll)
	if res.InFlight > 0 {
		row("in flight", "%d accepted within %s of their subscriber detaching (a crash): %d delivered, the rest lost with it",
			res.InFlight, res.InFlightWindow, res.InFlightDelivered)
	}
	row("latency", "p50 %s  p90 %s  p99 %s  max %s  (mean %s, %d samples)",
		res.Latency.P50, res.Latency.P90, res.Latency.P99, res.Latency.Max, res.Latency.Mean, res.Latency.Samples)
	row("duplicates", "%.3f per node", res.DuplicatesPerNode)
	row("bytes", "%.0f B/delivery on the wire, %.0f B/delivery written by brokers", res.WireBytesPerDelivery, res.BrokerBytesPerDelivery)
	row("cpu", "%s over %s (%.0f%% of %d cores), %s/delivery; machine load average %s",
		res.CPU, res.RunTime, 100*res.CPUUse, res.Cores, res.CPUPerDelivery, loadString(res.Load))
	row("depth", "deliveries by the subscriber's depth: %s", mapString(res.Depth))
	tr := res.Tree
	row("tree", "nodes by depth: %s; relays %d (max fan-out %d); parents: %s; %d detached; %d whose parent moved since they attached",
		intMapString(tr.NodesByDepth), tr.Relays, tr.MaxFanout, intMapString(tr.Parents), tr.Detached, tr.Skewed)
	if tr.FloorDeepest > 0 {
		row("vs floor", "latency ÷ ((publisher + subscriber depth) × link latency): p50 %.2f, p99 %.2f; floor at the deepest subscriber %s",
			tr.FloorRatioP50, tr.FloorRatioP99, tr.FloorDeepest)
	}
	for _, l := range tr.LatencyByDepth {
		row(fmt.Sprintf("  depth %d", l.Depth), "p50 %s, p99 %s over %d deliveries; floor %s, with this process's CPU %s (p99 ÷ that %.2f)",
			l.P50, l.P99, l.Samples, l.Floor, l.CPUFloor, float64(l.P99)/float64(max(l.CPUFloor, 1)))
	}
	if tr.SOCSize > 0 {
		row("wire ÷ SOC", "%.2f (a %d B SOC per update)", tr.WireRatio, tr.SOCSize)
	}
	row("join time", "p50 %s, p99 %s%s; answers to the first OK (as the %s saw them): %s (median %d)",
		tr.JoinTimeP50, tr.JoinTimeP99, rtts(tr.JoinTimeP50, sc.Latency), tr.JoinSide, intMapString(tr.JoinRoundTrips), tr.JoinRoundTripsP50)
	if tr.RelaysSeen > 0 || sc.FailRelays > 0 {
		row("relays failed", "%d of %d", tr.RelaysFailed, tr.RelaysSeen)
	}
	row("kept a parent", "%d subscribers: %d updates lost (%d nodes lost any, at most %d at one); %d rejoined or faulted at some point: %d lost; %d never joined",
		tr.KeptParent, tr.LostKept, tr.NodesLosing, tr.MaxLostKept, tr.Rejoined, tr.LostRejoined, tr.NeverJoined)
	if pr := res.Pricing; pr != nil {
		row("prices", "%d per delivery, %d per publication hop (bee accounting units): %d charged, %d owed in all%s",
			pr.Prices.Delivery, pr.Prices.Publish, pr.Debited, pr.Credit, agree(pr.Debited, pr.Credit))
		for _, b := range pr.ByDepth {
			row(fmt.Sprintf("  depth %d", b.Depth), "%d nodes: earned %.0f, paid %.0f per node; net p50 %d (min %d, max %d)",
				b.Nodes, b.Earned, b.Paid, b.NetP50, b.NetMin, b.NetMax)
		}
	}
	if ps := res.Persistence; ps != nil {
		row("persistence", "%d updates stored, %d bytes; %d chunks retrieved for recovery: %d updates recovered, %d not",
			ps.Uploads, ps.BytesStored, ps.Retrievals, ps.Recovered, ps.Unrecovered)
	}
	if ar := res.Attack; ar != nil {
		writeAttack(row, ar)
	}
	writeVirtual(row, res)
	row("joins", "%s", mapString(res.Joins))
	row("clients", "%s", mapString(res.Clients))
	row("counters", "%s", mapString(res.Counters))
	if res.Churned > 0 {
		row("churn", "%d subscriber restarts", res.Churned)
	}
	if res.CPUUse > 0.75 && !sc.Virtual { // in virtual time the host's CPU takes no time
		row("warning", "the CPU was saturated: latencies include queueing for it (lower -rate)")
	}
	if res.Load > float64(res.Cores) && !sc.Virtual {
		row("warning", "the machine was busy with other work (load %.1f on %d cores): latencies include waiting for it", res.Load, res.Cores)
	}
	if res.Hung != "" {
		row("warning", "the network did not shut down within %s (a deadlock in the code under test?): goroutines in %s", shutdownWait, res.Hung)
	}
	if !res.Drained {
		row("warning", "deliveries still arriving at the drain deadline (%s)", sc.Drain)
	}
	return tw.Flush()
}

func loadString(l float64) string {
	if l < 0 {
		return "unknown"
	}
	return strconv.FormatFloat(l, 'f', 2, 64)
}

func rate(bps int64) string {
	if bps == 0 {
		return "∞"
	}
	return bytesOf(float64(bps)) + "/s"
}

func bytesOf(b float64) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", b/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.1f KiB", b/(1<<10))
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}

// mapString prints a map as "k v, k v" in key order.
func mapString[K int | string](m map[K]uint64) string {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%v %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}

func mib(v float64) string {
	if v < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.0f MiB", v)
}

// rtts says d in link round trips.
func rtts(d, link Dur) string {
	if link <= 0 {
		return ""
	}
	return fmt.Sprintf(" (p50 %.1f link round trips)", float64(d)/float64(2*link))
}

func intMapString(m map[int]int) string {
	u := make(map[int]uint64, len(m))
	for k, v := range m {
		u[k] = uint64(v)
	}
	return mapString(u)
}

func agree(a, b uint64) string {
	if a == b {
		return " (both ends agree)"
	}
	return fmt.Sprintf(" (the ends differ by %d: streams that ended took their tallies with them)", int64(a)-int64(b))
}
