// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/internal/delay"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"github.com/ethersphere/bps/pkg/bps/streamtest/bpsnet"
)

// Scenario is what bps-sim runs: a network of nodes laid out in SWIP-74
// cohorts, each on its own broker, publishers publishing at a rate, links
// with latency, bandwidth and loss, and churn.
type Scenario struct {
	Nodes      int     `json:"nodes"`
	Fanout     int     `json:"fanout"`     // subscribers per cohort, at most
	Cohorts    int     `json:"cohorts"`    // 0: as few as Fanout allows
	Publishers int     `json:"publishers"` // nodes publishing as the admin, per cohort
	Rate       float64 `json:"rate"`       // updates per second per cohort
	Duration   Dur     `json:"duration"`   // of publishing
	Payload    int     `json:"payload"`    // bytes per update

	Latency   Dur     `json:"latency"`   // one way, every link
	Bandwidth int64   `json:"bandwidth"` // bytes per second per link direction, 0 unlimited
	Uplink    int64   `json:"uplink"`    // bytes per second per node, 0 unlimited
	Loss      float64 `json:"loss"`      // per write, shown as a retransmission delay

	Churn       float64 `json:"churn"`        // subscriber node restarts per second, network-wide
	Downtime    Dur     `json:"downtime"`     // of a churned or killed node
	KillBrokers float64 `json:"kill_brokers"` // fraction of brokers killed halfway, restarted after Downtime

	// Multihop (SWIP-61): how many children a subscriber accepts as a relay
	// (0: none, every subscriber joins the broker), how many parents it
	// keeps, and the fraction of relays killed halfway through (they stay
	// down).
	RelayCapacity  int     `json:"relay_capacity"`
	BrokerCapacity int     `json:"broker_capacity"` // the broker's subscriber streams per cohort (0: bps's default, 64)
	ProbeWait      Dur     `json:"probe_wait"`      // how long a node at capacity waits for its subtree's candidates (0: bps's default)
	Parents        int     `json:"parents"`
	Heartbeat      Dur     `json:"heartbeat"`    // the root's heartbeat period (0: the node's default, 2 s; negative: none)
	LazyParents    bool    `json:"lazy_parents"` // the second parent announces and sends when asked (not bps.Options.NoLazyPush; the node's default: true; false: both parents send every delivery whole)
	FailRelays     float64 `json:"fail_relays"`
	DeliveryPrice  uint64  `json:"delivery_price"` // bee accounting units a child owes its parent per frame delivered (0 with PublishPrice 0: free)
	PublishPrice   uint64  `json:"publish_price"`  // units per publication per hop up
	Persist        bool    `json:"persist"`        // publishers store every update; subscribers recover gaps from storage (SWIP-65)
	JoinRate       float64 `json:"join_rate"`      // subscribers starting per second; 0: all at once
	JoinWait       Dur     `json:"join_wait"`      // with relays, how long to wait for every subscriber to have a parent

	BackoffMin Dur `json:"backoff_min"`
	BackoffMax Dur `json:"backoff_max"`
	QueueLen   int `json:"queue_len"`

	Seed  int64 `json:"seed"`
	Drain Dur   `json:"drain"` // at most, for deliveries in flight after publishing ends

	// Attackers (attack.go): a fraction of the subscribers follow the
	// protocol except for one attack.
	Byzantine   float64 `json:"byzantine,omitempty"`
	Attack      string  `json:"attack,omitempty"`
	AttackK     int     `json:"attack_k,omitempty"`     // withhold: every k-th message
	AttackDelay Dur     `json:"attack_delay,omitempty"` // delay: how long
	AttackFlood int     `json:"attack_flood,omitempty"` // floods: frames or streams per burst

	// The probe rations (bps.Bounds.PeerProbeRounds, PrefixProbeRounds):
	// 0 takes the node's default; -1 turns them off (as before they were).
	PeerProbeRounds   int `json:"peer_probe_rounds,omitempty"`
	PrefixProbeRounds int `json:"prefix_probe_rounds,omitempty"`

	VirtualTime // virtual.go
}

