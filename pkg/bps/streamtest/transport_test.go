// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// arrival is one read: what arrived and when, since the test started.
type arrival struct {
	data string
	at   time.Duration
	err  error
}

// reader returns a handler that reports every read it makes, with its time
// since start, until the stream fails or ends; it then closes its end.
func reader(start time.Time, ch chan<- arrival) p2p.HandlerFunc {
	return func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
		buf := make([]byte, 4096)
		for {
			n, err := s.Read(buf)
			ch <- arrival{data: string(buf[:n]), at: time.Since(start), err: err}
			if err != nil {
				return s.Close()
			}
		}
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const latency = 50 * time.Millisecond
		n := newNetwork(t, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: latency}))
		a, b := n.NewNode(), n.NewNode()
		start := time.Now()
		got := make(chan arrival, 8)
		addHandler(t, b, reader(start, got))
		connect(t, n, a, b)

		s := newStream(t, a, b)
		rtt := time.Since(start) // opening the stream exchanges headers
		if rtt != 2*latency {
			t.Fatalf("stream opened after %s, want a round trip (%s)", rtt, 2*latency)
		}
		if _, err := s.Write([]byte("one")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		if _, err := s.Write([]byte("two")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		for _, want := range []arrival{{"one", rtt + latency, nil}, {"two", rtt + latency + 10*time.Millisecond, nil}, {"", rtt + latency + 10*time.Millisecond, io.EOF}} {
			if a := <-got; a.data != want.data || a.at != want.at || !errors.Is(a.err, want.err) {
				t.Fatalf("read %q at %s (%v), want %q at %s (%v)", a.data, a.at, a.err, want.data, want.at, want.err)
			}
		}
	})
}

// The streams of a link share its bandwidth; a node's uplink is shared by all
// its links.
func TestBandwidth(t *testing.T) {
	t.Parallel()

	t.Run("link", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			n := newNetwork(t, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: time.Millisecond, Bandwidth: 1000}))
			a, b := n.NewNode(), n.NewNode()
			start := time.Now()
			got := make(chan arrival, 8)
			addHandler(t, b, reader(start, got))
			connect(t, n, a, b)

			s1, s2 := newStream(t, a, b), newStream(t, a, b)
			for _, s := range []p2p.Stream{s1, s2} {
				if _, err := s.Write(make([]byte, 500)); err != nil {
					t.Fatal(err)
				}
			}
			// Opening the two streams took two round trips (4 ms); then
			// 500 bytes at 1000 B/s: the first stream's arrive after
			// 0.5 s + latency, the second's queue behind them.
			var times []time.Duration
			for range 2 {
				a := <-got
				for len(a.data) < 500 {
					more := <-got
					a.data += more.data
					a.at = more.at
				}
				times = append(times, a.at)
			}
			if want := []time.Duration{505 * time.Millisecond, 1005 * time.Millisecond}; !slices.Equal(times, want) {
				t.Fatalf("arrivals at %v, want %v", times, want)
			}
		})
	})

	t.Run("uplink", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			n := newNetwork(t)
			a, b, c := n.NewNode(), n.NewNode(), n.NewNode()
			a.SetUplink(1000)
			start := time.Now()
			got := make(chan arrival, 8)
			addHandler(t, b, reader(start, got))
			addHandler(t, c, reader(start, got))
			connect(t, n, a, b)
			connect(t, n, a, c)
			connect(t, n, b, c)

			for _, to := range []*streamtest.Node{b, c} {
				if _, err := newStream(t, a, to).Write(make([]byte, 250)); err != nil {
					t.Fatal(err)
				}
			}
			first, second := <-got, <-got
			if first.at != 250*time.Millisecond || second.at != 500*time.Millisecond {
				t.Fatalf("arrivals at %s and %s, want 250ms and 500ms", first.at, second.at)
			}
			// b's uplink is not a's.
			if _, err := newStream(t, b, c).Write([]byte("x")); err != nil {
				t.Fatal(err)
			}
			if x := <-got; x.at != 500*time.Millisecond {
				t.Fatalf("b's write arrived at %s, want at once (500ms)", x.at)
			}
		})
	})
}

