// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"testing/synctest"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"github.com/libp2p/go-libp2p/core/network"
)

// An echo handler stays resident for the whole conversation and both ends
// close the way bee handlers do.
func TestEchoLongLived(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()

	type result struct {
		peer p2p.Peer
		err  error
	}
	done := make(chan result, 1)
	addHandler(t, b, func(ctx context.Context, p p2p.Peer, s p2p.Stream) (err error) {
		defer func() { done <- result{p, err} }()
		buf := make([]byte, 7)
		for {
			k, rerr := s.Read(buf)
			if errors.Is(rerr, io.EOF) {
				break
			}
			if rerr != nil {
				_ = s.Reset()
				return rerr
			}
			if _, err := s.Write(buf[:k]); err != nil {
				_ = s.Reset()
				return err
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("handler context cancelled: %w", ctx.Err())
		}
		return s.FullClose()
	})
	connect(t, n, a, b)

	s := newStream(t, a, b)
	total := 0
	for i := range 200 {
		msg := fmt.Appendf(nil, "message %d", i)
		if _, err := s.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(s, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("echo %d: got %q, want %q", i, got, msg)
		}
		total += len(msg)
	}
	if err := s.FullClose(); err != nil {
		t.Fatalf("client full close: %v", err)
	}

	r := receive(t, done)
	if r.err != nil {
		t.Fatalf("handler: %v", r.err)
	}
	if !r.peer.Address.Equal(a.Overlay()) || !r.peer.FullNode {
		t.Fatalf("handler peer %+v, want %s, full node", r.peer, a.Overlay())
	}

	st := s.(*streamtest.Stream).Stats()
	if st.Out.Bytes != uint64(total) || st.In.Bytes != uint64(total) || st.Out.Writes != 200 {
		t.Fatalf("stream stats %+v, want %d bytes each way and 200 writes out", st, total)
	}
	ns := n.Stats()
	if ns.Bytes != 2*uint64(total) || ns.StreamsOpened != 1 || ns.StreamsReset != 0 {
		t.Fatalf("network stats %+v", ns)
	}
	if errs := b.HandlerErrors(); len(errs) != 0 {
		t.Fatalf("handler errors %v", errs)
	}
}

func TestHalfClose(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()

	type result struct {
		read     []byte
		readErr  error
		writeErr error
	}
	done := make(chan result, 1)
	addHandler(t, b, func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
		var r result
		r.read, r.readErr = io.ReadAll(s) // EOF once the caller closed
		_, r.writeErr = s.Write([]byte("late"))
		done <- r
		return s.Close()
	})
	connect(t, n, a, b)

	s := newStream(t, a, b)
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	r := receive(t, done)
	if r.readErr != nil || string(r.read) != "hello" {
		t.Fatalf("handler read %q, %v; want hello, nil", r.read, r.readErr)
	}
	if !errors.Is(r.writeErr, streamtest.ErrStreamClosed) {
		t.Fatalf("handler write after caller closed: %v, want ErrStreamClosed", r.writeErr)
	}
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, streamtest.ErrStreamClosed) {
		t.Fatalf("read after close: %v, want ErrStreamClosed", err)
	}
	if _, err := s.Write([]byte("x")); !errors.Is(err, streamtest.ErrStreamClosed) {
		t.Fatalf("write after close: %v, want ErrStreamClosed", err)
	}
}

// After the remote closed its write side, reads drain what it wrote, then
// return io.EOF, while writes in the other direction still work.
func TestReadEOFAfterRemoteClose(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()
	h, served := servedStreams()
	addHandler(t, b, h)
	connect(t, n, a, b)

	s := newStream(t, a, b)
	srv := receive(t, served)
	if _, err := srv.Write([]byte("bye")); err != nil {
		t.Fatal(err)
	}
	// FullClose waits for the caller's EOF, so run it aside.
	closed := make(chan error, 1)
	go func() { closed <- srv.FullClose() }()

	got, err := io.ReadAll(s)
	if err != nil || string(got) != "bye" {
		t.Fatalf("read %q, %v; want bye, nil", got, err)
	}
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read after EOF: %v, want io.EOF", err)
	}
	if err := s.FullClose(); err != nil {
		t.Fatalf("caller full close: %v", err)
	}
	if err := receive(t, closed); err != nil {
		t.Fatalf("handler full close: %v", err)
	}
}