// DefaultScenario: cohorts filled to SWIP-74's fan-out bound, an update every
// 5 seconds per cohort for 30 seconds, 1 KiB payloads, 25 ms links. Every
// delivery costs its subscriber a signature recovery (about 0.2 ms of CPU),
// so at 10,000 nodes this rate keeps two cores under half busy and the
// latencies are the network's, not the CPU's queue; -rate 1 saturates them.
//
// Every node runs a full bee-bps node's defaults (bps.NodeOptions, the one
// source bee-bps's flags read too): it relays bps.DefaultRelayCapacity
// children per cohort, keeps two parents, admits the broker's and the
// queue's default bounds, and charges bps.DefaultPrices. A flag changes
// each.
func DefaultScenario() Scenario {
	d, p := bps.NodeOptions(), bps.DefaultPrices()
	parents := 2
	if d.SingleParent {
		parents = 1
	}
	return Scenario{
		Nodes:          1000,
		Fanout:         d.MaxStreamsPerCohort,
		Publishers:     1,
		Rate:           0.2,
		Duration:       Dur(30 * time.Second),
		Payload:        1024,
		Latency:        Dur(25 * time.Millisecond),
		Downtime:       Dur(2 * time.Second),
		RelayCapacity:  d.RelayCapacity,
		BrokerCapacity: d.MaxStreamsPerCohort,
		ProbeWait:      Dur(d.ProbeWait),
		Parents:        parents,
		LazyParents:    !d.NoLazyPush,
		DeliveryPrice:  p.Delivery,
		PublishPrice:   p.Publish,
		JoinWait:       Dur(2 * time.Minute),
		BackoffMin:     Dur(d.BackoffMin),
		BackoffMax:     Dur(d.BackoffMax),
		QueueLen:       d.QueueLen,
		Seed:           1,
		Drain:          Dur(10 * time.Second),
		AttackK:        2,
		AttackDelay:    Dur(2 * time.Second),
		AttackFlood:    16,
		VirtualTime:    defaultVirtualTime(),
	}
}

// serviceOptions are the options of every node of the scenario; bps fills
// in what the scenario leaves zero.
func (sc Scenario) serviceOptions() bps.Options {
	o := bps.Options{
		Bounds: bps.Bounds{
			QueueLen:            sc.QueueLen,
			MaxStreamsPerCohort: sc.BrokerCapacity,
		},
		Timing: bps.Timing{
			BackoffMin: time.Duration(sc.BackoffMin),
			BackoffMax: time.Duration(sc.BackoffMax),
		},
	}
	applyRelays(&o, sc)
	o.PeerProbeRounds, o.PrefixProbeRounds = probeRounds(sc.PeerProbeRounds), probeRounds(sc.PrefixProbeRounds)
	return o
}

// probeRounds is a probe ration's bound for bps.Bounds: n (0: the node's
// default), or none for a negative n — a bucket no hunt empties.
func probeRounds(n int) int {
	if n < 0 {
		return 1 << 30
	}
	return n
}

func (sc Scenario) validate() error {
	switch {
	case sc.Nodes < 3:
		return errors.New("need at least 3 nodes")
	case sc.Fanout < 1 && sc.Cohorts == 0:
		return errors.New("fanout must be at least 1")
	case sc.Publishers < 1:
		return errors.New("need at least one publisher per cohort")
	case sc.Rate <= 0:
		return errors.New("rate must be positive")
	case sc.Payload < stampSize || sc.Payload > 4096:
		return fmt.Errorf("payload must be %d to 4096 bytes", stampSize)
	case sc.Loss < 0 || sc.Loss > 1:
		return errors.New("loss must be in [0, 1]")
	case sc.KillBrokers < 0 || sc.KillBrokers > 1:
		return errors.New("kill-brokers must be in [0, 1]")
	case sc.Churn < 0:
		return errors.New("churn must not be negative")
	case sc.RelayCapacity < 0 || sc.BrokerCapacity < 0 || sc.ProbeWait < 0:
		return errors.New("relay-capacity, broker-capacity and probe-wait must not be negative")
	case sc.Parents < 1 || sc.Parents > 2:
		return errors.New("parents must be 1 or 2")
	case sc.FailRelays < 0 || sc.FailRelays > 1:
		return errors.New("fail-relays must be in [0, 1]")
	case sc.JoinRate < 0:
		return errors.New("join-rate must not be negative")
	case sc.Byzantine < 0 || sc.Byzantine >= 1:
		return errors.New("byzantine must be in [0, 1)")
	case sc.Byzantine > 0 && !knownAttack(sc.Attack):
		return fmt.Errorf("unknown attack %q (bps-sim -h lists them)", sc.Attack)
	}
	return nil
}

