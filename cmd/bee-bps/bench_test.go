// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build unix

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/gorilla/websocket"
)

// The benchmarks of the node and its WebSocket bridge (docs/benchmarks.md,
// "Node and WebSocket bridge"). They run real bee nodes over libp2p on
// loopback, all in this process, started by the dev command as
// TestDevClusterPubSub starts them:
//
//	go test -run '^$' -bench 'WS|Idle' -benchtime 2000x -count 3 ./cmd/bee-bps/

// benchPayloads are the payload sizes of the round-trip benchmarks.
var benchPayloads = []struct {
	name string
	size int
}{{"64B", 64}, {"4KB", 4096}}

// benchWarmup round trips run untimed before each timed loop.
const benchWarmup = 32

// startBenchCluster runs the dev command with args and returns the cluster
// once it is up; stop ends it and waits for it.
func startBenchCluster(b *testing.B, args ...string) (cl devCluster, stop func()) {
	b.Helper()
	ready := make(chan devCluster, 1)
	c, err := newCommand(func(c *command) {
		c.homeDir = b.TempDir()
		c.devReady = func(d devCluster) { ready <- d }
	})
	if err != nil {
		b.Fatal(err)
	}
	out := new(lockedBuffer)
	c.root.SetOut(out)
	c.root.SetErr(out)
	// Free: bee's pseudosettle pays a full node 450 deliveries a second at
	// the default prices, far below the rates measured here; the cost of
	// charging is BenchmarkPricing's (pkg/bps).
	c.root.SetArgs(append([]string{"dev", "--api-addr", "127.0.0.1:0", "--verbosity", "0", "--bps-delivery-price", "0", "--bps-publish-price", "0"}, args...))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.root.ExecuteContext(ctx) }()
	stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				b.Errorf("dev: %v\n%s", err, out)
			}
		case <-time.After(time.Minute):
			b.Errorf("dev cluster not stopped:\n%s", out)
		}
	}
	select {
	case cl = <-ready:
		return cl, stop
	case err := <-done:
		b.Fatalf("dev returned %v:\n%s", err, out)
	case <-time.After(3 * time.Minute):
		stop()
		b.Fatalf("no cluster after three minutes:\n%s", out)
	}
	return cl, stop
}

// percentile is the p-th percentile of sorted durations (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[min(max(i-1, 0), len(sorted)-1)]
}

// reportLatencies reports the p50 and p99 of lat (in ns), and the CPU time
// per round trip of the whole process (all threads, every node), cpu being
// the CPU time the timed loop took; it sorts lat.
func reportLatencies(b *testing.B, lat []time.Duration, cpu time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 50).Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(percentile(lat, 99).Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(len(lat)), "cpu-ns/op")
}

// cpuTime is the user and system CPU time of the process so far, all
// threads. On a machine other work shares, it counts what this process
// spent and not the time it waited for a core.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// feedFrame is update index wrapping payload as a publishing session's
// dApp sends it (docs/api.md): kind(1) ‖ index(8, BE) ‖ soc, the soc signed
// by signer under the session feed of the stream's challenge (SWIP-74 Rev
// 8); it also returns the chunk as bee knows it.
func feedFrame(signer crypto.Signer, owner, topic, challenge []byte, index uint64, payload []byte) ([]byte, swarm.Chunk, error) {
	b, err := liveChunk(signer, owner, pb.Kind_DATA, topic, challenge, index, payload)
	if err != nil {
		return nil, nil, err
	}
	addr, err := soc.CreateAddress(b.Soc[:swarm.HashSize], owner)
	if err != nil {
		return nil, nil, err
	}
	frame := append(binary.BigEndian.AppendUint64([]byte{byte(pb.Kind_DATA)}, index), b.Soc...)
	return frame, swarm.NewChunk(addr, b.Soc), nil
}

// liveChunk is a chunk of kind signed by the admin on the live stream
// (topic, admin) under challenge.
func liveChunk(signer crypto.Signer, admin []byte, kind pb.Kind, topic, challenge []byte, index uint64, payload []byte) (*pb.Broadcast, error) {
	sp, err := bps.NewFeedSpec(topic, admin)
	if err != nil {
		return nil, err
	}
	return sp.Chunk(signer, admin, kind, challenge, index, payload)
}

