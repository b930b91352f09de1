// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package streamtest is an in-memory network of nodes that speak bee's p2p
// interfaces: every Node is a p2p.Streamer (and a p2p.StreamerDisconnecter)
// whose streams reach the handlers other nodes registered with AddProtocol.
//
// bee's own pkg/p2p/streamtest records a single hop: its handlers run on
// context.Background and Records waits for them to return, so a stream cannot
// stay open. This package keeps streams open for as long as both ends want,
// which long-lived protocol streams (BPS subscriptions, later trees of
// brokers) need, and keeps the semantics of bee's libp2p service:
//
//   - NewStream starts the remote handler on its own goroutine, with
//     p2p.Peer{Address: caller, FullNode: true} and a context that is
//     cancelled when the two nodes disconnect or the Network closes.
//   - Headers are exchanged as bee does: the handler's stream.Headers() holds
//     what the caller passed, its ResponseHeaders() what its Headler returned,
//     and the caller's stream.Headers() holds those response headers.
//   - A handler returning *p2p.BlockPeerError gets its stream reset and the
//     caller blocklisted and disconnected; *p2p.DisconnectError gets the
//     stream reset and the caller disconnected. Any other error is recorded
//     (HandlerErrors) and the stream is left as the handler left it, as bee
//     does: a handler that returns an error without resetting or closing its
//     stream leaves the caller's reads blocked until the caller gives up.
//   - Each stream direction is a bounded buffer: a writer blocks while it is
//     full. Close, FullClose and Reset behave like bee's libp2p stream.
//
// Faults and transport, for networks of many nodes:
//
//   - Links have a LinkConfig (WithLinkConfig, Network.SetLink): latency,
//     bandwidth shared by the link's streams, and loss, which on a reliable
//     stream shows as a retransmission delay. Nodes may have an uplink
//     shared by all their links (Node.SetUplink). None of it costs a
//     goroutine or a timer per write: each write is stamped with the time
//     it becomes readable on the link's schedule, and the reader waits for
//     the stamp of the oldest unread bytes, on one timer per stream that
//     has bytes in flight. An ideal link (the default) stamps nothing.
//     Bytes in flight count against the stream's buffer, so the buffer is
//     the stream's window: throughput is bounded by window ÷ latency.
//   - Node.Kill (a crash), Node.Stop (a graceful shutdown, after the node's
//     protocols have closed their streams), Network.Restart (the same
//     overlay booting again), Network.Partition and Heal (links held, not
//     torn down).
//   - Traffic is counted per stream (Stream.Stats), per link
//     (Node.LinkStats), per node over all its links (Node.Stats) and for
//     the whole network (Network.Stats).
//   - Overlays and losses come from a seed (WithSeed).
//
// Every handler goroutine is owned by the Network and waited for by Close.
//
// synctest: the package blocks only on sync.Cond, channels and timers, all
// of which a synctest bubble treats as durably blocking, so a Network
// created inside a bubble runs on its fake clock: latencies, partitions and
// timeouts take no real time. Create the Network inside the bubble.
//
// Locking: Network.mu guards the topology (nodes, links, groups, closed,
// rng, node traffic totals); link.mu guards one link's stream set and
// retired counts; conn.mu guards one stream's buffers and counts;
// link.smu (a link's schedule), Node.upMu (its uplink) and Node.mu (its
// protocols, blocklist and recorded errors) are leaves. They are taken in
// that order. No hook or handler is called while any of them is held.
package streamtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/libp2p/go-libp2p/core/network"
)

const (
	// DefaultBufferSize is the capacity of one stream direction in bytes.
	DefaultBufferSize = 64 * 1024
	// DefaultFullCloseTimeout bounds how long FullClose waits for the
	// remote end to close its write side.
	DefaultFullCloseTimeout = 2 * time.Second
	// closeTimeout bounds how long Network.Close waits for handlers.
	closeTimeout = 5 * time.Second
)

var (
	// ErrStreamReset is wrapped by every Read or Write error on a stream
	// that either end reset or that a disconnect tore down. It wraps
	// libp2p's network.ErrReset, so errors.Is(err, network.ErrReset) holds
	// as it does on a real bee node.
	ErrStreamReset = fmt.Errorf("streamtest: %w", network.ErrReset)
	// ErrStreamClosed is wrapped by Read and Write errors on an end that
	// was closed, and by Write errors once the remote end stopped reading.
	ErrStreamClosed = errors.New("streamtest: stream closed")
	// ErrStreamNotSupported is wrapped, inside a *p2p.IncompatibleStreamError,
	// by NewStream when the remote node has no handler for the stream.
	ErrStreamNotSupported = errors.New("streamtest: stream not supported")
	// ErrClosed is returned once the Network is closed.
	ErrClosed = errors.New("streamtest: network closed")
	// ErrKilled is returned by Connect for a node that was killed or
	// stopped.
	ErrKilled = errors.New("streamtest: node killed")
	// ErrUnreachable is returned by Connect across a partition.
	ErrUnreachable = errors.New("streamtest: peer unreachable: partitioned")
)