// layout places the scenario's nodes in cohorts.
func (sc Scenario) layout() (bpsnet.CohortLayout, error) {
	if sc.Cohorts == 0 {
		return bpsnet.LayoutFor(sc.Nodes, sc.Fanout, sc.Publishers), nil
	}
	subs := sc.Nodes - sc.Cohorts*(1+sc.Publishers)
	if subs < sc.Cohorts {
		return bpsnet.CohortLayout{}, fmt.Errorf("%d nodes cannot hold %d cohorts with a subscriber each", sc.Nodes, sc.Cohorts)
	}
	return bpsnet.CohortLayout{Cohorts: sc.Cohorts, Publishers: sc.Publishers, Subscribers: subs / sc.Cohorts, Spare: subs % sc.Cohorts}, nil
}

// stampSize is the publication time carried at the start of every payload,
// which is how a subscriber measures latency.
const stampSize = 8

// slot is one subscriber position: the node in it (a new one after each
// churn restart), its follower, and what it saw. Its fields are written by
// its follower's goroutine, one incarnation at a time, and by the churn
// loop between incarnations; mu makes that safe.
type slot struct {
	cohort int

	mu        sync.Mutex
	node      *bpsnet.Node
	follower  *bpsnet.Follower
	down      bool
	failed    bool              // killed as a relay (-fail-relays); stays down
	sub       *bps.Subscription // the current subscription
	followed  time.Time         // when its first follower started
	joinTime  time.Duration     // from then to its first subscription
	intervals []interval        // attached
	seen      bitset            // indices received
	hi        uint64            // the highest index received (hasHi)
	hasHi     bool
	recovered uint64 // indices recovered from storage (-persist)
	attacker  bool   // -byzantine: this slot's node attacks
	received  uint64
	dups      uint64
	latencies []time.Duration
}

type interval struct{ from, to time.Time } // to zero: still attached

func (s *slot) joined(sub *bps.Subscription) {
	now := time.Now()
	s.mu.Lock()
	if len(s.intervals) == 0 {
		s.joinTime = now.Sub(s.followed)
	}
	s.sub = sub
	s.intervals = append(s.intervals, interval{from: now})
	s.mu.Unlock()
}

func (s *slot) ended() {
	s.mu.Lock()
	if k := len(s.intervals); k > 0 && s.intervals[k-1].to.IsZero() {
		s.intervals[k-1].to = time.Now()
	}
	s.mu.Unlock()
}

func (s *slot) deliver(d bps.Delivery) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.received++
	if s.seen.test(d.Index) {
		s.dups++
		return
	}
	s.seen.set(d.Index)
	if d.Service == nil && (!s.hasHi || d.Index > s.hi) {
		s.hi, s.hasHi = d.Index, true
	}
	if p := d.Payload(); len(p) >= stampSize {
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(p)))
		s.latencies = append(s.latencies, now.Sub(sent))
	}
}

// cohortState is what the simulation tracks of a cohort.
type cohortState struct {
	c        bpsnet.Cohort
	mu       sync.Mutex
	broker   *bpsnet.Node   // current incarnation
	brokers  []*bpsnet.Node // every incarnation, for traffic totals
	accepted map[uint64]time.Time
	slots    []*slot
}

func (cs *cohortState) currentBroker() *bpsnet.Node {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.broker
}

// sim is one run.
type sim struct {
	sc      Scenario
	net     *bpsnet.Network
	cohorts []*cohortState
	byKey   map[string]*cohortState // by Spec.String()
	slots   []*slot
	counts  *counts
	adv     *adversary   // -byzantine: the attackers, nil without
	metrics *bps.Metrics // the collectors every node shares

	ctx    context.Context // ends the run
	cancel context.CancelFunc
	wg     sync.WaitGroup // publisher, churn and restart goroutines

	mu        sync.Mutex // guards the fields below
	rng       *rand.Rand
	skipped   uint64 // publications not sent: no publisher stream
	sent      uint64
	churned   uint64
	killed    uint64
	socSize   int // bytes of the SOC an update is (id, signature, span, payload)
	ledgers   ledgers
	store     *simStorage   // -persist: the run's storage
	persisted persistCounts // what subscribers recovered

	failMu                   sync.Mutex            // guards the fields below
	failed                   map[int][]failedRelay // by cohort: relays killed by -fail-relays
	failedAt                 time.Time
	relaysSeen, relaysFailed int
	joinRTs                  map[string]*joinTrace // by joiner overlay: the answers to its first joins, as brokers saw them
	parentRTs                map[string]*joinTrace // by subscriber overlay: its first attempts to attach, as it saw them
}