// dialFeed opens a session on the live stream (topic, admin) at the node
// whose API is api, on a plain gorilla connection, as the floor's client
// is: a subscriber (signer nil) or a publisher as signer (the admin, which
// claims with an AUTH under the challenge the node hands it, and writes
// frames signed under it). It returns once the node says ready, with the
// stream's challenge (nil for a subscriber).
func dialFeed(ctx context.Context, api, broker string, topic, admin []byte, fields string, signer crypto.Signer) (*websocket.Conn, []byte, error) {
	q := url.Values{"peer": {broker}, "binding": {"feed"}, "admin": {hex.EncodeToString(admin)}}
	if signer != nil {
		q.Set("addr", hex.EncodeToString(admin))
	}
	h := http.Header{}
	if fields != "" {
		h.Set("swarm-soc-fields", fields)
	}
	u := strings.Replace(api, "http", "ws", 1) + "/pubsub/" + hex.EncodeToString(topic) + "?" + q.Encode()
	ws, err := dialWS(ctx, u, h)
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = ws.Close() })
	defer stop()
	var challenge []byte
	for {
		var f struct{ Type, Reason, Challenge string }
		if err := ws.ReadJSON(&f); err != nil {
			ws.Close()
			return nil, nil, err
		}
		switch f.Type {
		case "ready":
			return ws, challenge, nil
		case "challenge":
			if signer == nil {
				ws.Close()
				return nil, nil, errors.New("a challenge to a subscriber")
			}
			if challenge, err = hex.DecodeString(f.Challenge); err != nil {
				ws.Close()
				return nil, nil, fmt.Errorf("challenge: %w", err)
			}
			auth, err := liveChunk(signer, admin, pb.Kind_AUTH, topic, challenge, 0, nil)
			if err != nil {
				ws.Close()
				return nil, nil, err
			}
			if err := ws.WriteMessage(websocket.BinaryMessage, append([]byte{byte(pb.Kind_AUTH), 0, 0, 0, 0, 0, 0, 0, 0}, auth.Soc...)); err != nil {
				ws.Close()
				return nil, nil, err
			}
		case "error":
			ws.Close()
			return nil, nil, fmt.Errorf("session: %s", f.Reason)
		}
	}
}

// dialWS opens a WebSocket connection to u.
func dialWS(ctx context.Context, u string, h http.Header) (*websocket.Conn, error) {
	ws, resp, err := websocket.DefaultDialer.DialContext(ctx, u, h)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close() // after an upgrade, an empty body
	}
	return ws, err
}

// closeWS ends a session with a normal closure.
func closeWS(ws *websocket.Conn) {
	_ = ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	_ = ws.Close()
}

// drain reads and discards what ws receives until it fails; the caller
// closes ws and then waits on the returned channel.
func drain(ws *websocket.Conn) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	return done
}

