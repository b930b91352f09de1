// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

func TestConnectHooks(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()
	names := map[string]string{a.Overlay().ByteString(): "a", b.Overlay().ByteString(): "b"}
	var log hookLog
	for nd, name := range map[*streamtest.Node]string{a: "a", b: "b"} {
		if err := nd.AddProtocol(hookSpec(name, names, &log, nil)); err != nil {
			t.Fatal(err)
		}
	}

	connect(t, n, a, b)
	if got, want := log.get(), []string{"b in a", "a out b"}; !slices.Equal(got, want) {
		t.Fatalf("connect hooks %q, want %q", got, want)
	}
	if err := n.Connect(b, a); !errors.Is(err, p2p.ErrAlreadyConnected) {
		t.Fatalf("connect again: %v, want ErrAlreadyConnected", err)
	}
	if got := a.Peers(); len(got) != 1 || !got[0].Address.Equal(b.Overlay()) || !got[0].FullNode {
		t.Fatalf("a's peers %v, want b", got)
	}
	if got := b.Peers(); len(got) != 1 || !got[0].Address.Equal(a.Overlay()) {
		t.Fatalf("b's peers %v, want a", got)
	}

	n.Disconnect(a, b)
	if got, want := log.get()[2:], []string{"a disconnect-out b", "b disconnect-in a"}; !slices.Equal(got, want) {
		t.Fatalf("disconnect hooks %q, want %q", got, want)
	}
	if len(a.Peers())+len(b.Peers()) != 0 {
		t.Fatal("still peers after disconnect")
	}
	n.Disconnect(a, b) // no-op
	if got := len(log.get()); got != 4 {
		t.Fatalf("%d hook calls after a second disconnect, want 4", got)
	}
}

func TestConnectHookFails(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()
	names := map[string]string{a.Overlay().ByteString(): "a", b.Overlay().ByteString(): "b"}
	var log hookLog
	refused := errors.New("refused")
	if err := a.AddProtocol(hookSpec("a", names, &log, nil)); err != nil {
		t.Fatal(err)
	}
	if err := b.AddProtocol(hookSpec("b", names, &log, refused)); err != nil {
		t.Fatal(err)
	}

	if err := n.Connect(a, b); !errors.Is(err, refused) {
		t.Fatalf("connect: %v, want %v", err, refused)
	}
	// b refused, so b disconnected a; a's ConnectOut never ran.
	want := []string{"b in a", "b disconnect-out a", "a disconnect-in b"}
	if got := log.get(); !slices.Equal(got, want) {
		t.Fatalf("hooks %q, want %q", got, want)
	}
	if len(a.Peers())+len(b.Peers()) != 0 {
		t.Fatal("connected after a failed hook")
	}
}

func TestDisconnectEndsStreams(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()
	ctxDone := make(chan error, 1)
	addHandler(t, b, func(ctx context.Context, _ p2p.Peer, s p2p.Stream) error {
		<-ctx.Done()
		_, err := s.Read(make([]byte, 1))
		ctxDone <- err
		return nil
	})
	connect(t, n, a, b)
	s := newStream(t, a, b)

	n.Disconnect(a, b)
	if err := receive(t, ctxDone); !errors.Is(err, streamtest.ErrStreamReset) {
		t.Fatalf("handler read after disconnect: %v, want ErrStreamReset", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, streamtest.ErrStreamReset) {
		t.Fatalf("caller write after disconnect: %v, want ErrStreamReset", err)
	}
	if _, err := a.NewStream(context.Background(), b.Overlay(), nil, protocolName, protocolVersion, streamName); !errors.Is(err, p2p.ErrPeerNotFound) {
		t.Fatalf("new stream after disconnect: %v, want ErrPeerNotFound", err)
	}
	connect(t, n, a, b) // reconnecting works
}

func TestBlockPeerError(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()
	misbehaved := errors.New("misbehaved")
	addHandler(t, b, func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
		if _, err := s.Read(make([]byte, 1)); err != nil {
			return err
		}
		return p2p.NewBlockPeerError(time.Hour, misbehaved)
	})
	connect(t, n, a, b)

	s := newStream(t, a, b)
	readErr := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1))
		readErr <- err
	}()
	if _, err := s.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, readErr); !errors.Is(err, streamtest.ErrStreamReset) {
		t.Fatalf("caller's pending read: %v, want ErrStreamReset", err)
	}

	// The blocklisting happened before the read failed: no waiting needed.
	if _, err := a.NewStream(context.Background(), b.Overlay(), nil, protocolName, protocolVersion, streamName); !errors.Is(err, p2p.ErrPeerBlocklisted) {
		t.Fatalf("new stream to the blocklisting node: %v, want ErrPeerBlocklisted", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := b.WaitBlocklisted(ctx, a.Overlay()); err != nil {
		t.Fatalf("wait blocklisted: %v", err)
	}
	if ok, err := b.Blocklisted(a.Overlay()); !ok || err != nil {
		t.Fatalf("blocklisted: %v, %v", ok, err)
	}
	want := []streamtest.Blocklisting{{Peer: a.Overlay(), Duration: time.Hour, Reason: misbehaved.Error()}}
	if got := b.Blocklists(); len(got) != 1 || !got[0].Peer.Equal(want[0].Peer) || got[0].Duration != want[0].Duration || got[0].Reason != want[0].Reason {
		t.Fatalf("blocklists %+v, want %+v", got, want)
	}
	if len(a.Peers())+len(b.Peers()) != 0 {
		t.Fatal("still connected after blocklisting")
	}
	if err := n.Connect(a, b); !errors.Is(err, p2p.ErrPeerBlocklisted) {
		t.Fatalf("connect: %v, want ErrPeerBlocklisted", err)
	}
	errs := b.HandlerErrors()
	if len(errs) != 1 || !errors.Is(errs[0].Err, misbehaved) || !errs[0].Peer.Equal(a.Overlay()) ||
		errs[0].Protocol != p2p.NewSwarmStreamName(protocolName, protocolVersion, streamName) {
		t.Fatalf("handler errors %+v", errs)
	}
}

func TestWaitBlocklisted(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()

	waited := make(chan error, 1)
	go func() { waited <- a.WaitBlocklisted(context.Background(), b.Overlay()) }()
	// Someone else first: the waiter keeps waiting.
	if err := a.Blocklist(swarm.RandAddress(t), 0, "other"); err != nil {
		t.Fatal(err)
	}
	if err := a.Blocklist(b.Overlay(), 0, "b"); err != nil {
		t.Fatal(err)
	}
	if err := receive(t, waited); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.WaitBlocklisted(ctx, n.NewNode().Overlay()); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with cancelled context: %v", err)
	}
}