// Run runs the scenario and returns its result.
func Run(ctx context.Context, sc Scenario) (*Result, error) {
	if err := sc.validate(); err != nil {
		return nil, err
	}
	layout, err := sc.layout()
	if err != nil {
		return nil, err
	}
	s := &sim{sc: sc, counts: newCounts(), byKey: make(map[string]*cohortState), rng: rand.New(rand.NewPCG(uint64(sc.Seed), 0x5157)),
		failed: make(map[int][]failedRelay), joinRTs: make(map[string]*joinTrace), parentRTs: make(map[string]*joinTrace)}
	if sc.Persist {
		s.store = newSimStorage()
	}
	svcOpts := sc.serviceOptions()
	// One set of Prometheus collectors for every node: nothing here reads
	// them, and a set of its own would cost each node about 9 KB.
	svcOpts.Metrics = bps.NewMetrics()
	s.metrics = svcOpts.Metrics
	res := &Result{Scenario: sc, Cohorts: layout.Cohorts}

	// Build.
	m0 := memNow()
	start := time.Now()
	s.net = bpsnet.New(bpsnet.Options{
		Seed:      sc.Seed,
		Service:   svcOpts,
		Transport: sc.transport(),
		Tracer:    s.trace,
	})
	closed := false
	defer func() {
		if !closed {
			_ = s.net.Close()
		}
		if s.adv != nil {
			s.adv.stop()
			s.adv.wg.Wait() // the network is closed: no stream write blocks
		}
	}()
	cs, err := s.newCohorts(layout, svcOpts)
	if err != nil {
		return nil, err
	}
	for i, c := range cs {
		st := &cohortState{c: c, broker: c.Broker, brokers: []*bpsnet.Node{c.Broker}, accepted: make(map[uint64]time.Time)}
		for _, nd := range c.Subscribers {
			sl := &slot{cohort: i, node: nd}
			st.slots = append(st.slots, sl)
			s.slots = append(s.slots, sl)
		}
		s.cohorts = append(s.cohorts, st)
		s.byKey[c.Spec.String()] = st
	}
	if sc.Uplink > 0 {
		for _, nd := range s.net.Nodes() {
			nd.SetUplink(sc.Uplink)
		}
	}
	if sc.Byzantine > 0 {
		s.adv = newAdversary(ctx, s)
	}
	res.Build.Nodes = layout.Nodes()
	res.Build.Time = Dur(time.Since(start))
	m1 := memNow()
	res.Build.HeapPerNode = perUnit(m1.HeapAlloc, m0.HeapAlloc, res.Build.Nodes)
	g1 := runtime.NumGoroutine()

	// Join: every subscriber follows its cohort, every publisher claims.
	// Subscribers arrive at JoinRate per second, or all at once.
	start = time.Now()
	var pace time.Duration
	if sc.JoinRate > 0 {
		pace = time.Duration(float64(time.Second) / sc.JoinRate)
	}
	for k, sl := range s.slots {
		if pace > 0 && k > 0 {
			t := time.NewTimer(delay.Positive(time.Until(start.Add(time.Duration(k) * pace))))
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			}
		}
		if err := s.follow(sl); err != nil {
			return nil, err
		}
	}
	if sc.RelayCapacity > 0 {
		// Through the tree: wait, at most JoinWait, until every subscriber
		// has a parent; a Subscribe met with a bare FULL is retried after
		// the backoff.
		wctx, cancel := context.WithTimeout(ctx, time.Duration(sc.JoinWait))
		for _, sl := range s.slots {
			if err := sl.follower.WaitJoins(wctx, 1); err != nil && ctx.Err() != nil {
				cancel()
				return nil, err
			}
		}
		cancel()
	} else {
		// Wait for every subscriber's first answer: OK, or FULL where the
		// layout puts more subscribers in a cohort than its broker admits.
		for _, sl := range s.slots {
			if err := sl.follower.WaitAttempts(ctx, 1); err != nil {
				return nil, err
			}
		}
	}
	for _, sl := range s.slots {
		if sl.follower.Joins() > 0 {
			res.Build.Subscribed++
		}
	}
	s.ctx, s.cancel = context.WithCancel(ctx)
	defer s.cancel()
	pubs := make([]*publisher, len(s.cohorts))
	var claims sync.WaitGroup
	for i, st := range s.cohorts {
		pubs[i] = &publisher{sim: s, cs: st, streams: make([]*bps.Publisher, len(st.c.Publishers)), nodes: st.c.Publishers, done: make(chan struct{})}
		claims.Add(1)
		go func() {
			defer claims.Done()
			pubs[i].ensure()
		}()
	}
	claims.Wait()
	res.Build.JoinTime = Dur(time.Since(start))
	m2 := memNow()
	streams := res.Build.Subscribed + len(s.cohorts)*sc.Publishers
	res.Build.Streams = streams
	res.Build.HeapPerStream = perUnit(m2.HeapAlloc, m1.HeapAlloc, streams)
	res.Build.StackPerStream = perUnit(m2.StackInuse, m1.StackInuse, streams)
	res.Build.GoroutinesPerStream = float64(runtime.NumGoroutine()-g1) / float64(max(streams, 1))

	// Run.
	cpu0 := cpuTime()
	wire0 := s.net.Transport().Stats()
	start = time.Now()
	period := time.Duration(float64(time.Second) / sc.Rate)
	for _, p := range pubs {
		phase := time.Duration(s.randInt64(int64(period)))
		s.wg.Add(1)
		go p.run(time.Duration(sc.Duration), period, phase)
	}
	if sc.Churn > 0 {
		s.wg.Add(1)
		go s.churn(time.Duration(sc.Duration))
	}
	if sc.KillBrokers > 0 {
		s.wg.Add(1)
		go s.killBrokers(time.Duration(sc.Duration) / 2)
	}
	if sc.FailRelays > 0 {
		s.wg.Add(1)
		go s.failRelays(time.Duration(sc.Duration) / 2)
	}
	if s.adv != nil {
		s.wg.Add(1)
		go s.adv.sampler()
	}
	s.waitPublishers(pubs)
	res.Drained = s.drain(ctx, time.Duration(sc.Drain))
	res.RunTime = Dur(time.Since(start))
	s.cancel()
	s.wg.Wait()
	res.CPU = Dur(cpuTime() - cpu0)
	res.Cores = runtime.GOMAXPROCS(0)
	res.CPUUse = float64(res.CPU) / (float64(res.RunTime) * float64(res.Cores))
	res.Load = loadAverage()
	wire := s.net.Transport().Stats()
	m3 := memNow()
	if err := sc.writeMemProfile(); err != nil {
		return nil, err
	}
	res.Build.SysMiB = float64(m3.Sys) / (1 << 20)
	end := time.Now()
	s.snapshot(res) // the tree as the run left it, before anything stops
	if s.adv != nil {
		s.adv.sample()
		s.adv.stop()
	}
	s.collectPrices(res)
	s.collectPersistence(res)

	// Stop everything before reading what the slots saw, all at once: a
	// relay that closes gracefully first moves its children (SWIP-61's
	// make-before-break, bounded by a wait), which one after another
	// would add up.
	var closing sync.WaitGroup
	for _, sl := range s.slots {
		sl.mu.Lock()
		f := sl.follower
		sl.mu.Unlock()
		if f != nil {
			closing.Add(1)
			go func() {
				defer closing.Done()
				f.Close()
			}()
		}
	}
	hung := !waitFor(closing.Wait, shutdownWait)
	for _, p := range pubs {
		p.close()
	}
	s.collect(res, wire.Bytes-wire0.Bytes, end)
	s.collectTree(res, wire.Bytes-wire0.Bytes, end)
	if s.adv != nil {
		s.adv.collect(res, end)
	}
	s.collectVirtual(res)
	res.PeakRSSMiB = peakRSS()
	if res.PeakRSSMiB > 0 {
		res.PeakRSSMiB /= 1 << 20
	}
	// The network is closed here, not deferred, and bounded: a shutdown
	// that hangs (a deadlock in the code under test) is reported with the
	// goroutines' stacks, and the run's numbers are not lost with it.
	closed = true
	if hung || !waitFor(func() { _ = s.net.Close() }, shutdownWait) {
		res.Hung = dumpGoroutines()
	}
	return res, nil
}