// A lost write arrives a retransmission delay late and holds back the
// stream's later writes; losses are reproducible from the seed.
func TestLoss(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := streamtest.LinkConfig{Latency: 10 * time.Millisecond, Loss: 1, RetransmitDelay: time.Second}
		n := newNetwork(t, streamtest.WithLinkConfig(cfg))
		a, b := n.NewNode(), n.NewNode()
		start := time.Now()
		got := make(chan arrival, 8)
		addHandler(t, b, reader(start, got))
		connect(t, n, a, b)
		s := newStream(t, a, b)
		if _, err := s.Write([]byte("lost")); err != nil {
			t.Fatal(err)
		}
		if err := n.SetLink(a, b, streamtest.LinkConfig{Latency: 10 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Write([]byte("behind")); err != nil {
			t.Fatal(err)
		}
		first := <-got // the stream took 20 ms to open
		if first.at != time.Second+30*time.Millisecond {
			t.Fatalf("lost write arrived at %s, want 1.03s", first.at)
		}
		if first.data != "lostbehind" {
			second := <-got
			if second.data != "behind" || second.at != first.at {
				t.Fatalf("the write behind the lost one arrived at %s, want with it at %s", second.at, first.at)
			}
		}
		ls, ok := a.LinkStats(b.Overlay())
		if !ok || ls.Out.Lost != 1 || ls.Out.Writes != 2 || ls.In.Writes != 0 {
			t.Fatalf("link stats %+v, want 2 writes out, 1 lost", ls)
		}
		if got := n.Stats().Lost; got != 1 {
			t.Fatalf("network lost %d, want 1", got)
		}
	})

	losses := func(seed int64) []bool {
		var out []bool
		synctest.Test(t, func(t *testing.T) {
			n := newNetwork(t, streamtest.WithSeed(seed), streamtest.WithLinkConfig(streamtest.LinkConfig{Loss: 0.5}))
			a, b := n.NewNode(), n.NewNode()
			h, _ := servedStreams()
			addHandler(t, b, h)
			connect(t, n, a, b)
			s := newStream(t, a, b)
			for range 64 {
				before, _ := a.LinkStats(b.Overlay())
				if _, err := s.Write([]byte("x")); err != nil {
					t.Fatal(err)
				}
				after, _ := a.LinkStats(b.Overlay())
				out = append(out, after.Out.Lost > before.Out.Lost)
			}
		})
		return out
	}
	x, y, z := losses(3), losses(3), losses(4)
	if !slices.Equal(x, y) {
		t.Fatal("same seed, different losses")
	}
	if slices.Equal(x, z) {
		t.Fatal("different seeds, same losses")
	}
	if k := len(slices.DeleteFunc(slices.Clone(x), func(l bool) bool { return !l })); k < 16 || k > 48 {
		t.Fatalf("%d of 64 writes lost at loss 0.5", k)
	}
}