// BenchmarkWSRoundTrip times one feed update from a WebSocket publisher on
// node-1 through the broker to a WebSocket subscriber on node-2 (real bee
// nodes, libp2p over loopback): from writing the frame to reading it at the
// subscriber, one update in flight at a time. Updates are signed before the
// timer starts. It reports the p50 and p99 latency, the process's CPU time
// per round trip, and the median and CPU time of one soc.Valid on the same
// updates, after the timed loop: the path validates each update three
// times (the publisher's node, the broker, the subscriber's node).
func BenchmarkWSRoundTrip(b *testing.B) {
	if testing.Short() {
		b.Skip("starts three bee nodes")
	}
	cl, stop := startBenchCluster(b, "--nodes", "3")
	defer stop()
	broker := cl.Nodes[0].Underlays[0]

	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		b.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(pk)
	admin, _ := signer.EthereumAddress()

	run := 0
	for _, p := range benchPayloads {
		b.Run("payload="+p.name, func(b *testing.B) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			run++ // a fresh cohort for every call
			topic, _ := crypto.LegacyKeccak256([]byte(fmt.Sprintf("bench-rtt-%d", run)))

			n := benchWarmup + b.N
			payload := bytes.Repeat([]byte{0xb5}, p.size)
			sub, _, err := dialFeed(ctx, cl.Nodes[2].API, broker, topic, admin.Bytes(), "index,payload", nil)
			if err != nil {
				b.Fatal(err)
			}
			defer closeWS(sub)
			defer context.AfterFunc(ctx, func() { _ = sub.Close() })() // a lost update fails the run
			pub, challenge, err := dialFeed(ctx, cl.Nodes[1].API, broker, topic, admin.Bytes(), "", signer)
			if err != nil {
				b.Fatal(err)
			}
			// Signed under the stream's challenge, before the timer.
			frames := make([][]byte, n)
			chunks := make([]swarm.Chunk, 0, 256)
			for i := range n {
				frame, ch, err := feedFrame(signer, admin.Bytes(), topic, challenge, uint64(i), payload)
				if err != nil {
					b.Fatal(err)
				}
				frames[i] = frame
				if len(chunks) < cap(chunks) {
					chunks = append(chunks, ch)
				}
			}
			drained := drain(pub) // a publisher receives others' messages; there are none
			defer func() {
				closeWS(pub)
				<-drained
			}()

			// roundTrip publishes update i and reads frames at the
			// subscriber until it: index(8, BE) ‖ payload.
			roundTrip := func(i int) {
				if err := pub.WriteMessage(websocket.BinaryMessage, frames[i]); err != nil {
					b.Fatal(err)
				}
				for {
					typ, data, err := sub.ReadMessage()
					if err != nil {
						b.Fatal(err)
					}
					if typ != websocket.BinaryMessage {
						continue // a service frame
					}
					if len(data) != 8+p.size || binary.BigEndian.Uint64(data) != uint64(i) {
						b.Fatalf("got %d bytes, want update %d", len(data), i)
					}
					return
				}
			}
			for i := range benchWarmup {
				roundTrip(i)
			}
			lat := make([]time.Duration, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for i := range b.N {
				t0 := time.Now()
				roundTrip(benchWarmup + i)
				lat[i] = time.Since(t0)
			}
			cpu := cpuTime(b) - cpu0
			b.StopTimer()
			reportLatencies(b, lat, cpu)

			// soc.Valid alone on updates of the run: its median time, and its
			// CPU time (bee's BMT hasher hashes on goroutines of its own).
			valid := make([]time.Duration, len(chunks))
			cpu0 = cpuTime(b)
			for i, ch := range chunks {
				t0 := time.Now()
				if !soc.Valid(ch) {
					b.Fatal("soc.Valid: invalid update")
				}
				valid[i] = time.Since(t0)
			}
			cpu = cpuTime(b) - cpu0
			slices.Sort(valid)
			b.ReportMetric(float64(percentile(valid, 50).Nanoseconds()), "soc-valid-ns")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(len(chunks)), "soc-valid-cpu-ns")
		})
	}
}