// shutdownWait bounds closing the followers and then the network.
const shutdownWait = time.Minute

// waitFor runs f and waits for it at most d; false if it did not return
// (it is left running).
func waitFor(f func(), d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// dumpGoroutines writes every goroutine's stack to a temporary file and
// returns its path.
func dumpGoroutines() string {
	f, err := os.CreateTemp("", "bps-sim-hang-*.txt")
	if err != nil {
		return "(stacks not written: " + err.Error() + ")"
	}
	_ = pprof.Lookup("goroutine").WriteTo(f, 2)
	_ = f.Close()
	return f.Name()
}

// follow starts the follower of sl's current node.
func (s *sim) follow(sl *slot) error {
	st := s.cohorts[sl.cohort]
	sl.mu.Lock()
	nd := sl.node
	if sl.followed.IsZero() {
		sl.followed = time.Now()
	}
	sl.mu.Unlock()
	f, err := nd.Follow(st.c.Broker.Overlay(), st.c.Spec, bpsnet.FollowOptions{
		OnJoin:    func(sub *bps.Subscription) { sl.joined(sub); s.counts.add("subscribe OK") },
		OnDeliver: func(d bps.Delivery) { s.deliverTo(sl, d) },
		OnEnd: func(err error) {
			sl.ended()
			if err != nil {
				s.counts.add("subscription reset")
			}
		},
		OnError: func(err error) { s.counts.add("subscribe " + errClass(err)) },
	})
	if err != nil {
		return err
	}
	sl.mu.Lock()
	sl.follower = f
	sl.mu.Unlock()
	return nil
}

// errClass names a Subscribe failure for the table.
func errClass(err error) string {
	switch {
	case errors.Is(err, bps.ErrFull):
		return "FULL"
	case errors.Is(err, bps.ErrRejected):
		return "REJECTED"
	case errors.Is(err, p2p.ErrPeerNotFound):
		return "unreachable"
	default:
		return "failed"
	}
}

// trace collects broker events from every node.
func (s *sim) trace(nd *bpsnet.Node, e bps.Event) {
	s.adv.trace(nd, e)
	switch e.Kind {
	case bps.EventJoin:
		s.counts.add("join " + e.Status)
		s.traceJoin(e)
	case bps.EventAccept:
		if st := s.byKey[e.Cohort]; st != nil {
			st.mu.Lock()
			if _, ok := st.accepted[e.Index]; !ok {
				st.accepted[e.Index] = time.Now()
			}
			st.mu.Unlock()
		}
	case bps.EventDrop:
		s.counts.add(e.Counter.String())
	case bps.EventQueueReset:
		// counted as the queue_reset drop
	case bps.EventViolation:
		s.counts.add("violation")
	case bps.EventReclaim:
		s.counts.add("reclaim")
	case bps.EventClientDrop:
		s.counts.add("client_drop")
	default:
		// SWIP-61's events, by name, so that this file builds with and
		// without them: a subscriber's join outcome at each parent it
		// tried, and what the tree did (parent_lost, probe, reparent,
		// withheld, fault, forward).
		switch k := e.Kind.String(); k {
		case "parent":
			s.traceParent(nd, e)
		case "deliver", "leave", "claim", "end", "unknown":
		default:
			s.counts.add(k)
		}
	}
}

func (s *sim) randInt64(n int64) int64 {
	if n <= 0 {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rng.Int64N(n)
}

// publisher publishes a cohort's updates, from each of its publisher nodes,
// re-claiming a stream that ended.
type publisher struct {
	sim     *sim
	cs      *cohortState
	nodes   []*bpsnet.Node
	streams []*bps.Publisher
	next    uint64
	done    chan struct{}
}

// ensure (re)opens the publisher streams that are not up; a Publish waits
// out the backoff, at most a second here so the schedule goes on.
func (p *publisher) ensure() {
	for i, ps := range p.streams {
		if ps != nil {
			select {
			case <-ps.Done():
			default:
				continue
			}
		}
		ctx, cancel := context.WithTimeout(p.sim.ctx, time.Second)
		stream, err := p.nodes[i].Publish(ctx, p.cs.currentBroker(), p.cs.c.Spec, p.cs.c.Admin, p.next)
		cancel()
		if err != nil {
			p.sim.counts.add("publish " + errClass(err))
			p.streams[i] = nil
			continue
		}
		p.sim.counts.add("publish OK") // a stream that sent its claiming AUTH
		p.streams[i] = stream
	}
}

func (p *publisher) run(duration, period, phase time.Duration) {
	defer p.sim.wg.Done()
	defer close(p.done)
	end := time.Now().Add(duration)
	t := time.NewTimer(delay.Positive(phase))
	defer t.Stop()
	payload := make([]byte, p.sim.sc.Payload)
	for {
		select {
		case <-t.C:
		case <-p.sim.ctx.Done():
			return
		}
		if time.Now().After(end) {
			return
		}
		t.Reset(period)
		p.ensure()
		binary.BigEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
		// Each stream has its own challenge (SWIP-74 Rev 8): the update
		// is signed under each stream's session feed.
		sent, failed := false, false
		for _, ps := range p.streams {
			if ps == nil {
				continue
			}
			msg, err := p.cs.c.Admin.Update(p.cs.c.Spec, ps.Challenge(), p.next, payload)
			if err != nil {
				failed = true
				continue
			}
			p.sim.mu.Lock()
			p.sim.socSize = len(msg.GetSoc())
			p.sim.mu.Unlock()
			if ps.Send(p.sim.ctx, msg) == nil {
				sent = true
			}
		}
		if failed {
			p.sim.counts.add("publish failed")
		}
		if sent && p.sim.store != nil {
			// SWIP-65 on Rev 8: the update for storage is the same payload
			// under the channel's own id, signed by the publisher.
			stored, _, err := bps.StorageUpdate(p.cs.c.Admin.Signer, p.cs.c.Admin.Addr, p.cs.c.Spec.Topic, p.next, payload)
			if err == nil {
				err = p.sim.store.upload(p.sim.ctx, p.cs.c.Spec, p.cs.c.Admin.Addr, p.next, stored)
			}
			if err != nil {
				p.sim.counts.add("upload failed")
			}
		}
		p.sim.mu.Lock()
		if sent {
			p.sim.sent++
			p.next++
		} else {
			p.sim.skipped++
		}
		p.sim.mu.Unlock()
	}
}

func (p *publisher) close() {
	for _, ps := range p.streams {
		if ps != nil {
			_ = ps.Close()
		}
	}
}

func (s *sim) waitPublishers(pubs []*publisher) {
	for _, p := range pubs {
		select {
		case <-p.done:
		case <-s.ctx.Done():
			return
		}
	}
}

// quiet is how long after its acceptance an update may still be on its way:
// a few latencies and a retransmission.
func (sc Scenario) quiet() time.Duration {
	q := max(4*time.Duration(sc.Latency)+streamtest.DefaultRetransmitDelay, 250*time.Millisecond)
	if sc.Byzantine > 0 && sc.Attack == "delay" {
		q += 3 * time.Duration(sc.AttackDelay) // held by an attacker, or two on the way
	}
	return q
}

// drain waits, at most d, until no delivery has arrived for a while: long
// enough for anything still in flight.
func (s *sim) drain(ctx context.Context, d time.Duration) bool {
	quiet := s.sc.quiet()
	deadline := time.Now().Add(d)
	last, lastChange := s.received(), time.Now()
	tick := time.NewTicker(quiet / 5)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return false
		}
		now := time.Now()
		if r := s.received(); r != last {
			last, lastChange = r, now
		}
		if now.Sub(lastChange) >= quiet {
			return true
		}
		if now.After(deadline) {
			return false
		}
	}
}