func TestBlocklistExpires(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		a, b := n.NewNode(), n.NewNode()
		if err := a.Blocklist(b.Overlay(), time.Minute, "timeout"); err != nil {
			t.Fatal(err)
		}
		if err := n.Connect(b, a); !errors.Is(err, p2p.ErrPeerBlocklisted) {
			t.Fatalf("connect while blocklisted: %v", err)
		}
		time.Sleep(time.Minute)
		if ok, _ := a.Blocklisted(b.Overlay()); ok {
			t.Fatal("still blocklisted after the duration")
		}
		connect(t, n, b, a)
	})
}

func TestDisconnectError(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()
	addHandler(t, b, func(context.Context, p2p.Peer, p2p.Stream) error {
		return p2p.NewDisconnectError(errors.New("go away"))
	})
	connect(t, n, a, b)

	s := newStream(t, a, b)
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, streamtest.ErrStreamReset) {
		t.Fatalf("caller read: %v, want ErrStreamReset", err)
	}
	if len(b.Blocklists()) != 0 {
		t.Fatal("blocklisted on a disconnect error")
	}
	if _, err := a.NewStream(context.Background(), b.Overlay(), nil, protocolName, protocolVersion, streamName); !errors.Is(err, p2p.ErrPeerNotFound) {
		t.Fatalf("new stream after disconnect: %v, want ErrPeerNotFound", err)
	}
	connect(t, n, a, b)
}

// Like bee, a plain handler error is recorded and the stream left alone.
func TestHandlerErrorLeavesStream(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t)
		a, b := n.NewNode(), n.NewNode()
		failed := errors.New("failed")
		addHandler(t, b, func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			if _, err := s.Write([]byte("partial")); err != nil {
				return err
			}
			return failed
		})
		connect(t, n, a, b)

		s := newStream(t, a, b)
		got := make([]byte, len("partial"))
		if _, err := io.ReadFull(s, got); err != nil || string(got) != "partial" {
			t.Fatalf("read %q, %v", got, err)
		}
		synctest.Wait() // the handler goroutine has returned

		errs := b.HandlerErrors()
		if len(errs) != 1 || !errors.Is(errs[0].Err, failed) {
			t.Fatalf("handler errors %+v", errs)
		}
		if len(a.Peers()) != 1 {
			t.Fatal("disconnected on a plain handler error")
		}
		// Nobody closed the handler's end: the caller's read still waits.
		readErr := make(chan error, 1)
		go func() {
			_, err := s.Read(make([]byte, 1))
			readErr <- err
		}()
		synctest.Wait()
		select {
		case err := <-readErr:
			t.Fatalf("read returned %v on a stream the handler left open", err)
		default:
		}
		if err := s.Reset(); err != nil {
			t.Fatal(err)
		}
		if err := <-readErr; !errors.Is(err, streamtest.ErrStreamReset) {
			t.Fatalf("read after reset: %v", err)
		}
	})
}