// Option configures a Network.
type Option func(*options)

type options struct {
	seed             int64
	bufferSize       int
	fullCloseTimeout time.Duration
	link             LinkConfig
	cpu              func(swarm.Address) CPU
}

// WithLinkConfig sets the transport of every link Connect makes (default:
// ideal). Network.SetLink changes one link.
func WithLinkConfig(c LinkConfig) Option {
	return func(o *options) { o.link = c }
}

// WithSeed sets the seed of the random overlays NewNode picks and of every
// link's losses. The default seed is 1, so both are reproducible unless a
// test asks otherwise.
func WithSeed(seed int64) Option {
	return func(o *options) { o.seed = seed }
}

// WithBufferSize sets the capacity in bytes of each stream direction
// (default DefaultBufferSize). Values below 1 are treated as 1.
func WithBufferSize(bytes int) Option {
	return func(o *options) { o.bufferSize = max(bytes, 1) }
}

// WithFullCloseTimeout sets how long FullClose waits for the remote end to
// close its write side before it resets the stream (default
// DefaultFullCloseTimeout; bee waits 30 s).
func WithFullCloseTimeout(d time.Duration) Option {
	return func(o *options) { o.fullCloseTimeout = d }
}

// Stats are totals over the life of a Network.
type Stats struct {
	Bytes         uint64 // payload bytes written to streams
	Frames        uint64 // Write calls that moved at least one byte
	StreamsOpened uint64
	StreamsReset  uint64
	Lost          uint64 // writes lost on the wire and retransmitted
}

// Network is a set of nodes connected by in-memory links. It is safe for
// concurrent use.
type Network struct {
	opts   options
	ctx    context.Context // parent of every link's context
	cancel context.CancelFunc
	wg     sync.WaitGroup // handler goroutines

	mu     sync.Mutex
	rng    *rand.Rand
	nodes  map[string]*Node
	links  map[linkKey]*link
	groups map[string]int // partition group by overlay; absent is group 0
	closed bool

	bytes, frames, opened, resets, lost atomic.Uint64
}