func (s *sim) received() uint64 {
	var r uint64
	for _, sl := range s.slots {
		sl.mu.Lock()
		r += sl.received
		sl.mu.Unlock()
	}
	return r
}

// churn restarts random subscriber nodes, Poisson at sc.Churn per second:
// each is killed, stays down for sc.Downtime, comes back with its overlay
// and follows its cohort again.
func (s *sim) churn(duration time.Duration) {
	defer s.wg.Done()
	end := time.Now().Add(duration)
	for {
		s.mu.Lock()
		wait := time.Duration(s.rng.ExpFloat64() / s.sc.Churn * float64(time.Second))
		sl := s.slots[s.rng.IntN(len(s.slots))]
		s.mu.Unlock()
		if !s.sleep(wait) || time.Now().After(end) {
			return
		}
		sl.mu.Lock()
		if sl.down {
			sl.mu.Unlock()
			continue
		}
		sl.down = true
		nd := sl.node
		sl.follower = nil
		sl.mu.Unlock()
		sl.ended()         // detached now, not when its follower notices
		_ = s.net.Kill(nd) // its follower stops with it
		s.mu.Lock()
		s.churned++
		s.mu.Unlock()

		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if !s.sleep(time.Duration(s.sc.Downtime)) {
				return
			}
			fresh, err := s.net.RestartWith(nd, s.price) // priced before any peer reaches it
			if err != nil {
				s.counts.add("restart failed")
				return
			}
			s.adv.rearm(nd, fresh)
			sl.mu.Lock()
			sl.node, sl.down = fresh, false
			sl.mu.Unlock()
			if err := s.follow(sl); err != nil {
				s.counts.add("restart failed")
			}
		}()
	}
}

