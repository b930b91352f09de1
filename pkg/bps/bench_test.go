// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build unix

package bps_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"
)

// Every benchmark here comes with a floor measured in the same run: the
// ratio BPS ÷ floor is what docs/benchmarks.md reports, since absolute
// numbers say more about the machine than about the broker.
//
//   - BenchmarkFanout: one claimed publisher stream, n raw subscriber
//     streams that drain into a buffer and discard; the broker's cost per
//     delivery, its validation of each message included.
//   - BenchmarkFanoutSubscription: the same with bps.Subscriptions, one per
//     node, which re-verify every delivery.
//   - BenchmarkFanoutPaced: BenchmarkFanout with live traffic, an update
//     published once every subscriber received the previous one.
//   - BenchmarkFanoutFloor: the same frames written to n streams of the
//     same transport by one writer goroutine per stream draining a bounded
//     channel, all queued at once, a writer writing what it finds queued
//     together (the batched floor);
//     BenchmarkFanoutFloorPaced queues each frame once every reader
//     received the previous one, as a live stream does (the paced floor).
//     The *Reading variants park a reader on the server's end of every
//     stream, as a broker's member has one.
//   - BenchmarkFanoutLibp2p*: the same on bee's libp2p service, yamux over
//     TCP on loopback (fanout_libp2p_bench_test.go, build tag benchlibp2p).
//   - BenchmarkValidate vs BenchmarkValidateFloor (bee's soc.Valid) and
//     BenchmarkVerifyAuth vs BenchmarkVerifyAuthFloor (soc.Valid on the
//     AUTH chunk: SWIP-74 Rev 8's claim, rev 3's claim frame having gone);
//     the *Paired variants time both alternately in one loop.
//
// The fan-out benchmarks report, besides ns/op (per published message),
// ns/delivery, cpu-ns/delivery (user+system time of the process, all
// threads) and allocs/delivery over the timed section only; the others
// report cpu-ns/op. CPU time is the comparison that holds on a shared
// machine: wall time also counts the time the process waited for a core.

var (
	fanoutSubs       = []int{1, 10, 100, 1000}
	subscriptionSubs = []int{1, 10, 100}
	benchPayloads    = []struct {
		name string
		size int
	}{{"1KB", 1 << 10}, {"4KB", 4 << 10}}
)

// floorFrames is how many distinct frames the floor cycles through: it does
// not validate, so it need not publish b.N distinct updates.
const floorFrames = 64

// benchDeadline bounds every wait in a benchmark; reaching it is a failure.
const benchDeadline = 2 * time.Minute

func BenchmarkFanout(b *testing.B) {
	for _, n := range fanoutSubs {
		for _, p := range benchPayloads {
			b.Run(fmt.Sprintf("subs=%d/payload=%s", n, p.name), func(b *testing.B) {
				benchRawFanout(b, memTransport, n, p.size, false)
			})
		}
	}
}

func BenchmarkFanoutSubscription(b *testing.B) {
	for _, n := range subscriptionSubs {
		for _, p := range benchPayloads {
			b.Run(fmt.Sprintf("subs=%d/payload=%s", n, p.name), func(b *testing.B) {
				benchFanout(b, memTransport, n, p.size, false, true)
			})
		}
	}
}

func BenchmarkFanoutFloor(b *testing.B) {
	for _, n := range fanoutSubs {
		for _, p := range benchPayloads {
			b.Run(fmt.Sprintf("subs=%d/payload=%s", n, p.name), func(b *testing.B) {
				benchFanoutFloor(b, memTransport, n, p.size, false, false)
			})
		}
	}
}

func BenchmarkFanoutFloorPaced(b *testing.B) {
	for _, n := range fanoutSubs {
		for _, p := range benchPayloads {
			b.Run(fmt.Sprintf("subs=%d/payload=%s", n, p.name), func(b *testing.B) {
				benchFanoutFloor(b, memTransport, n, p.size, true, false)
			})
		}
	}
}