// BenchmarkWSEchoFloor is the round trip's floor: a minimal gorilla
// WebSocket server on loopback, in this process, that echoes each binary
// frame; a frame the size of the publisher's (index, signature, span,
// payload) is written and its echo read, one at a time.
func BenchmarkWSEchoFloor(b *testing.B) {
	var wg sync.WaitGroup
	upgrader := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		defer ws.Close()
		for {
			typ, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if err := ws.WriteMessage(typ, data); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	defer wg.Wait()

	for _, p := range benchPayloads {
		b.Run("payload="+p.name, func(b *testing.B) {
			ws, err := dialWS(context.Background(), strings.Replace(srv.URL, "http", "ws", 1), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer ws.Close()
			frame := bytes.Repeat([]byte{0xb5}, 8+65+8+p.size)
			roundTrip := func() {
				if err := ws.WriteMessage(websocket.BinaryMessage, frame); err != nil {
					b.Fatal(err)
				}
				if _, data, err := ws.ReadMessage(); err != nil || len(data) != len(frame) {
					b.Fatalf("echo: %d bytes, %v", len(data), err)
				}
			}
			for range benchWarmup {
				roundTrip()
			}
			lat := make([]time.Duration, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			for i := range b.N {
				t0 := time.Now()
				roundTrip()
				lat[i] = time.Since(t0)
			}
			cpu := cpuTime(b) - cpu0
			b.StopTimer()
			reportLatencies(b, lat, cpu)
		})
	}
}

// idleSessions is how many sessions, connections or cohorts each part of
// BenchmarkIdleSessions opens.
const idleSessions = 256

// BenchmarkIdleSessions measures the memory and goroutines of idle
// sessions on a two-node dev cluster (the broker and node-1), all in this
// process:
//
//   - floor: idleSessions plain gorilla WebSocket connections to a server
//     in this process whose handler blocks reading each;
//   - session: idleSessions subscriber sessions at node-1 on one cohort;
//     they share one member stream, which a first session opened before;
//   - stream: idleSessions subscriber sessions at node-1 on as many
//     cohorts, so that each also brings one member stream (node-1's
//     client stream, the broker's member) and the node's state for one
//     more cohort; a stream's cost is this minus a session's.
//
// Every figure is the change of the whole process (all nodes, and the
// benchmark's own WebSocket clients) from before opening to after, after
// GC, divided by idleSessions. A heap profile at rate 1 over the same
// interval splits the live heap by the code that allocated it, and the
// goroutines by the code they run (sideOf).
//
// The measurement does not depend on b.N: it runs on the first call of each
// -count (b.N = 1); a later call, with a larger b.N, reports it again.
func BenchmarkIdleSessions(b *testing.B) {
	if testing.Short() {
		b.Skip("starts two bee nodes")
	}
	if b.N > 1 && idleResult != nil {
		idleResult.report(b)
		return
	}
	idleResult = nil

	// Every session comes from this process, one API client at node-1:
	// its share of the node's sessions and cohorts is raised to all of
	// them. A phase opens idleSessions+1 sessions, on up to idleSessions
	// cohorts, while the previous phase's may still be closing.
	cl, stop := startBenchCluster(b, "--nodes", "2",
		"--bps-max-cohorts-per-peer", strconv.Itoa(2*idleSessions),
		"--bps-max-cohorts", strconv.Itoa(4*idleSessions),
		"--bps-api-max-sessions", strconv.Itoa(4*idleSessions),
		"--bps-api-max-sessions-per-client", strconv.Itoa(4*idleSessions),
		"--bps-api-max-cohorts-per-client", strconv.Itoa(2*idleSessions))
	defer stop()
	broker := cl.Nodes[0].Underlays[0]
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		b.Fatal(err)
	}
	admin, _ := crypto.NewDefaultSigner(pk).EthereumAddress()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// subscribeTo opens a subscriber session at node-1 on the live stream
	// named topic.
	subscribeTo := func(topic string) *websocket.Conn {
		t, _ := crypto.LegacyKeccak256([]byte(topic))
		ws, _, err := dialFeed(ctx, cl.Nodes[1].API, broker, t, admin.Bytes(), "", nil)
		if err != nil {
			b.Fatalf("session on %s: %v", topic, err)
		}
		return ws
	}
	// subscribe opens idleSessions subscriber sessions, session i on the
	// cohort named topic(i); the returned function closes them.
	subscribe := func(topic func(i int) string) func() {
		subs := make([]*websocket.Conn, 0, idleSessions)
		for i := range idleSessions {
			subs = append(subs, subscribeTo(topic(i)))
		}
		return func() {
			for _, ws := range subs {
				closeWS(ws)
			}
		}
	}

	prevRate := runtime.MemProfileRate
	runtime.MemProfileRate = 1
	defer func() { runtime.MemProfileRate = prevRate }()

	// Warm up: the first sessions and cohorts set up what stays (pools,
	// lazily built tables), and allocate past the profiler's previous
	// sampling point.
	closeWarm := subscribe(func(i int) string { return fmt.Sprint("bench-idle-warm-", i%16) })
	time.Sleep(time.Second)
	closeWarm()
	time.Sleep(2 * time.Second)

	res := &idleMeasures{}
	res.floor = measureIdle(func() func() { return openIdleConns(b) })
	// The cohort's member stream and the node's state for it come with
	// its first session, opened before the measurement.
	first := subscribeTo("bench-idle-one")
	time.Sleep(time.Second) // for what opening it started to settle
	res.session = measureIdle(func() func() {
		return subscribe(func(int) string { return "bench-idle-one" })
	})
	closeWS(first)
	res.stream = measureIdle(func() func() {
		return subscribe(func(i int) string { return fmt.Sprint("bench-idle-", i) })
	})
	idleResult = res
	res.report(b)
	res.log(b)
}

// idleResult is BenchmarkIdleSessions' measurement in this -count.
var idleResult *idleMeasures

type idleMeasures struct {
	floor, session, stream processDelta
}

func (r *idleMeasures) report(b *testing.B) {
	stream := r.stream.minus(r.session)
	for _, m := range []struct {
		d    processDelta
		unit string
	}{{r.floor, "conn"}, {r.session, "session"}, {stream, "stream"}} {
		b.ReportMetric(float64(m.d.heapAlloc)/idleSessions, "heap-B/"+m.unit)
		b.ReportMetric(float64(m.d.heapInuse)/idleSessions, "inuse-B/"+m.unit)
		b.ReportMetric(float64(m.d.stack)/idleSessions, "stack-B/"+m.unit)
		b.ReportMetric(float64(m.d.goroutines)/idleSessions, "goroutines/"+m.unit)
	}
}

// idleSides are the sides of sideOf, in the order log prints them.
var idleSides = []string{"clients", "floor server", "net/http", "bridge", "node client", "broker", "libp2p", "runtime", "other"}

// log prints the split by side: live heap bytes and goroutines per floor
// connection, per session and per stream.
func (r *idleMeasures) log(b *testing.B) {
	var w strings.Builder
	fmt.Fprintf(&w, "per item (%d each) by side: live heap bytes / goroutines\n%-8s", idleSessions, "")
	for _, side := range idleSides {
		fmt.Fprintf(&w, " %14s", side)
	}
	for i, d := range []processDelta{r.floor, r.session, r.stream.minus(r.session)} {
		fmt.Fprintf(&w, "\n%-8s", []string{"conn", "session", "stream"}[i])
		for _, side := range idleSides {
			fmt.Fprintf(&w, " %7.0f / %4.2f", float64(d.heapBy[side])/idleSessions, float64(d.goBy[side])/idleSessions)
		}
	}
	b.Log(w.String())
	if os.Getenv("BPS_BENCH_SITES") != "" {
		for i, d := range []processDelta{r.floor, r.session, r.stream.minus(r.session)} {
			fmt.Printf("top allocation sites, %s:\n", []string{"floor conn", "session", "stream"}[i])
			for _, k := range slices.SortedFunc(maps.Keys(d.sites), func(a, b string) int { return cmp.Compare(d.sites[b], d.sites[a]) })[:min(25, len(d.sites))] {
				fmt.Printf("%9.0f %s\n", float64(d.sites[k])/idleSessions, k)
			}
		}
	}
}

// openIdleConns opens idleSessions plain WebSocket connections to a
// server in this process whose handler blocks reading each: the floor of
// an idle session. The returned function closes them and the server.
func openIdleConns(b *testing.B) func() {
	var wg sync.WaitGroup
	upgrader := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		wg.Add(1)
		defer wg.Done()
		defer ws.Close()
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}))
	conns := make([]*websocket.Conn, 0, idleSessions)
	for range idleSessions {
		ws, err := dialWS(context.Background(), strings.Replace(srv.URL, "http", "ws", 1), nil)
		if err != nil {
			b.Fatal(err)
		}
		conns = append(conns, ws)
	}
	return func() {
		for _, ws := range conns {
			ws.Close()
		}
		wg.Wait()
		srv.Close()
	}
}

