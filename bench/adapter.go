// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// This file runs pkg/bps, unchanged, over libp2p host streams: bee's
// p2p.Streamer and p2p.Stream implemented on a go-libp2p host. bee's own
// pkg/p2p/libp2p cannot be used here (it is built against the go-libp2p
// bee pins, older than the one go-libp2p-pubsub needs), and BPS needs only
// what is below: open a stream to an overlay, and a handler per stream.
//
// What bee's libp2p service does and this adapter leaves out: the bzz
// handshake (overlays come from the directory instead) and the headers
// exchanged when a stream opens (BPS sends none). Neither happens per
// message, so neither changes what the harness measures.

// directory maps overlays to libp2p peer ids and back, for every node of
// one run. It is safe for concurrent use.
type directory struct {
	mu       sync.Mutex // guards both maps
	peers    map[string]peer.ID
	overlays map[peer.ID]swarm.Address
}

func newDirectory() *directory {
	return &directory{peers: make(map[string]peer.ID), overlays: make(map[peer.ID]swarm.Address)}
}

// add derives the overlay of id (keccak256 of the peer id) and records both
// directions.
func (d *directory) add(id peer.ID) (swarm.Address, error) {
	h, err := crypto.LegacyKeccak256([]byte(id))
	if err != nil {
		return swarm.ZeroAddress, fmt.Errorf("overlay of %s: %w", id, err)
	}
	a := swarm.NewAddress(h)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.peers[a.ByteString()] = id
	d.overlays[id] = a
	return a, nil
}

func (d *directory) peer(a swarm.Address) (peer.ID, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	id, ok := d.peers[a.ByteString()]
	return id, ok
}

func (d *directory) overlay(id peer.ID) (swarm.Address, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.overlays[id]
	return a, ok
}

// streamer is one node's bee p2p layer over its libp2p host: it opens
// streams to overlays and runs bee handlers on the streams peers open.
// Ownership: Close cancels the handlers' context and waits for every
// handler it started to return.
type streamer struct {
	h       host.Host
	overlay swarm.Address
	dir     *directory
	meter   *meter
	// dial, if set, connects the host to a peer it is not connected to
	// before a stream is opened (the tree's candidates and reparent
	// targets: on mocknet, hosts are connected by overlay).
	dial func(ctx context.Context, id peer.ID) error

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // running handlers
	mu     sync.Mutex     // guards closed and wg.Add against Close
	closed bool
}

var _ p2p.Streamer = (*streamer)(nil)

func newStreamer(h host.Host, dir *directory, m *meter) (*streamer, error) {
	overlay, err := dir.add(h.ID())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &streamer{h: h, overlay: overlay, dir: dir, meter: m, ctx: ctx, cancel: cancel}, nil
}

// NewStream opens a stream for protocol/version/stream to the node with
// overlay address. Headers are not sent (BPS sends none).
func (s *streamer) NewStream(ctx context.Context, address swarm.Address, _ p2p.Headers, proto, version, name string) (p2p.Stream, error) {
	id, ok := s.dir.peer(address)
	if !ok {
		return nil, p2p.ErrPeerNotFound
	}
	if s.dial != nil && s.h.Network().Connectedness(id) != network.Connected {
		if err := s.dial(ctx, id); err != nil {
			return nil, fmt.Errorf("dial %s: %w", address, err)
		}
	}
	st, err := s.h.NewStream(ctx, id, protocol.ID(p2p.NewSwarmStreamName(proto, version, name)))
	if err != nil {
		return nil, fmt.Errorf("new stream to %s: %w", address, err)
	}
	return &stream{Stream: st, meter: s.meter}, nil
}

// AddProtocol registers spec's stream handlers on the host. A handler that
// fails has its stream reset, as bee's libp2p service does; a
// BlockPeerError is counted (nothing here blocklists).
func (s *streamer) AddProtocol(spec p2p.ProtocolSpec) {
	for _, ss := range spec.StreamSpecs {
		handler := ss.Handler
		pid := protocol.ID(p2p.NewSwarmStreamName(spec.Name, spec.Version, ss.Name))
		s.h.SetStreamHandler(pid, func(ns network.Stream) {
			if !s.track() {
				_ = ns.Reset()
				return
			}
			defer s.wg.Done()
			overlay, ok := s.dir.overlay(ns.Conn().RemotePeer())
			if !ok {
				_ = ns.Reset()
				return
			}
			err := handler(s.ctx, p2p.Peer{Address: overlay, FullNode: true}, &stream{Stream: ns, meter: s.meter})
			if err != nil {
				_ = ns.Reset()
				var bpe *p2p.BlockPeerError
				if errors.As(err, &bpe) {
					s.meter.blocked.Add(1)
				}
			}
		})
	}
}

func (s *streamer) track() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// Close stops the handlers (their context ends) and waits for them.
func (s *streamer) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// fullCloseTimeout bounds the wait for the peer's EOF in FullClose.
const fullCloseTimeout = 30 * time.Second

// stream is a libp2p stream as a bee p2p.Stream; its writes are counted.
type stream struct {
	network.Stream
	meter *meter
}

var _ p2p.Stream = (*stream)(nil)

func (s *stream) Write(p []byte) (int, error) {
	n, err := s.Stream.Write(p)
	s.meter.wrote(n)
	return n, err
}

func (s *stream) Headers() p2p.Headers         { return nil }
func (s *stream) ResponseHeaders() p2p.Headers { return nil }

// FullClose closes the write side and waits, bounded, for the peer to close
// its side: bee's semantics. Anything but EOF resets the stream.
func (s *stream) FullClose() error {
	defer s.Close()
	if err := s.CloseWrite(); err != nil {
		_ = s.Stream.Reset()
		return err
	}
	// mocknet ignores deadlines: the timer resets the stream instead.
	t := time.AfterFunc(fullCloseTimeout, func() { _ = s.Stream.Reset() })
	defer t.Stop()
	var b [1]byte
	n, err := s.Read(b[:])
	switch {
	case errors.Is(err, io.EOF) && n == 0:
		return nil
	case err == nil || n > 0:
		_ = s.Stream.Reset()
		return errors.New("full close: data after the peer's last frame")
	default:
		_ = s.Stream.Reset()
		return err
	}
}