// BenchmarkFanoutFloorReading and BenchmarkFanoutFloorPacedReading are the
// floors with a reader parked on the server's end of every stream, as a
// broker's member has one. On streamtest, which wakes every waiter of a
// stream on every write (one condition for both directions), that reader
// wakes at every delivery; a yamux stream wakes a reader only for data.
func BenchmarkFanoutFloorReading(b *testing.B) {
	for _, n := range fanoutSubs {
		for _, p := range benchPayloads {
			b.Run(fmt.Sprintf("subs=%d/payload=%s", n, p.name), func(b *testing.B) {
				benchFanoutFloor(b, memTransport, n, p.size, false, true)
			})
		}
	}
}

func BenchmarkFanoutFloorPacedReading(b *testing.B) {
	for _, n := range fanoutSubs {
		for _, p := range benchPayloads {
			b.Run(fmt.Sprintf("subs=%d/payload=%s", n, p.name), func(b *testing.B) {
				benchFanoutFloor(b, memTransport, n, p.size, true, true)
			})
		}
	}
}

// BenchmarkFanoutPaced is BenchmarkFanout with live traffic: the publisher
// publishes an update once every subscriber has received the previous one.
func BenchmarkFanoutPaced(b *testing.B) {
	for _, n := range fanoutSubs {
		for _, p := range benchPayloads {
			b.Run(fmt.Sprintf("subs=%d/payload=%s", n, p.name), func(b *testing.B) {
				benchFanoutPaced(b, memTransport, n, p.size)
			})
		}
	}
}

// fanoutTransport is the network a fan-out benchmark runs on:
// pkg/bps/streamtest's in-memory pipes (memTransport), or bee's libp2p
// service, yamux over TCP on loopback (fanout_libp2p_bench_test.go).
type fanoutTransport interface {
	// node starts a node, with a BPS service with *o if o is not nil.
	node(tb testing.TB, o *bps.Options) (fanoutNode, *bps.Service)
	// connect connects a to b.
	connect(tb testing.TB, a, b fanoutNode)
}

// fanoutNode is a node of a fanoutTransport.
type fanoutNode interface {
	p2p.Streamer
	AddProtocol(p2p.ProtocolSpec) error
	Overlay() swarm.Address
}

type memNet struct{ net *streamtest.Network }

// memTransport is a fresh streamtest network, closed by tb's cleanup.
func memTransport(tb testing.TB) fanoutTransport { return memNet{benchNetwork(tb)} }

func (m memNet) node(tb testing.TB, o *bps.Options) (fanoutNode, *bps.Service) {
	if o == nil {
		return m.net.NewNode(), nil
	}
	return benchNode(tb, m.net, *o)
}

func (m memNet) connect(tb testing.TB, a, b fanoutNode) {
	benchConnect(tb, m.net, a.(*streamtest.Node), b.(*streamtest.Node))
}

// benchRawFanout is benchFanout with raw subscriber streams.
func benchRawFanout(b *testing.B, tr func(testing.TB) fanoutTransport, n, size int, paced bool) {
	benchFanout(b, tr, n, size, paced, false)
}

// benchFanoutPaced is benchRawFanout with live traffic.
func benchFanoutPaced(b *testing.B, tr func(testing.TB) fanoutTransport, n, size int) {
	benchFanout(b, tr, n, size, true, false)
}