func TestFullClose(t *testing.T) {
	t.Parallel()

	t.Run("unread data", func(t *testing.T) {
		t.Parallel()
		n := newNetwork(t)
		a, b := n.NewNode(), n.NewNode()
		h, served := servedStreams()
		addHandler(t, b, h)
		connect(t, n, a, b)

		s := newStream(t, a, b)
		srv := receive(t, served)
		if _, err := srv.Write([]byte("unread")); err != nil {
			t.Fatal(err)
		}
		if err := s.FullClose(); err == nil {
			t.Fatal("full close with unread data: want error")
		}
		if _, err := srv.Read(make([]byte, 1)); !errors.Is(err, streamtest.ErrStreamReset) {
			t.Fatalf("remote read: %v, want ErrStreamReset", err)
		}
	})

	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) {
			n := newNetwork(t, streamtest.WithFullCloseTimeout(streamtest.DefaultFullCloseTimeout))
			a, b := n.NewNode(), n.NewNode()
			h, served := servedStreams()
			addHandler(t, b, h)
			connect(t, n, a, b)

			s := newStream(t, a, b)
			srv := receive(t, served)
			readErr := make(chan error, 1)
			go func() {
				_, err := io.ReadAll(srv) // sees EOF, never closes
				if err == nil {
					_, err = srv.Read(make([]byte, 1))
				}
				readErr <- err
			}()
			if err := s.FullClose(); !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("full close without remote EOF: %v, want deadline exceeded", err)
			}
			if err := <-readErr; !errors.Is(err, io.EOF) {
				t.Fatalf("remote read: %v, want io.EOF", err)
			}
			if _, err := srv.Write([]byte("x")); !errors.Is(err, streamtest.ErrStreamReset) {
				t.Fatalf("remote write after timeout: %v, want ErrStreamReset", err)
			}
		})
	})
}

func TestReset(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()
	h, served := servedStreams()
	addHandler(t, b, h)
	connect(t, n, a, b)

	pendingRead := func(s p2p.Stream) <-chan error {
		ch := make(chan error, 1)
		go func() {
			_, err := s.Read(make([]byte, 1))
			ch <- err
		}()
		return ch
	}
	check := func(t *testing.T, what string, err error) {
		t.Helper()
		if !errors.Is(err, streamtest.ErrStreamReset) || !errors.Is(err, network.ErrReset) {
			t.Fatalf("%s: %v, want ErrStreamReset and network.ErrReset", what, err)
		}
	}

	// The caller resets; the handler's pending read fails.
	s := newStream(t, a, b)
	srv := receive(t, served)
	srvRead := pendingRead(srv)
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	check(t, "handler pending read", receive(t, srvRead))
	_, err := srv.Write([]byte("x"))
	check(t, "handler write", err)
	_, err = s.Read(make([]byte, 1))
	check(t, "caller read", err)

	// The handler resets; the caller's pending read fails.
	s = newStream(t, a, b)
	srv = receive(t, served)
	callerRead := pendingRead(s)
	if err := srv.Reset(); err != nil {
		t.Fatal(err)
	}
	check(t, "caller pending read", receive(t, callerRead))
	_, err = s.Write([]byte("x"))
	check(t, "caller write", err)

	if got := n.Stats(); got.StreamsOpened != 2 || got.StreamsReset != 2 {
		t.Fatalf("stats %+v, want 2 opened, 2 reset", got)
	}
}

// A full buffer blocks the writer until the reader drains it.
func TestBackPressure(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		n := newNetwork(t, streamtest.WithBufferSize(8))
		a, b := n.NewNode(), n.NewNode()
		h, served := servedStreams()
		addHandler(t, b, h)
		connect(t, n, a, b)

		s := newStream(t, a, b)
		srv := receive(t, served)

		msg := []byte("0123456789abcdefghij") // 20 bytes, buffer holds 8
		wrote := make(chan error, 1)
		go func() {
			_, err := s.Write(msg)
			wrote <- err
		}()

		outBytes := func() uint64 { return s.(*streamtest.Stream).Stats().Out.Bytes }
		blocked := func(t *testing.T, wantBuffered uint64) {
			t.Helper()
			synctest.Wait() // the writer is parked on the full buffer
			select {
			case err := <-wrote:
				t.Fatalf("write returned (%v) while the buffer is full", err)
			default:
			}
			if got := outBytes(); got != wantBuffered {
				t.Fatalf("buffered %d bytes, want %d", got, wantBuffered)
			}
		}

		blocked(t, 8)
		got := make([]byte, 20)
		if _, err := io.ReadFull(srv, got[:5]); err != nil {
			t.Fatal(err)
		}
		blocked(t, 13)
		if _, err := io.ReadFull(srv, got[5:]); err != nil {
			t.Fatal(err)
		}
		if err := <-wrote; err != nil {
			t.Fatalf("write: %v", err)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("read %q, want %q", got, msg)
		}
	})
}

