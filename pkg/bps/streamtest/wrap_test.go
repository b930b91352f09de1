// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest_test

import (
	"bytes"
	"context"
	"io"
	"sync"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// upper writes what it is given in upper case: a wire altered.
type upper struct{ p2p.Stream }

func (u upper) Write(p []byte) (int, error) { return u.Stream.Write(bytes.ToUpper(p)) }

// A node's stream wrapper sees every stream its side holds — the one it
// dialed and the one its handler was given, each with the peer at the
// other end — and what it writes is what the peer reads; the peer's own
// streams are untouched.
func TestStreamWrapper(t *testing.T) {
	t.Parallel()
	n := newNetwork(t)
	a, b := n.NewNode(), n.NewNode()
	type seen struct {
		peer   swarm.Address
		dialed bool
	}
	var mu sync.Mutex
	var got []seen
	b.SetStreamWrapper(func(s p2p.Stream, peer swarm.Address, dialed bool) p2p.Stream {
		mu.Lock()
		got = append(got, seen{peer, dialed})
		mu.Unlock()
		return upper{s}
	})
	// b echoes what a sends, upper-cased by its wrapper.
	addHandler(t, b, func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(s, buf); err != nil {
			return err
		}
		if _, err := s.Write(buf); err != nil {
			return err
		}
		return s.FullClose()
	})
	addHandler(t, a, func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
		buf := make([]byte, 5)
		if _, err := io.ReadFull(s, buf); err != nil {
			return err
		}
		_, err := s.Write(buf)
		_ = s.FullClose()
		return err
	})
	connect(t, n, a, b)

	s := newStream(t, a, b) // a dials: a's stream is not wrapped, b's handler's is
	if _, err := s.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "HELLO" {
		t.Fatalf("a read %q, %v; want HELLO", buf, err)
	}
	_ = s.FullClose()

	s = newStream(t, b, a) // b dials: its stream is wrapped
	if _, err := s.Write([]byte("again")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "AGAIN" {
		t.Fatalf("b read %q, %v; want AGAIN (a echoes what b's wrapper wrote)", buf, err)
	}
	_ = s.FullClose()

	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || !got[0].peer.Equal(a.Overlay()) || got[0].dialed || !got[1].peer.Equal(a.Overlay()) || !got[1].dialed {
		t.Fatalf("wrapper saw %+v", got)
	}
	b.SetStreamWrapper(nil)
}