// benchFanout publishes b.N pre-signed updates of size bytes on one claimed
// publisher stream (claimed by its AUTH; the updates signed under its
// challenge, before the subscribers join) and waits until each of n subscribers received all of
// them: raw streams drained into a buffer (the broker's cost alone), or
// bps.Subscriptions on n nodes (adding each subscriber's re-verification).
// A warm-up of the same updates runs first, untimed. Paced (raw streams
// only), the publisher publishes an update once every subscriber has
// received the previous one, as a live stream's messages arrive; unpaced,
// it publishes them all at once and the broker's writers find a backlog.
//
// The broker's QueueLen is raised above the number of updates: unpaced,
// the publisher outruns the fan-out, and with the default of 64 a
// subscriber queue would overflow and be reset. The benchmark fails on any
// queue_reset.
func benchFanout(b *testing.B, newTransport func(testing.TB) fanoutTransport, n, size int, paced, subscriptions bool) {
	warm := warmup(b, size)
	if subscriptions {
		// Re-verification (~100 µs per delivery) dwarfs the buffers'
		// growth; a few messages grow the stacks.
		warm = 4
	}
	admin, sp := benchFeed.feed(b)
	count := warm + b.N

	var resets, accepts atomic.Int64
	claimed, warmed := make(chan struct{}), make(chan struct{})
	tracer := bps.TracerFunc(func(e bps.Event) {
		switch e.Kind {
		case bps.EventClaim:
			close(claimed) // once: one publisher stream claims once
		case bps.EventAccept:
			if accepts.Add(1) == int64(warm) {
				close(warmed)
			}
		case bps.EventQueueReset:
			resets.Add(1)
		}
	})

	var readers sync.WaitGroup
	b.Cleanup(readers.Wait) // runs last: the streams are down by then
	tr := newTransport(b)
	bnode, broker := tr.node(b, &bps.Options{
		Bounds: bps.Bounds{
			MaxStreamsPerCohort: n + 1, // the publisher joins as a subscriber first
			QueueLen:            count + 1,
		},
		Deps: bps.Deps{
			Tracer: tracer,
		},
	})

	// The publisher first: its stream's challenge is what the updates are
	// signed under (SWIP-74 Rev 8); its AUTH claims it.
	pnode, _ := tr.node(b, nil)
	tr.connect(b, pnode, bnode)
	pub, ack := joinRaw(b, pnode, bnode.Overlay(), &pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	if _, err := pub.Write(bps.EncodeFrame(auth(b, admin, sp, ack.Challenge))); err != nil {
		b.Fatalf("write AUTH: %v", err)
	}
	select {
	case <-claimed:
	case <-time.After(benchDeadline):
		b.Fatal("claim not taken")
	}
	_, _, frames := benchFeed.updates(b, ack.Challenge, size, count)

	var ms *milestones
	var subs []*bps.Subscription
	if subscriptions {
		ms = newMilestones(n, warm, len(frames))
		for range n {
			nd, svc := tr.node(b, &bps.Options{})
			tr.connect(b, nd, bnode)
			sub, err := svc.Subscribe(context.Background(), bnode.Overlay(), sp)
			if err != nil {
				b.Fatalf("subscribe: %v", err)
			}
			subs = append(subs, sub)
			readers.Go(func() {
				got := 0
				for range sub.C() { // until the service closes it
					got++
					ms.advance(got-1, got)
				}
				ms.fail(got, fmt.Errorf("subscription ended after %d deliveries: %w", got, sub.Err()))
			})
		}
	} else {
		// A peer holds at most MaxPeerStreams streams in a cohort (Rev 8:
		// every stream counted): the streams come from as many peers as
		// that takes. Each declares the zero address: a spectator.
		streams := make([]p2p.Stream, n)
		var snode fanoutNode
		for i := range streams {
			if i%bps.MaxPeerStreams == 0 {
				snode, _ = tr.node(b, nil)
				tr.connect(b, snode, bnode)
			}
			streams[i], _ = joinRaw(b, snode, bnode.Overlay(), &pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress})
		}
		ms = drainAll(b, &readers, streams, warmed, byteMilestones(frames, warm, paced)...)
	}

	publish := func(f []byte) {
		if _, err := pub.Write(f); err != nil {
			b.Fatalf("publish: %v", err)
		}
	}
	for _, f := range frames[:warm] {
		publish(f)
	}
	ms.wait(b, 0)
	m := startMeasure(b)
	for i, f := range frames[warm:] {
		publish(f)
		if paced {
			ms.wait(b, 1+i)
		}
	}
	ms.wait(b, len(ms.at)-1)
	m.stop(b, n)

	if r := resets.Load(); r != 0 {
		b.Fatalf("%d subscriber queues reset", r)
	}
	info := broker.Cohorts()
	if len(info) != 1 {
		b.Fatalf("%d cohorts at the broker, want 1", len(info))
	}
	if got := info[0].Counters[bps.CounterQueueReset.String()]; got != 0 {
		b.Fatalf("queue_reset = %d", got)
	}
	if got := info[0].Accepted; got != uint64(len(frames)) {
		b.Fatalf("accepted %d of %d", got, len(frames))
	}
	for _, sub := range subs {
		if sub.Dropped() != 0 || sub.Received() != uint64(len(frames)) {
			b.Fatalf("subscription received %d, dropped %d of %d", sub.Received(), sub.Dropped(), len(frames))
		}
	}
}