// A writer blocked on a full buffer is released by a reset and by the
// reader closing its end.
func TestBlockedWriterReleased(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name    string
		release func(caller, handler p2p.Stream) error
		want    error
	}{
		{"reset", func(_, h p2p.Stream) error { return h.Reset() }, streamtest.ErrStreamReset},
		{"reader closes", func(_, h p2p.Stream) error { return h.Close() }, streamtest.ErrStreamClosed},
		{"writer resets", func(c, _ p2p.Stream) error { return c.Reset() }, streamtest.ErrStreamReset},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				n := newNetwork(t, streamtest.WithBufferSize(4))
				a, b := n.NewNode(), n.NewNode()
				h, served := servedStreams()
				addHandler(t, b, h)
				connect(t, n, a, b)

				s := newStream(t, a, b)
				srv := receive(t, served)
				wrote := make(chan error, 1)
				go func() {
					_, err := s.Write(make([]byte, 10))
					wrote <- err
				}()
				synctest.Wait()
				if err := tc.release(s, srv); err != nil {
					t.Fatal(err)
				}
				if err := <-wrote; !errors.Is(err, tc.want) {
					t.Fatalf("blocked write: %v, want %v", err, tc.want)
				}
			})
		})
	}
}

func TestHeaders(t *testing.T) {
	t.Parallel()

	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()

	type seen struct {
		headers, response p2p.Headers
		headlerPeer       []byte
	}
	done := make(chan seen, 1)
	var headlerPeer []byte
	err := b.AddProtocol(p2p.ProtocolSpec{
		Name:    protocolName,
		Version: protocolVersion,
		StreamSpecs: []p2p.StreamSpec{{
			Name: streamName,
			Headler: func(h p2p.Headers, peer swarm.Address) p2p.Headers {
				headlerPeer = peer.Bytes()
				return p2p.Headers{"answer": append([]byte("re: "), h["question"]...)}
			},
			Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
				done <- seen{s.Headers(), s.ResponseHeaders(), headlerPeer}
				return s.FullClose()
			},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	connect(t, n, a, b)

	s, err := a.NewStream(context.Background(), b.Overlay(), p2p.Headers{"question": []byte("why")}, protocolName, protocolVersion, streamName)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s.Headers()["answer"]); got != "re: why" {
		t.Fatalf("caller Headers()[answer] = %q, want %q", got, "re: why")
	}
	if s.ResponseHeaders() != nil {
		t.Fatalf("caller ResponseHeaders() = %v, want nil as in bee", s.ResponseHeaders())
	}
	got := receive(t, done)
	if string(got.headers["question"]) != "why" {
		t.Fatalf("handler Headers() = %v", got.headers)
	}
	if string(got.response["answer"]) != "re: why" {
		t.Fatalf("handler ResponseHeaders() = %v", got.response)
	}
	if !bytes.Equal(got.headlerPeer, a.Overlay().Bytes()) {
		t.Fatalf("headler peer %x, want %s", got.headlerPeer, a.Overlay())
	}
	if err := s.FullClose(); err != nil {
		t.Fatal(err)
	}

	// No headers sent: the handler still gets a map, as over libp2p.
	h, served := servedStreams()
	if err := b.AddProtocol(p2p.ProtocolSpec{Name: "plain", Version: "1.0.0", StreamSpecs: []p2p.StreamSpec{{Name: streamName, Handler: h}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.NewStream(context.Background(), b.Overlay(), nil, "plain", "1.0.0", streamName); err != nil {
		t.Fatal(err)
	}
	if hs := receive(t, served).Headers(); hs == nil || len(hs) != 0 {
		t.Fatalf("handler Headers() = %#v, want empty map", hs)
	}
}
