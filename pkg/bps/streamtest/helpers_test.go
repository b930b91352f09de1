// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

const (
	protocolName    = "test"
	protocolVersion = "1.0.0"
	streamName      = "s"

	// waitTimeout only bounds how long a broken test hangs.
	waitTimeout = 10 * time.Second
)

func newNetwork(t *testing.T, opts ...streamtest.Option) *streamtest.Network {
	t.Helper()
	n := streamtest.New(opts...)
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close network: %v", err)
		}
	})
	return n
}

func addHandler(t *testing.T, nd *streamtest.Node, h p2p.HandlerFunc) {
	t.Helper()
	err := nd.AddProtocol(p2p.ProtocolSpec{
		Name:        protocolName,
		Version:     protocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: streamName, Handler: h}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func connect(t *testing.T, n *streamtest.Network, a, b *streamtest.Node) {
	t.Helper()
	if err := n.Connect(a, b); err != nil {
		t.Fatalf("connect: %v", err)
	}
}

func newStream(t *testing.T, from, to *streamtest.Node) p2p.Stream {
	t.Helper()
	s, err := from.NewStream(context.Background(), to.Overlay(), nil, protocolName, protocolVersion, streamName)
	if err != nil {
		t.Fatalf("new stream: %v", err)
	}
	return s
}

// receive returns the next value from ch or fails the test.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatal("timed out")
		panic("unreachable")
	}
}

// servedStreams is a handler that hands its stream to the test and stays
// resident until its context is cancelled.
func servedStreams() (p2p.HandlerFunc, <-chan p2p.Stream) {
	ch := make(chan p2p.Stream, 16)
	return func(ctx context.Context, _ p2p.Peer, s p2p.Stream) error {
		ch <- s
		<-ctx.Done()
		return nil
	}, ch
}

// hookLog records the connect and disconnect hooks that ran.
type hookLog struct {
	mu     sync.Mutex
	events []string
}

func (l *hookLog) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *hookLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.events...)
}

// hookSpec is a protocol whose hooks log "<node> <hook> <peer>".
func hookSpec(name string, names map[string]string, log *hookLog, connectInErr error) p2p.ProtocolSpec {
	ev := func(hook string, p p2p.Peer) string { return name + " " + hook + " " + names[p.Address.ByteString()] }
	return p2p.ProtocolSpec{
		Name:    "hooks",
		Version: "1.0.0",
		ConnectIn: func(ctx context.Context, p p2p.Peer) error {
			log.add(ev("in", p))
			return connectInErr
		},
		ConnectOut: func(ctx context.Context, p p2p.Peer) error {
			log.add(ev("out", p))
			return nil
		},
		DisconnectIn: func(p p2p.Peer) error {
			log.add(ev("disconnect-in", p))
			return nil
		},
		DisconnectOut: func(p p2p.Peer) error {
			log.add(ev("disconnect-out", p))
			return nil
		},
	}
}