// byteMilestones are the bytes a reader has received once the warm-up is
// through and, paced, once each later frame is, or else once all are.
func byteMilestones(frames [][]byte, warm int, paced bool) []int {
	at := []int{sum(frames[:warm])}
	if !paced {
		return append(at, sum(frames))
	}
	for _, f := range frames[warm:] {
		at = append(at, at[len(at)-1]+len(f))
	}
	return at
}

// benchFanoutFloor is BenchmarkFanout without BPS: the same encoded frames
// go to n streams of the same transport, each written by one goroutine
// draining a bounded channel the producer never blocks on, and are drained
// by the same readers, after the same warm-up. No decode, validation,
// re-encode, lock, timer or metric.
//
// Unpaced, the producer queues every frame at once, so a writer finds many
// frames waiting and writes them together, up to 32 frames or 32 KiB per
// write, as BPS's writer does: the batched floor. Paced, the producer queues a frame only once every reader has
// received the previous one, as messages of a live stream arrive: every
// delivery then costs a writer's and a reader's wake-up, as it does at the
// broker when frames arrive one at a time.
func benchFanoutFloor(b *testing.B, newTransport func(testing.TB) fanoutTransport, n, size int, paced, reading bool) {
	warm := warmup(b, size)
	_, _, pool := benchFeed.updates(b, benchChallenge, size, floorFrames)
	frames := make([][]byte, warm+b.N)
	for i := range frames {
		frames[i] = pool[i%len(pool)]
	}

	var readers sync.WaitGroup
	b.Cleanup(readers.Wait)
	tr := newTransport(b)
	src, _ := tr.node(b, nil)
	dst, _ := tr.node(b, nil)

	queues := make(chan chan []byte, n)
	quit := make(chan struct{})
	b.Cleanup(func() { close(quit) }) // before the network waits for the writers
	err := src.AddProtocol(p2p.ProtocolSpec{
		Name:    "floor",
		Version: "1.0.0",
		StreamSpecs: []p2p.StreamSpec{{
			Name: "stream",
			Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
				q := make(chan []byte, len(frames)+1)
				queues <- q
				if reading {
					// A reader parked on the stream, as a broker's
					// member has; the reset at the end ends it.
					read := make(chan struct{})
					go func() {
						defer close(read)
						var b [1]byte
						_, _ = s.Read(b[:])
					}()
					defer func() {
						_ = s.Reset()
						<-read
					}()
				}
				buf := make([]byte, 0, floorBatchBytes+bps.MaxFrameSize)
				for {
					select {
					case <-quit:
						return nil
					case f := <-q:
						// What it finds queued behind f, it writes with
						// f, as BPS's writer does.
						buf = append(buf[:0], f...)
						for k := 1; k < floorBatchFrames && len(buf) < floorBatchBytes; k++ {
							select {
							case g := <-q:
								buf = append(buf, g...)
								continue
							default:
							}
							break
						}
						if len(buf) > len(f) {
							f = buf
						}
						if _, err := s.Write(f); err != nil {
							_ = s.Reset() // the reader fails
							return err
						}
					}
				}
			},
		}},
	})
	if err != nil {
		b.Fatal(err)
	}
	tr.connect(b, dst, src)
	streams := make([]p2p.Stream, n)
	for i := range streams {
		if streams[i], err = dst.NewStream(context.Background(), src.Overlay(), nil, "floor", "1.0.0", "stream"); err != nil {
			b.Fatal(err)
		}
	}
	qs := make([]chan []byte, n)
	for i := range qs {
		qs[i] = <-queues
	}
	start := make(chan struct{})
	ms := drainAll(b, &readers, streams, start, byteMilestones(frames, warm, paced)...)

	queue := func(f []byte) {
		for _, q := range qs {
			select {
			case q <- f:
			default:
				b.Fatal("floor queue overflowed")
			}
		}
	}
	for _, f := range frames[:warm] {
		queue(f)
	}
	close(start)
	ms.wait(b, 0)
	m := startMeasure(b)
	for i, f := range frames[warm:] {
		queue(f)
		if paced {
			ms.wait(b, 1+i)
		}
	}
	ms.wait(b, len(ms.at)-1)
	m.stop(b, n)
}