func TestNewStreamErrors(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b, c := n.NewNode(), n.NewNode(), n.NewNode()
	h, _ := servedStreams()
	if err := b.AddProtocol(p2p.ProtocolSpec{Name: protocolName, Version: "1.2.0", StreamSpecs: []p2p.StreamSpec{{Name: streamName, Handler: h}}}); err != nil {
		t.Fatal(err)
	}
	connect(t, n, a, b)

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()

	for _, tc := range []struct {
		name    string
		ctx     context.Context
		to      swarm.Address
		proto   string
		version string
		stream  string
		check   func(error) bool
	}{
		{"not connected", context.Background(), c.Overlay(), protocolName, "1.2.0", streamName, func(err error) bool { return errors.Is(err, p2p.ErrPeerNotFound) }},
		{"unknown node", context.Background(), swarm.RandAddress(t), protocolName, "1.2.0", streamName, func(err error) bool { return errors.Is(err, p2p.ErrPeerNotFound) }},
		{"cancelled", cancelled, b.Overlay(), protocolName, "1.2.0", streamName, func(err error) bool { return errors.Is(err, context.Canceled) }},
		{"unknown protocol", context.Background(), b.Overlay(), "other", "1.2.0", streamName, incompatible},
		{"unknown stream", context.Background(), b.Overlay(), protocolName, "1.2.0", "other", incompatible},
		{"other major", context.Background(), b.Overlay(), protocolName, "2.0.0", streamName, incompatible},
		{"newer minor", context.Background(), b.Overlay(), protocolName, "1.3.0", streamName, incompatible},
		{"older minor", context.Background(), b.Overlay(), protocolName, "1.1.0", streamName, nil},
		{"other patch", context.Background(), b.Overlay(), protocolName, "1.2.7", streamName, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := a.NewStream(tc.ctx, tc.to, nil, tc.proto, tc.version, tc.stream)
			if tc.check == nil {
				if err != nil {
					t.Fatalf("new stream: %v", err)
				}
				_ = s.Reset()
				return
			}
			if !tc.check(err) {
				t.Fatalf("new stream: %v", err)
			}
		})
	}
}

func incompatible(err error) bool {
	var ie *p2p.IncompatibleStreamError
	return errors.As(err, &ie) && errors.Is(err, streamtest.ErrStreamNotSupported)
}

func TestAddProtocolErrors(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a := n.NewNode()
	spec := p2p.ProtocolSpec{Name: protocolName, Version: protocolVersion}
	if err := a.AddProtocol(spec); err != nil {
		t.Fatal(err)
	}
	if err := a.AddProtocol(spec); err == nil {
		t.Fatal("registering twice: want error")
	}
	if err := a.AddProtocol(p2p.ProtocolSpec{Name: "bad", Version: "one"}); err == nil {
		t.Fatal("bad version: want error")
	}
}

func TestKill(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b, c := n.NewNode(), n.NewNode(), n.NewNode()
	names := map[string]string{a.Overlay().ByteString(): "a", b.Overlay().ByteString(): "b", c.Overlay().ByteString(): "c"}
	var log hookLog

	// Each node's handler reports its read, then its context's end.
	type handlerEvents struct{ reads, ctxs chan error }
	handler := func(ev handlerEvents) p2p.HandlerFunc {
		return func(ctx context.Context, _ p2p.Peer, s p2p.Stream) error {
			_, err := s.Read(make([]byte, 1))
			ev.reads <- err
			<-ctx.Done()
			ev.ctxs <- ctx.Err()
			return nil
		}
	}
	events := map[*streamtest.Node]handlerEvents{}
	for nd, name := range map[*streamtest.Node]string{a: "a", b: "b", c: "c"} {
		events[nd] = handlerEvents{reads: make(chan error, 4), ctxs: make(chan error, 4)}
		spec := hookSpec(name, names, &log, nil)
		spec.StreamSpecs = []p2p.StreamSpec{{Name: streamName, Handler: handler(events[nd])}}
		spec.Name, spec.Version = protocolName, protocolVersion
		if err := nd.AddProtocol(spec); err != nil {
			t.Fatal(err)
		}
	}
	connect(t, n, a, b)
	connect(t, n, c, a)
	connect(t, n, b, c)
	before := len(log.get())

	ab, ca, bc := newStream(t, a, b), newStream(t, c, a), newStream(t, b, c)
	a.Kill()

	for _, nd := range []*streamtest.Node{b, a} {
		name := names[nd.Overlay().ByteString()]
		if err := receive(t, events[nd].reads); !errors.Is(err, streamtest.ErrStreamReset) {
			t.Fatalf("handler on %s: read %v, want ErrStreamReset", name, err)
		}
		if err := receive(t, events[nd].ctxs); !errors.Is(err, context.Canceled) {
			t.Fatalf("handler on %s: context %v, want cancelled", name, err)
		}
	}
	for _, s := range []p2p.Stream{ab, ca} {
		if _, err := s.Write([]byte("x")); !errors.Is(err, streamtest.ErrStreamReset) {
			t.Fatalf("write on a killed stream: %v, want ErrStreamReset", err)
		}
	}
	got := log.get()[before:]
	slices.Sort(got)
	if want := []string{"b disconnect-in a", "c disconnect-in a"}; !slices.Equal(got, want) {
		t.Fatalf("hooks after kill %q, want %q", got, want)
	}
	if len(a.Peers()) != 0 || len(b.Peers()) != 1 || len(c.Peers()) != 1 {
		t.Fatalf("peers after kill: a %v, b %v, c %v", a.Peers(), b.Peers(), c.Peers())
	}
	if _, err := b.NewStream(context.Background(), a.Overlay(), nil, protocolName, protocolVersion, streamName); !errors.Is(err, p2p.ErrPeerNotFound) {
		t.Fatalf("new stream to a killed node: %v, want ErrPeerNotFound", err)
	}
	if err := n.Connect(b, a); !errors.Is(err, streamtest.ErrKilled) {
		t.Fatalf("connect to a killed node: %v, want ErrKilled", err)
	}

	// b and c are untouched.
	if _, err := bc.Write([]byte("x")); err != nil {
		t.Fatalf("write between survivors: %v", err)
	}
	if err := receive(t, events[c].reads); err != nil {
		t.Fatalf("survivor handler read: %v", err)
	}
	select {
	case err := <-events[c].ctxs:
		t.Fatalf("survivor handler context ended: %v", err)
	default:
	}
	n.Disconnect(b, c)
	if err := receive(t, events[c].ctxs); !errors.Is(err, context.Canceled) {
		t.Fatalf("survivor handler context: %v, want cancelled", err)
	}
}