// New returns an empty Network.
func New(opts ...Option) *Network {
	o := options{
		seed:             1,
		bufferSize:       DefaultBufferSize,
		fullCloseTimeout: DefaultFullCloseTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Network{
		opts:   o,
		ctx:    ctx,
		cancel: cancel,
		rng:    rand.New(rand.NewPCG(uint64(o.seed), 0)),
		nodes:  make(map[string]*Node),
		links:  make(map[linkKey]*link),
	}
}

// NewNode adds a node with a random overlay drawn from the Network's seed.
func (n *Network) NewNode() *Node {
	n.mu.Lock()
	defer n.mu.Unlock()

	for {
		b := make([]byte, 0, swarm.HashSize)
		for len(b) < swarm.HashSize {
			b = binary.BigEndian.AppendUint64(b, n.rng.Uint64())
		}
		a := swarm.NewAddress(b)
		if _, ok := n.nodes[a.ByteString()]; !ok {
			return n.addNodeLocked(a)
		}
	}
}

// NewNodeWithOverlay adds a node with the given overlay. It panics if the
// overlay is already taken: that is a mistake in the test.
func (n *Network) NewNodeWithOverlay(a swarm.Address) *Node {
	n.mu.Lock()
	defer n.mu.Unlock()

	if _, ok := n.nodes[a.ByteString()]; ok {
		panic(fmt.Sprintf("streamtest: overlay %s already in the network", a))
	}
	return n.addNodeLocked(a.Clone())
}

func (n *Network) addNodeLocked(a swarm.Address) *Node {
	nd := &Node{
		net:       n,
		overlay:   a,
		links:     make(map[string]*link),
		blocked:   make(map[string]time.Time),
		blockedCh: make(chan struct{}),
	}
	if n.opts.cpu != nil {
		if c := n.opts.cpu(a); c != nil {
			nd.cpu = &processor{cost: c}
		}
	}
	n.nodes[a.ByteString()] = nd
	return nd
}

// Connect connects a to b as if a dialed b. It then runs, in this order and
// on the caller's goroutine, b's ConnectIn hooks with a as the peer and a's
// ConnectOut hooks with b as the peer. A failing hook disconnects the two
// (the failing side initiates, as bee does) and its error is returned.
//
// Connect returns p2p.ErrPeerBlocklisted if either node blocklists the other
// and p2p.ErrAlreadyConnected if they are connected.
func (n *Network) Connect(a, b *Node) error {
	if a == b {
		return errors.New("streamtest: node cannot connect to itself")
	}

	n.mu.Lock()
	switch {
	case n.closed:
		n.mu.Unlock()
		return ErrClosed
	case a.killed || b.killed:
		n.mu.Unlock()
		return ErrKilled
	case a.blocklisted(b.overlay) || b.blocklisted(a.overlay):
		n.mu.Unlock()
		return p2p.ErrPeerBlocklisted
	case n.groups[a.overlay.ByteString()] != n.groups[b.overlay.ByteString()]:
		n.mu.Unlock()
		return ErrUnreachable
	}
	if _, ok := a.links[b.overlay.ByteString()]; ok {
		n.mu.Unlock()
		return p2p.ErrAlreadyConnected
	}
	l := newLink(n.ctx, a, b, n.opts.link, n.opts.seed)
	n.links[l.key] = l
	a.links[b.overlay.ByteString()] = l
	b.links[a.overlay.ByteString()] = l
	n.mu.Unlock()

	for _, p := range b.protocolSpecs() {
		if p.ConnectIn == nil {
			continue
		}
		if err := p.ConnectIn(l.ctx, peerOf(a)); err != nil {
			n.disconnect(l, b, allHooks)
			return fmt.Errorf("connect in: protocol %s, version %s: %w", p.Name, p.Version, err)
		}
	}
	for _, p := range a.protocolSpecs() {
		if p.ConnectOut == nil {
			continue
		}
		if err := p.ConnectOut(l.ctx, peerOf(b)); err != nil {
			n.disconnect(l, a, allHooks)
			return fmt.Errorf("connect out: protocol %s, version %s: %w", p.Name, p.Version, err)
		}
	}
	return nil
}

// Disconnect disconnects a from b as if a called p2p.Disconnecter.Disconnect:
// every stream between them is reset, their handlers' contexts are
// cancelled, a's DisconnectOut hooks and b's DisconnectIn hooks run. It does
// nothing if they are not connected.
func (n *Network) Disconnect(a, b *Node) {
	n.mu.Lock()
	l := a.links[b.overlay.ByteString()]
	n.mu.Unlock()
	if l != nil {
		n.disconnect(l, a, allHooks)
	}
}

// hooks selects the disconnect hooks that run when a link goes down.
type hooks int

const (
	noHooks   hooks = iota // Network.Close
	peerHooks              // Kill: only the peer's DisconnectIn
	allHooks               // by's DisconnectOut and the peer's DisconnectIn
)

// disconnect tears l down on behalf of by and runs the hooks h selects. It
// reports whether l was still up; if not, nothing happens.
func (n *Network) disconnect(l *link, by *Node, h hooks) bool {
	if !n.unregister(l) {
		return false
	}
	l.close()
	n.retire(l)
	if h == noHooks {
		return true
	}
	other := l.other(by)
	if h == allHooks {
		for _, p := range by.protocolSpecs() {
			if p.DisconnectOut != nil {
				_ = p.DisconnectOut(peerOf(other))
			}
		}
	}
	for _, p := range other.protocolSpecs() {
		if p.DisconnectIn != nil {
			_ = p.DisconnectIn(peerOf(by))
		}
	}
	return true
}

// unregister removes l from the topology and reports whether it was there.
func (n *Network) unregister(l *link) bool {
	n.mu.Lock()
	defer n.mu.Unlock()

	if n.links[l.key] != l {
		return false
	}
	delete(n.links, l.key)
	delete(l.a.links, l.b.overlay.ByteString())
	delete(l.b.links, l.a.overlay.ByteString())
	for _, nd := range []*Node{l.a, l.b} {
		if nd.closing == nil {
			nd.closing = make(map[*link]struct{})
		}
		nd.closing[l] = struct{}{}
	}
	return true
}

// retire moves the totals of a link that was torn down into its nodes'.
func (n *Network) retire(l *link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, nd := range []*Node{l.a, l.b} {
		delete(nd.closing, l)
		nd.retired.add(l.trafficOf(nd))
	}
}

// Close resets every stream, cancels every handler's context and waits up to
// 5 s for all handlers to return. It returns an error if some did not (the
// goroutine waiting for them then lives on until they return). No disconnect
// hook runs. Close may be called more than once; each call waits again.
func (n *Network) Close() error {
	n.mu.Lock()
	n.closed = true
	links := make([]*link, 0, len(n.links))
	for _, l := range n.links {
		links = append(links, l)
	}
	n.mu.Unlock()

	n.cancel()
	for _, l := range links {
		n.disconnect(l, nil, noHooks)
	}

	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(closeTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("streamtest: handlers still running after %s", closeTimeout)
	}
}

// SetLink sets the transport of the link between a and b, in both
// directions; bytes already in flight keep their schedule. It returns
// p2p.ErrPeerNotFound if they are not connected.
func (n *Network) SetLink(a, b *Node, c LinkConfig) error {
	l := n.linkOf(a, b)
	if l == nil {
		return p2p.ErrPeerNotFound
	}
	l.configure(c)
	return nil
}

// Link returns the transport of the link between a and b; false if they are
// not connected.
func (n *Network) Link(a, b *Node) (LinkConfig, bool) {
	l := n.linkOf(a, b)
	if l == nil {
		return LinkConfig{}, false
	}
	return l.config(), true
}

func (n *Network) linkOf(a, b *Node) *link {
	n.mu.Lock()
	defer n.mu.Unlock()
	return a.links[b.overlay.ByteString()]
}

// Partition splits the network into the given groups; nodes in none of them
// form one more group. A link between groups is held, not torn down, as a
// network partition holds a TCP or QUIC connection: nothing written on it is
// readable, writers block once the stream's buffer is full, NewStream waits,
// and no disconnect hook runs. Connect between groups fails with
// ErrUnreachable. Partition replaces the previous partition: links it no
// longer cuts heal. Bytes held by a partition are delivered after it heals,
// in order, as late as the time they were held: a link's schedule stops
// while it is cut. Streams and links end only as they would without the
// partition: by a reset, a Disconnect or a Kill, or a timeout in the
// protocol above.
func (n *Network) Partition(groups ...[]*Node) {
	now := time.Now()

	n.mu.Lock()
	n.groups = make(map[string]int)
	for i, g := range groups {
		for _, nd := range g {
			n.groups[nd.overlay.ByteString()] = i + 1
		}
	}
	var cut, whole []*link
	for _, l := range n.links {
		if n.groups[l.a.overlay.ByteString()] != n.groups[l.b.overlay.ByteString()] {
			cut = append(cut, l)
		} else {
			whole = append(whole, l)
		}
	}
	n.mu.Unlock()

	for _, l := range cut {
		l.pause(now)
	}
	for _, l := range whole {
		l.resume(now)
	}
}

// Heal ends any partition: Partition with no groups.
func (n *Network) Heal() { n.Partition() }

// Remove takes nd off the network for good (it is killed if it is still on
// it) and forgets it, so that NewNodeWithOverlay may reuse its overlay.
// Handlers still running on it are waited for by Close as before.
func (n *Network) Remove(nd *Node) {
	nd.Kill()
	n.mu.Lock()
	if n.nodes[nd.overlay.ByteString()] == nd {
		delete(n.nodes, nd.overlay.ByteString())
	}
	n.mu.Unlock()
}

// Restart brings back a node that was killed or stopped, as the same node
// booting again: it removes nd and returns a new node with its overlay and
// its uplink, and nothing else — no protocols (register them again), no
// links, an empty blocklist. Connecting it again is the caller's; PeersAtExit
// tells whom nd was connected to. Restarting a node that is still up kills
// it first.
func (n *Network) Restart(nd *Node) *Node {
	n.Remove(nd)
	fresh := n.NewNodeWithOverlay(nd.overlay)
	nd.upMu.Lock()
	bw := nd.uplink
	nd.upMu.Unlock()
	fresh.SetUplink(bw)
	return fresh
}

// Stats returns the Network's totals so far.
func (n *Network) Stats() Stats {
	return Stats{
		Bytes:         n.bytes.Load(),
		Frames:        n.frames.Load(),
		StreamsOpened: n.opened.Load(),
		StreamsReset:  n.resets.Load(),
		Lost:          n.lost.Load(),
	}
}

func peerOf(nd *Node) p2p.Peer {
	return p2p.Peer{Address: nd.overlay, FullNode: true}
}