// floorBatchFrames and floorBatchBytes bound what the floor's writer
// writes at once, as the broker's writer is bounded.
const (
	floorBatchFrames = 32
	floorBatchBytes  = 32 << 10
)

// warmup is how many messages go through before the timed section. The raw
// readers start only once all of them are queued, so every stream's buffer
// fills once: streamtest grows a buffer by appending up to its capacity, and
// the goroutines grow their stacks, both one-off costs that would otherwise
// weigh on small b.N, and more on BPS than on the floor.
func warmup(tb testing.TB, size int) int {
	tb.Helper()
	_, _, frames := benchFeed.updates(tb, benchChallenge, size, 1)
	return 2*streamtest.DefaultBufferSize/len(frames[0]) + 1
}

func sum(frames [][]byte) int {
	n := 0
	for _, f := range frames {
		n += len(f)
	}
	return n
}

func BenchmarkValidate(b *testing.B) {
	for _, p := range benchPayloads {
		b.Run("payload="+p.name, func(b *testing.B) {
			sp, msg := validationFixture(b, p.size)
			cpuLoop(b, func() { bps.Check(sp, msg, sp.Admin, benchChallenge, 0) })
		})
	}
}

// BenchmarkValidateFloor is soc.Valid alone on the chunk the publication
// carries, with the feed id in its id slot, as the broker checks it.
func BenchmarkValidateFloor(b *testing.B) {
	for _, p := range benchPayloads {
		b.Run("payload="+p.name, func(b *testing.B) {
			sp, msg := validationFixture(b, p.size)
			ch := socChunk(b, sp, msg)
			cpuLoop(b, func() { soc.Valid(ch) })
		})
	}
}

// BenchmarkValidatePaired times the broker's validation and soc.Valid on
// the same publication alternately, so that a shared machine's load weighs
// on both alike, and reports both and their ratio.
func BenchmarkValidatePaired(b *testing.B) {
	for _, p := range benchPayloads {
		b.Run("payload="+p.name, func(b *testing.B) {
			sp, msg := validationFixture(b, p.size)
			ch := socChunk(b, sp, msg)
			paired(b, func() { bps.Check(sp, msg, sp.Admin, benchChallenge, 0) }, func() { soc.Valid(ch) })
		})
	}
}

// BenchmarkVerifyAuth is the broker's check of an AUTH, the frame our
// publishers claim a stream with (SWIP-74 Rev 8: the first valid frame
// claims; rev 3's Claim frame and its digest are gone).
func BenchmarkVerifyAuth(b *testing.B) {
	sp, msg := authFixture(b)
	cpuLoop(b, func() { bps.Check(sp, msg, sp.Admin, benchChallenge, 0) })
}

// BenchmarkVerifyAuthFloor is soc.Valid alone on the AUTH chunk.
func BenchmarkVerifyAuthFloor(b *testing.B) {
	sp, msg := authFixture(b)
	ch := socChunk(b, sp, msg)
	cpuLoop(b, func() { soc.Valid(ch) })
}