// A partition holds links without tearing them down: nothing crosses while it
// holds, what was in flight or written meanwhile arrives after the heal, and
// no disconnect hook runs.
func TestPartition(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const latency = 100 * time.Millisecond
		n := newNetwork(t, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: latency}))
		a, b, c := n.NewNode(), n.NewNode(), n.NewNode()
		names := map[string]string{a.Overlay().ByteString(): "a", b.Overlay().ByteString(): "b", c.Overlay().ByteString(): "c"}
		var log hookLog
		start := time.Now()
		got := make(chan arrival, 8)
		for nd, name := range map[*streamtest.Node]string{a: "a", b: "b", c: "c"} {
			spec := hookSpec(name, names, &log, nil)
			spec.Name, spec.Version = protocolName, protocolVersion
			spec.StreamSpecs = []p2p.StreamSpec{{Name: streamName, Handler: reader(start, got)}}
			if err := nd.AddProtocol(spec); err != nil {
				t.Fatal(err)
			}
		}
		connect(t, n, a, b)
		hooks := len(log.get())

		s := newStream(t, a, b)
		if _, err := s.Write([]byte("in flight")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(40 * time.Millisecond)
		n.Partition([]*streamtest.Node{a, c}) // b is in the rest
		if _, err := s.Write([]byte("held")); err != nil {
			t.Fatal(err)
		}
		if err := n.Connect(c, b); !errors.Is(err, streamtest.ErrUnreachable) {
			t.Fatalf("connect across the partition: %v, want ErrUnreachable", err)
		}
		connect(t, n, a, c) // same side

		opened := make(chan error, 1)
		go func() {
			s2, err := a.NewStream(context.Background(), b.Overlay(), nil, protocolName, protocolVersion, streamName)
			if err == nil {
				_, err = s2.Write([]byte("new"))
			}
			opened <- err
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := a.NewStream(ctx, b.Overlay(), nil, protocolName, protocolVersion, streamName); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("new stream across the partition: %v, want to wait for ctx", err)
		}

		time.Sleep(10 * time.Second)
		select {
		case a := <-got:
			t.Fatalf("read %q at %s while partitioned", a.data, a.at)
		default:
		}
		n.Heal()
		healed := time.Since(start)

		// "in flight" had 60 ms to go when the partition began; "held"
		// leaves at the heal and takes the full latency; "new" waited for
		// the heal, then a round trip to open its stream.
		want := map[string]time.Duration{"in flight": healed + 60*time.Millisecond, "held": healed + latency, "new": healed + 3*latency}
		for len(want) > 0 {
			x := <-got
			w, ok := want[x.data]
			if !ok {
				t.Fatalf("unexpected read %q (%v)", x.data, x.err)
			}
			if x.at != w {
				t.Fatalf("%q arrived at %s, want %s", x.data, x.at, w)
			}
			delete(want, x.data)
		}
		if err := <-opened; err != nil {
			t.Fatalf("new stream after the heal: %v", err)
		}
		if got := log.get()[hooks:]; !slices.Equal(got, []string{"c in a", "a out c"}) {
			t.Fatalf("hooks during the partition %q, want only a and c connecting", got)
		}
		connect(t, n, c, b)
	})
}

// Stop waits for the node's streams to end, refuses new ones meanwhile, and
// then disconnects with the hooks a graceful disconnect runs.
func TestStop(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: 5 * time.Millisecond}))
		a, b := n.NewNode(), n.NewNode()
		names := map[string]string{a.Overlay().ByteString(): "a", b.Overlay().ByteString(): "b"}
		var log hookLog
		served := make(chan p2p.Stream, 1)
		for nd, name := range map[*streamtest.Node]string{a: "a", b: "b"} {
			spec := hookSpec(name, names, &log, nil)
			spec.Name, spec.Version = protocolName, protocolVersion
			spec.StreamSpecs = []p2p.StreamSpec{{Name: streamName, Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
				served <- s
				if _, err := io.ReadAll(s); err != nil {
					return err
				}
				return s.FullClose()
			}}}
			if err := nd.AddProtocol(spec); err != nil {
				t.Fatal(err)
			}
		}
		connect(t, n, a, b)
		s := newStream(t, b, a) // a serves it
		<-served
		hooks := len(log.get())

		stopped := make(chan error, 1)
		go func() { stopped <- a.Stop(context.Background()) }()
		synctest.Wait()
		if _, err := b.NewStream(context.Background(), a.Overlay(), nil, protocolName, protocolVersion, streamName); !errors.Is(err, p2p.ErrPeerNotFound) {
			t.Fatalf("new stream to a stopping node: %v, want ErrPeerNotFound", err)
		}
		select {
		case err := <-stopped:
			t.Fatalf("stop returned (%v) with a stream open", err)
		default:
		}
		if a.Alive() {
			t.Fatal("a stopping node is alive")
		}
		if err := s.FullClose(); err != nil { // the protocol ends its stream
			t.Fatal(err)
		}
		if err := <-stopped; err != nil {
			t.Fatalf("stop: %v", err)
		}
		if got := log.get()[hooks:]; !slices.Equal(got, []string{"a disconnect-out b", "b disconnect-in a"}) {
			t.Fatalf("hooks %q", got)
		}
		if err := n.Connect(b, a); !errors.Is(err, streamtest.ErrKilled) {
			t.Fatalf("connect to a stopped node: %v, want ErrKilled", err)
		}

		// A stream nobody ends: Stop gives up at ctx and tears it down.
		c, d := n.NewNode(), n.NewNode()
		h, _ := servedStreams()
		addHandler(t, d, h)
		connect(t, n, c, d)
		stuck := newStream(t, c, d)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := c.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("stop with a stream open: %v, want deadline exceeded", err)
		}
		if _, err := stuck.Write([]byte("x")); !errors.Is(err, streamtest.ErrStreamReset) {
			t.Fatalf("write after stop: %v, want ErrStreamReset", err)
		}
	})
}