// killBrokers kills a fraction of the brokers after d and restarts them
// after sc.Downtime; their subscribers rejoin by themselves.
func (s *sim) killBrokers(d time.Duration) {
	defer s.wg.Done()
	if !s.sleep(d) {
		return
	}
	k := max(int(s.sc.KillBrokers*float64(len(s.cohorts))), 1)
	s.mu.Lock()
	victims := s.rng.Perm(len(s.cohorts))[:k]
	s.killed += uint64(k)
	s.mu.Unlock()
	for _, i := range victims {
		for _, sl := range s.cohorts[i].slots {
			sl.ended()
		}
		_ = s.net.Kill(s.cohorts[i].currentBroker())
	}
	if !s.sleep(time.Duration(s.sc.Downtime)) {
		return
	}
	for _, i := range victims {
		st := s.cohorts[i]
		fresh, err := s.net.RestartWith(st.currentBroker(), s.price) // priced before any peer reaches it
		if err != nil {
			s.counts.add("restart failed")
			continue
		}
		st.mu.Lock()
		st.broker = fresh
		st.brokers = append(st.brokers, fresh)
		st.mu.Unlock()
	}
}

// sleep waits d, or returns false if the run ends first.
func (s *sim) sleep(d time.Duration) bool {
	t := time.NewTimer(delay.Positive(d))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

// bitset is a set of small integers.
type bitset []uint64

func (b bitset) test(i uint64) bool {
	w := i / 64
	return w < uint64(len(b)) && b[w]&(1<<(i%64)) != 0
}

func (b *bitset) set(i uint64) {
	w := i / 64
	for uint64(len(*b)) <= w {
		*b = append(*b, 0)
	}
	(*b)[w] |= 1 << (i % 64)
}

// counts is a set of named counters.
type counts struct {
	mu sync.Mutex
	m  map[string]uint64
}

func newCounts() *counts { return &counts{m: make(map[string]uint64)} }

func (c *counts) add(k string) {
	c.mu.Lock()
	c.m[k]++
	c.mu.Unlock()
}

func memNow() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}

func perUnit(after, before uint64, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(int64(after)-int64(before)) / float64(n)
}

// deliverTo hands d to sl; with -persist, an index past the next one sl
// expects is a gap, recovered from the run's storage first (SWIP-65).
func (s *sim) deliverTo(sl *slot, d bps.Delivery) {
	if s.store != nil && d.Service == nil {
		sl.mu.Lock()
		next, ok := sl.hi+1, sl.hasHi
		sl.mu.Unlock()
		if ok && d.Index > next {
			sp := s.cohorts[sl.cohort].c.Spec
			got := s.store.recoverGap(s.ctx, sp, d.Owner, next, d.Index-1, &s.persisted)
			sl.mu.Lock()
			for _, i := range got {
				if !sl.seen.test(i) {
					sl.seen.set(i)
					sl.recovered++
				}
			}
			sl.mu.Unlock()
		}
	}
	sl.deliver(d)
}