// BenchmarkVerifyAuthPaired is BenchmarkValidatePaired for AUTH chunks.
func BenchmarkVerifyAuthPaired(b *testing.B) {
	sp, msg := authFixture(b)
	ch := socChunk(b, sp, msg)
	paired(b, func() { bps.Check(sp, msg, sp.Admin, benchChallenge, 0) }, func() { soc.Valid(ch) })
}

// paired runs f and floor once each per iteration, in alternating order,
// and reports the mean wall time of each call and their ratio.
func paired(b *testing.B, f, floor func()) {
	b.ReportAllocs()
	timed := func(g func()) time.Duration {
		t := time.Now()
		g()
		return time.Since(t)
	}
	var tf, tfloor time.Duration
	n := 0
	for b.Loop() {
		if n%2 == 0 {
			tf += timed(f)
			tfloor += timed(floor)
		} else {
			tfloor += timed(floor)
			tf += timed(f)
		}
		n++
	}
	b.ReportMetric(float64(tf.Nanoseconds())/float64(n), "bps-ns/call")
	b.ReportMetric(float64(tfloor.Nanoseconds())/float64(n), "floor-ns/call")
	b.ReportMetric(float64(tf)/float64(tfloor), "ratio")
}

// feedCache holds the admin, spec and encoded updates every benchmark
// publishes, so that updates are signed once per process and outside any
// timed section.
type feedCache struct {
	mu     sync.Mutex
	admin  key
	spec   *bps.Spec
	frames map[frameSet][][]byte // encoded updates 0, 1, …
}

// frameSet names the updates of one payload size signed for one stream's
// challenge (SWIP-74 Rev 8: the challenge is in every update's id).
type frameSet struct {
	challenge string
	size      int
}

// benchChallenge is the challenge the benchmarks that need no broker's
// stream sign under (validation, the floors): any 32 bytes.
var benchChallenge = topicOf("bench challenge")

var benchFeed feedCache

// feed returns the admin and spec of the benchmark feed.
func (f *feedCache) feed(tb testing.TB) (key, *bps.Spec) {
	tb.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.initLocked(tb)
	return f.admin, f.spec
}

func (f *feedCache) initLocked(tb testing.TB) {
	tb.Helper()
	if f.spec == nil {
		f.admin = newKey(tb)
		f.spec = feedSpec(tb, "bench", f.admin)
		f.frames = make(map[frameSet][][]byte)
	}
}