func TestCloseWaitsForHandlers(t *testing.T) {
	t.Parallel()

	n := streamtest.New()
	a := n.NewNode()
	const peers = 5
	var finished atomic.Int32
	started := make(chan struct{}, peers)
	for range peers {
		b := n.NewNode()
		addHandler(t, b, func(ctx context.Context, _ p2p.Peer, s p2p.Stream) error {
			started <- struct{}{}
			<-ctx.Done()
			_, err := s.Read(make([]byte, 1))
			if errors.Is(err, streamtest.ErrStreamReset) {
				finished.Add(1)
			}
			return nil
		})
		connect(t, n, a, b)
		newStream(t, a, b)
	}
	for range peers {
		receive(t, started)
	}

	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if got := finished.Load(); got != peers {
		t.Fatalf("%d handlers finished when Close returned, want %d", got, peers)
	}
	if _, err := a.NewStream(context.Background(), swarm.RandAddress(t), nil, protocolName, protocolVersion, streamName); !errors.Is(err, streamtest.ErrClosed) {
		t.Fatalf("new stream after close: %v, want ErrClosed", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
}

func TestCloseTimesOut(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		n := streamtest.New()
		a, b := n.NewNode(), n.NewNode()
		release := make(chan struct{})
		addHandler(t, b, func(context.Context, p2p.Peer, p2p.Stream) error {
			<-release // ignores its context
			return nil
		})
		connect(t, n, a, b)
		newStream(t, a, b)

		start := time.Now()
		if err := n.Close(); err == nil {
			t.Fatal("close with a stuck handler: want error")
		}
		if d := time.Since(start); d != 5*time.Second {
			t.Fatalf("close waited %s, want 5s", d)
		}
		close(release)
		if err := n.Close(); err != nil {
			t.Fatalf("close after the handler returned: %v", err)
		}
	})
}

func TestOverlays(t *testing.T) {
	t.Parallel()

	overlays := func(opts ...streamtest.Option) []swarm.Address {
		n := streamtest.New(opts...)
		defer func() { _ = n.Close() }()
		return []swarm.Address{n.NewNode().Overlay(), n.NewNode().Overlay()}
	}
	x, y, z := overlays(streamtest.WithSeed(7)), overlays(streamtest.WithSeed(7)), overlays(streamtest.WithSeed(8))
	if !x[0].Equal(y[0]) || !x[1].Equal(y[1]) {
		t.Fatal("same seed, different overlays")
	}
	if x[0].Equal(x[1]) || x[0].Equal(z[0]) {
		t.Fatal("overlays repeat")
	}

	n := newNetwork(t)
	o := swarm.RandAddress(t)
	if got := n.NewNodeWithOverlay(o).Overlay(); !got.Equal(o) {
		t.Fatalf("overlay %s, want %s", got, o)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("duplicate overlay: want panic")
		}
	}()
	n.NewNodeWithOverlay(o)
}