// measureIdle snapshots the process, runs open, lets what it opened settle,
// snapshots again, closes it and lets it wind down.
func measureIdle(open func() (closeAll func())) processDelta {
	before := snapshotProcess(true)
	closeAll := open()
	time.Sleep(time.Second)
	after := snapshotProcess(false)
	closeAll()
	time.Sleep(2 * time.Second)
	return after.minus(before)
}

// processDelta is a snapshot of the process, or the difference of two.
type processDelta struct {
	heapAlloc, heapInuse, stack int64            // MemStats: HeapAlloc, HeapInuse, StackInuse
	goroutines                  int              // runtime.NumGoroutine
	heapBy                      map[string]int64 // live heap (profile) by side
	sites                       map[string]int64 // live heap (profile) by side and stack
	goBy                        map[string]int   // goroutines by side
}

// snapshotProcess measures the process after GC. The profile of the
// snapshot taken first is still live when the second one reads MemStats:
// before reads MemStats after building its profile, after before it.
func snapshotProcess(before bool) processDelta {
	gc := func() {
		for range 3 { // the heap profile is as of the last completed GC cycle but one
			runtime.GC()
		}
	}
	var s processDelta
	readMem := func() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		s.heapAlloc, s.heapInuse, s.stack = int64(m.HeapAlloc), int64(m.HeapInuse), int64(m.StackInuse)
	}
	gc()
	if !before {
		readMem()
	}
	s.goroutines = runtime.NumGoroutine()
	s.sites, s.goBy, s.heapBy = heapSites(), goroutinesBySide(), map[string]int64{}
	for k, v := range s.sites {
		side, _, _ := strings.Cut(k, " | ")
		s.heapBy[side] += v
	}
	if before {
		gc()
		readMem()
	}
	return s
}