// updates returns the encoded updates 0 … count-1 under challenge with
// payloads of size bytes, signing the ones not cached yet on every core.
func (f *feedCache) updates(tb testing.TB, challenge []byte, size, count int) (key, *bps.Spec, [][]byte) {
	tb.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.initLocked(tb)
	set := frameSet{string(challenge), size}
	have := f.frames[set]
	if len(have) >= count {
		return f.admin, f.spec, have[:count]
	}
	all := make([][]byte, count)
	copy(all, have)
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := len(have) + w; i < count; i += workers {
				m, err := f.spec.Chunk(f.admin.signer, f.admin.addr, pb.Kind_DATA, challenge, uint64(i), benchPayload(i, size))
				if err != nil {
					errs[w] = err
					return
				}
				all[i] = bps.EncodeFrame(m)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	f.frames[set] = all
	return f.admin, f.spec, all
}

func benchPayload(i, size int) []byte { return bytes.Repeat([]byte{byte(i)}, size) }

// validationFixture is one accepted publication of size payload bytes,
// under benchChallenge.
func validationFixture(tb testing.TB, size int) (*bps.Spec, *pb.Broadcast) {
	tb.Helper()
	_, sp, frames := benchFeed.updates(tb, benchChallenge, size, 1)
	msg := new(pb.Broadcast)
	if err := readExact(bytes.NewReader(frames[0]), msg); err != nil {
		tb.Fatal(err)
	}
	if _, ok := bps.Check(sp, msg, sp.Admin, benchChallenge, 0); !ok {
		tb.Fatal("fixture not accepted")
	}
	return sp, msg
}

// authFixture is the admin's AUTH under benchChallenge, accepted.
func authFixture(tb testing.TB) (*bps.Spec, *pb.Broadcast) {
	tb.Helper()
	admin, sp := benchFeed.feed(tb)
	msg := auth(tb, admin, sp, benchChallenge)
	if _, ok := bps.Check(sp, msg, sp.Admin, benchChallenge, 0); !ok {
		tb.Fatal("AUTH fixture not accepted")
	}
	return sp, msg
}

// socChunk is the SOC a publication carries, its full id included, at its
// address keccak256(id ‖ owner): what the broker hands to bee's soc
// package.
func socChunk(tb testing.TB, sp *bps.Spec, msg *pb.Broadcast) swarm.Chunk {
	tb.Helper()
	s, err := soc.FromChunk(swarm.NewChunk(swarm.ZeroAddress, msg.Soc))
	if err != nil {
		tb.Fatal(err)
	}
	addr, err := s.Address()
	if err != nil {
		tb.Fatal(err)
	}
	ch := swarm.NewChunk(addr, msg.Soc)
	if !soc.Valid(ch) {
		tb.Fatal("fixture not a valid SOC")
	}
	return ch
}

// benchNetwork, benchNode and benchConnect are newNetwork, newNode and
// Network.Connect for testing.TB, without the event recorder.
func benchNetwork(tb testing.TB) *streamtest.Network {
	tb.Helper()
	n := streamtest.New()
	tb.Cleanup(func() {
		if err := n.Close(); err != nil {
			tb.Errorf("close network: %v", err)
		}
	})
	return n
}

func benchNode(tb testing.TB, net *streamtest.Network, o bps.Options) (*streamtest.Node, *bps.Service) {
	tb.Helper()
	nd := net.NewNode()
	svc, err := bps.New(nd, nd.Overlay(), o)
	if err != nil {
		tb.Fatal(err)
	}
	if err := nd.AddProtocol(svc.Protocol()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := svc.Close(); err != nil {
			tb.Errorf("close service: %v", err)
		}
	})
	return nd, svc
}

func benchConnect(tb testing.TB, net *streamtest.Network, a, b *streamtest.Node) {
	tb.Helper()
	if err := net.Connect(a, b); err != nil {
		tb.Fatal(err)
	}
}

// joinRaw opens a BPS stream from one node to a broker, sends j and reads an
// OK Ack, consuming no byte past it.
func joinRaw(tb testing.TB, from p2p.Streamer, broker swarm.Address, j *pb.Join) (p2p.Stream, *pb.Ack) {
	tb.Helper()
	s, err := from.NewStream(context.Background(), broker, nil, bps.ProtocolName, bps.ProtocolVersion, bps.StreamName)
	if err != nil {
		tb.Fatalf("open stream: %v", err)
	}
	if _, err := s.Write(bps.EncodeFrame(j)); err != nil {
		tb.Fatalf("write join: %v", err)
	}
	ack := new(pb.Ack)
	if err := readExact(s, ack); err != nil {
		tb.Fatalf("read ack: %v", err)
	}
	if ack.Status != pb.Status_OK {
		tb.Fatalf("ack %s", ack.Status)
	}
	return s, ack
}

// readExact reads one frame into m without reading ahead, so that what
// follows on r is left for a drain.
func readExact(r io.Reader, m proto.Message) error {
	return protodelim.UnmarshalOptions{MaxSize: bps.MaxFrameSize}.UnmarshalFrom(byteReader{r}, m)
}

// byteReader reads one byte at a time where protodelim asks for one.
type byteReader struct{ io.Reader }

func (r byteReader) ReadByte() (byte, error) {
	var b [1]byte
	_, err := io.ReadFull(r.Reader, b[:])
	return b[0], err
}

// arrivals counts readers that reached a milestone, with the first error
// among those that cannot.
type arrivals struct {
	left  atomic.Int64
	once  sync.Once
	err   error
	ended chan struct{} // closed by the last reader
}

func (a *arrivals) done(err error) {
	if err != nil {
		a.once.Do(func() { a.err = err })
	}
	if a.left.Add(-1) == 0 {
		close(a.ended)
	}
}