// A killed node comes back as a new node with its overlay, and the traffic
// of the links it had stays counted.
func TestRestart(t *testing.T) {
	t.Parallel()
	n := newNetwork(t)
	a, b, c := n.NewNode(), n.NewNode(), n.NewNode()
	h, _ := servedStreams()
	addHandler(t, a, h)
	connect(t, n, b, a)
	connect(t, n, a, c)
	if _, err := newStream(t, b, a).Write([]byte("12345")); err != nil {
		t.Fatal(err)
	}
	if a.PeersAtExit() != nil {
		t.Fatal("peers at exit of a live node")
	}

	a.Kill()
	peers := a.PeersAtExit()
	if len(peers) != 2 || !slices.ContainsFunc(peers, b.Overlay().Equal) || !slices.ContainsFunc(peers, c.Overlay().Equal) {
		t.Fatalf("peers at exit %v, want b and c", peers)
	}
	if st := b.Stats(); st.Out.Bytes != 5 || st.Out.Writes != 1 {
		t.Fatalf("b's traffic after the link went down %+v, want 5 bytes in 1 write out", st)
	}
	if st := a.Stats(); st.In.Bytes != 5 {
		t.Fatalf("a's traffic %+v, want 5 bytes in", st)
	}

	a2 := n.Restart(a)
	if !a2.Overlay().Equal(a.Overlay()) || !a2.Alive() || a.Alive() {
		t.Fatal("restart: want a live node with the same overlay")
	}
	if _, err := b.NewStream(context.Background(), a2.Overlay(), nil, protocolName, protocolVersion, streamName); !errors.Is(err, p2p.ErrPeerNotFound) {
		t.Fatalf("new stream before reconnecting: %v, want ErrPeerNotFound", err)
	}
	connect(t, n, b, a2)
	if _, err := b.NewStream(context.Background(), a2.Overlay(), nil, protocolName, protocolVersion, streamName); !incompatible(err) {
		t.Fatalf("new stream before the restarted node registered its protocol: %v", err)
	}
	h2, served := servedStreams()
	addHandler(t, a2, h2)
	s := newStream(t, b, a2)
	srv := receive(t, served)
	if _, err := s.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(srv, buf); err != nil || string(buf) != "back" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if ls, ok := b.LinkStats(a2.Overlay()); !ok || ls.Out.Bytes != 4 {
		t.Fatalf("link stats %+v, %v: want 4 bytes out on the new link", ls, ok)
	}
	if st := b.Stats(); st.Out.Bytes != 9 || st.Out.Writes != 2 {
		t.Fatalf("b's traffic %+v, want 9 bytes in 2 writes", st)
	}

	n.Remove(c)
	if c.Alive() {
		t.Fatal("a removed node is alive")
	}
	if got := n.NewNodeWithOverlay(c.Overlay()); !got.Overlay().Equal(c.Overlay()) {
		t.Fatal("overlay of a removed node not reusable")
	}
}

// A steady stream over a link with latency always has writes in flight; what
// the reader keeps per write stays bounded by them, however long it runs.
func TestLatencyBounded(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: 100 * time.Millisecond}))
		a, b := n.NewNode(), n.NewNode()
		h, served := servedStreams()
		addHandler(t, b, h)
		connect(t, n, a, b)
		s := newStream(t, a, b)
		srv := receive(t, served).(*streamtest.Stream)

		const writes = 20000 // one every millisecond: 100 in flight
		done := make(chan error, 1)
		go func() {
			for range writes {
				if _, err := s.Write([]byte("x")); err != nil {
					done <- err
					return
				}
				time.Sleep(time.Millisecond)
			}
			done <- nil
		}()
		buf := make([]byte, 64)
		for got := 0; got < writes; {
			k, err := srv.Read(buf)
			if err != nil {
				t.Fatal(err)
			}
			got += k
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if c := streamtest.MarksCap(srv); c > 1024 {
			t.Fatalf("%d marks kept for %d writes with about 100 in flight", c, writes)
		}
	})
}