func (d processDelta) minus(o processDelta) processDelta {
	r := processDelta{
		heapAlloc: d.heapAlloc - o.heapAlloc, heapInuse: d.heapInuse - o.heapInuse, stack: d.stack - o.stack,
		goroutines: d.goroutines - o.goroutines,
		heapBy:     subMaps(d.heapBy, o.heapBy), sites: subMaps(d.sites, o.sites), goBy: subMaps(d.goBy, o.goBy),
	}
	return r
}

func subMaps[V int | int64](a, b map[string]V) map[string]V {
	r := maps.Clone(a)
	for k, v := range b {
		r[k] -= v
	}
	return r
}

// heapSites is the heap profile's live bytes by side and allocation stack.
func heapSites() map[string]int64 {
	var recs []runtime.MemProfileRecord
	n, _ := runtime.MemProfile(nil, true)
	for {
		recs = make([]runtime.MemProfileRecord, n+64)
		var ok bool
		if n, ok = runtime.MemProfile(recs, true); ok {
			recs = recs[:n]
			break
		}
	}
	by := map[string]int64{}
	for _, r := range recs {
		var fns, files []string
		frames := runtime.CallersFrames(r.Stack())
		for {
			f, more := frames.Next()
			fns, files = append(fns, f.Function), append(files, f.File)
			if !more {
				break
			}
		}
		by[sideOf(fns, files)+" | "+strings.Join(fns[:min(len(fns), 9)], " < ")] += r.InUseBytes()
	}
	return by
}

// goroutinesBySide counts the goroutines by side, from their stacks.
func goroutinesBySide() map[string]int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	by := map[string]int{}
	for _, g := range strings.Split(string(buf), "\n\n") {
		var fns, files []string
		lines := strings.Split(g, "\n")
		for _, line := range lines[1:] { // after "goroutine N [state]:"
			switch {
			case line == "", strings.HasPrefix(line, "..."): // additional frames elided
			case strings.HasPrefix(line, "\t"):
				file, _, _ := strings.Cut(strings.TrimSpace(line), ":")
				files = append(files, file)
			default:
				fn := strings.TrimPrefix(line, "created by ")
				if i := strings.Index(fn, " in goroutine"); i >= 0 {
					fn = fn[:i]
				}
				if i := strings.LastIndex(fn, "("); i > 0 && strings.HasSuffix(fn, ")") {
					fn = fn[:i]
				}
				fns = append(fns, fn)
			}
		}
		if len(fns) > 0 {
			by[sideOf(fns, files)]++
		}
	}
	return by
}

// sideOf names the part of the process a stack (innermost frame first)
// works for (idleSides). The innermost frame that names a side decides:
// the benchmark's WebSocket clients, the floor's server, the bridge
// (pkg/api), the broker's or the client's half of pkg/bps (by file). A
// stack with none is named after the library of its innermost frame
// outside the runtime: libp2p, net/http (the API server's connections), or
// other; "runtime" is what the runtime allocates for itself, such as
// goroutine descriptors. The snapshots' own allocations are "measurement".
func sideOf(fns, files []string) string {
	for _, fn := range fns {
		if strings.Contains(fn, "/cmd/bee-bps.snapshotProcess") {
			return "measurement" // the snapshots' own maps
		}
	}
	for i, fn := range fns {
		file := ""
		if i < len(files) {
			file = files[i]
		}
		switch {
		case strings.Contains(fn, "gorilla/websocket.(*Dialer)"), strings.Contains(fn, ".dialFeed"):
			return "clients"
		case strings.Contains(fn, ".openIdleConns.func"):
			return "floor server"
		case strings.Contains(fn, "/bps/pkg/api."):
			return "bridge"
		case strings.Contains(fn, "/bps/pkg/bps."):
			switch {
			case strings.HasSuffix(file, "/broker.go"), strings.HasSuffix(file, "/cohort.go"):
				return "broker"
			case strings.HasSuffix(file, "/client.go"):
				return "node client"
			}
		}
	}
	for _, fn := range fns {
		switch {
		case strings.HasPrefix(fn, "runtime."), strings.HasPrefix(fn, "internal/"), strings.HasPrefix(fn, "sync."):
			continue
		case strings.Contains(fn, "libp2p"), strings.Contains(fn, "yamux"), strings.Contains(fn, "multiformats"):
			return "libp2p"
		case strings.HasPrefix(fn, "net/"), strings.HasPrefix(fn, "net."), strings.HasPrefix(fn, "bufio."):
			return "net/http"
		}
		return "other"
	}
	return "runtime"
}