// milestones are cumulative targets (bytes or deliveries) that each of a
// set of readers reports reaching.
type milestones struct {
	at  []int
	arr []*arrivals
}

func newMilestones(readers int, at ...int) *milestones {
	m := &milestones{at: at}
	for range at {
		a := &arrivals{ended: make(chan struct{})}
		a.left.Store(int64(readers))
		m.arr = append(m.arr, a)
	}
	return m
}

// advance reports one reader's progress from prev to now.
func (m *milestones) advance(prev, now int) {
	for i := sort.SearchInts(m.at, prev+1); i < len(m.at) && m.at[i] <= now; i++ {
		m.arr[i].done(nil)
	}
}

// fail reports one reader ended after got: the milestones it did not reach
// fail.
func (m *milestones) fail(got int, err error) {
	for i, at := range m.at {
		if got < at {
			m.arr[i].done(err)
		}
	}
}

// wait blocks until every reader reached milestone i and fails tb if one
// cannot or benchDeadline passed.
func (m *milestones) wait(tb testing.TB, i int) {
	tb.Helper()
	a := m.arr[i]
	t := time.NewTimer(benchDeadline)
	defer t.Stop()
	select {
	case <-a.ended:
	case <-t.C:
		tb.Fatalf("readers did not reach %d in time", m.at[i])
	}
	if a.err != nil {
		tb.Fatal(a.err)
	}
}

// drainAll starts one reader per stream that, once start is closed, reads
// into a buffer and discards, the cheapest subscriber there is, until the
// last of the byte milestones at. The same readers serve BPS and the floor;
// their buffers are allocated here, before any timed section.
func drainAll(tb testing.TB, wg *sync.WaitGroup, streams []p2p.Stream, start <-chan struct{}, at ...int) *milestones {
	m := newMilestones(len(streams), at...)
	want := at[len(at)-1]
	abort := make(chan struct{})
	tb.Cleanup(func() { close(abort) }) // before wg is waited for
	for _, s := range streams {
		buf := make([]byte, 16<<10)
		wg.Go(func() {
			select {
			case <-start:
			case <-abort: // the benchmark failed before starting us
				m.fail(0, errors.New("aborted"))
				return
			}
			for got := 0; got < want; {
				n, err := s.Read(buf[:min(len(buf), want-got)])
				m.advance(got, got+n)
				got += n
				if err != nil && got < want {
					m.fail(got, fmt.Errorf("drain after %d of %d bytes: %w", got, want, err))
					return
				}
			}
		})
	}
	return m
}

// measure is the timed section of a fan-out benchmark: wall time is the
// benchmark timer's; CPU time and allocations are read around it.
type measure struct {
	cpu     time.Duration
	mallocs uint64
}

func startMeasure(b *testing.B) *measure {
	runtime.GC() // setup's garbage is not the timed section's
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := &measure{cpu: cpuTime(b), mallocs: ms.Mallocs}
	b.ReportAllocs()
	b.ResetTimer()
	return m
}

// stop ends the timed section and reports per-delivery metrics for b.N
// messages to n subscribers.
func (m *measure) stop(b *testing.B, n int) {
	b.StopTimer()
	cpu := cpuTime(b) - m.cpu
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	d := float64(b.N) * float64(n)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/d, "ns/delivery")
	b.ReportMetric(float64(cpu.Nanoseconds())/d, "cpu-ns/delivery")
	b.ReportMetric(float64(ms.Mallocs-m.mallocs)/d, "allocs/delivery")
}

// cpuLoop runs f under b.Loop and reports, besides ns/op, the process's CPU
// time per call: on a shared machine wall time also counts the time this
// process waited for a core.
func cpuLoop(b *testing.B, f func()) {
	b.ReportAllocs()
	start, n := cpuTime(b), 0
	for b.Loop() {
		f()
		n++
	}
	b.ReportMetric(float64((cpuTime(b)-start).Nanoseconds())/float64(n), "cpu-ns/op")
}

// cpuTime is the user and system CPU time of the process so far, all threads.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
