// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Blocklisting is one call to Blocklist, by hand or for a handler's
// *p2p.BlockPeerError.
type Blocklisting struct {
	Peer     swarm.Address
	Duration time.Duration // 0 is forever, as in bee
	Reason   string
}

// HandlerError is a non-nil error a node's handler returned.
type HandlerError struct {
	Peer     swarm.Address // the caller
	Protocol string        // p2p.NewSwarmStreamName of the handler's stream
	Err      error
}

// Node is one member of a Network. It implements p2p.StreamerDisconnecter.
type Node struct {
	net     *Network
	overlay swarm.Address

	// Guarded by net.mu.
	links  map[string]*link // by peer overlay
	killed bool             // off the network: killed, stopping or stopped
	peers  []swarm.Address  // the peers it had when it went off the network

	// Traffic of the links it no longer has, and of those being torn down:
	// guarded by net.mu. See Stats.
	retired Traffic
	closing map[*link]struct{}

	// The node's uplink, shared by all its links: see SetUplink.
	shaped   atomic.Bool // an uplink is set: writes are stamped
	upMu     sync.Mutex  // leaf
	uplink   int64       // bytes per second, 0 unlimited
	upBusyAt time.Time   // real time the uplink finishes its last write

	cpu *processor // nil: writes and reads cost nothing; set at creation

	mu          sync.Mutex // leaf lock
	protocols   []p2p.ProtocolSpec
	blocked     map[string]time.Time // peer overlay -> expiry, zero for forever
	blocklists  []Blocklisting
	blockedCh   chan struct{} // closed and replaced on every blocklisting
	handlerErrs []HandlerError

	wrap atomic.Pointer[StreamWrapper] // see SetStreamWrapper
}

var _ p2p.StreamerDisconnecter = (*Node)(nil)

// StreamWrapper stands between a node and the streams it holds: it is given
// each stream the node's side of it gets — the streams NewStream returns
// (dialed true) and those its handlers are given — with the peer at the
// other end, and returns what the node uses instead. A simulation alters a
// node's wire with it (bps-sim's attackers decode, drop, delay, rewrite and
// inject frames); the transport underneath is unchanged.
type StreamWrapper func(s p2p.Stream, peer swarm.Address, dialed bool) p2p.Stream

// SetStreamWrapper wraps the streams the node gets from now on (nil: none).
// A restarted node starts without one.
func (nd *Node) SetStreamWrapper(w StreamWrapper) {
	if w == nil {
		nd.wrap.Store(nil)
		return
	}
	nd.wrap.Store(&w)
}

// wrapped is s as the node's side sees it.
func (nd *Node) wrapped(s p2p.Stream, peer swarm.Address, dialed bool) p2p.Stream {
	if w := nd.wrap.Load(); w != nil {
		return (*w)(s, peer, dialed)
	}
	return s
}

// Traffic is what a node or one of its links carried, seen from the node.
type Traffic struct {
	Out DirectionStats // written by the node
	In  DirectionStats // written to the node
}

// Stats returns what the node wrote and was written over all its links,
// including those since torn down.
func (nd *Node) Stats() Traffic {
	nd.net.mu.Lock()
	t := nd.retired
	links := make([]*link, 0, len(nd.links)+len(nd.closing))
	for _, l := range nd.links {
		links = append(links, l)
	}
	for l := range nd.closing {
		links = append(links, l)
	}
	nd.net.mu.Unlock()

	for _, l := range links {
		t.add(l.trafficOf(nd))
	}
	return t
}

func (t *Traffic) add(o Traffic) {
	t.Out.add(o.Out)
	t.In.add(o.In)
}

// LinkStats returns what the current link to peer carried, seen from nd;
// false if they are not connected.
func (nd *Node) LinkStats(peer swarm.Address) (Traffic, bool) {
	nd.net.mu.Lock()
	l := nd.links[peer.ByteString()]
	nd.net.mu.Unlock()
	if l == nil {
		return Traffic{}, false
	}
	return l.trafficOf(nd), true
}

// SetUplink caps what the node writes, over all its links together, at bw
// bytes per second (0: unlimited). A broker fanning one publication out to
// many subscribers is bound by its uplink before any link's bandwidth.
// Writes already made keep their schedule.
func (nd *Node) SetUplink(bw int64) {
	nd.upMu.Lock()
	nd.uplink = max(bw, 0)
	nd.upMu.Unlock()
	nd.shaped.Store(bw > 0)
}

// uplinkDelay schedules size bytes on the node's uplink and returns how long
// from now they take to leave it.
func (nd *Node) uplinkDelay(size int) time.Duration {
	if !nd.shaped.Load() {
		return 0
	}
	now := time.Now()
	nd.upMu.Lock()
	defer nd.upMu.Unlock()
	if nd.uplink <= 0 {
		return 0
	}
	nd.upBusyAt = maxTime(now, nd.upBusyAt).Add(transmission(size, nd.uplink))
	return nd.upBusyAt.Sub(now)
}

// Overlay returns the node's overlay address.
func (nd *Node) Overlay() swarm.Address { return nd.overlay }

// AddProtocol registers the handlers of p, as p2p.Service.AddProtocol does.
// Its connect hooks run for connections made afterwards. Registering the
// same name and version twice is an error.
func (nd *Node) AddProtocol(p p2p.ProtocolSpec) error {
	if _, _, err := parseVersion(p.Version); err != nil {
		return fmt.Errorf("protocol %s: version %q: %w", p.Name, p.Version, err)
	}

	nd.mu.Lock()
	defer nd.mu.Unlock()

	for _, q := range nd.protocols {
		if q.Name == p.Name && q.Version == p.Version {
			return fmt.Errorf("protocol %s version %s already registered", p.Name, p.Version)
		}
	}
	nd.protocols = append(nd.protocols, p)
	return nil
}

func (nd *Node) protocolSpecs() []p2p.ProtocolSpec {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return slices.Clone(nd.protocols)
}

// streamSpec finds the handler for a stream the way bee's libp2p matches
// protocol IDs: same protocol and stream name, same major version, and a
// handler minor version at least the one asked for.
func (nd *Node) streamSpec(protocol, version, stream string) (p2p.StreamSpec, bool) {
	major, minor, err := parseVersion(version)
	if err != nil {
		return p2p.StreamSpec{}, false
	}
	for _, p := range nd.protocolSpecs() {
		if p.Name != protocol {
			continue
		}
		hmajor, hminor, _ := parseVersion(p.Version)
		if hmajor != major || hminor < minor {
			continue
		}
		for _, ss := range p.StreamSpecs {
			if ss.Name == stream && ss.Handler != nil {
				return ss, true
			}
		}
	}
	return p2p.StreamSpec{}, false
}

// parseVersion reads the major and minor numbers of a semantic version such
// as "1.2.0" or "v1.2".
func parseVersion(v string) (major, minor int, err error) {
	v = strings.TrimPrefix(v, "v")
	v, _, _ = strings.Cut(v, "-")
	v, _, _ = strings.Cut(v, "+")
	parts := strings.Split(v, ".")
	if len(parts) > 3 {
		return 0, 0, errors.New("not a semantic version")
	}
	if major, err = strconv.Atoi(parts[0]); err != nil || major < 0 {
		return 0, 0, errors.New("not a semantic version")
	}
	if len(parts) > 1 {
		if minor, err = strconv.Atoi(parts[1]); err != nil || minor < 0 {
			return 0, 0, errors.New("not a semantic version")
		}
	}
	return major, minor, nil
}

// NewStream opens a stream to the handler that addr registered for
// protocol, version and stream, and starts that handler on its own
// goroutine. The handler's Headler, if any, runs before NewStream returns.
//
// It returns p2p.ErrPeerBlocklisted if either node blocklists the other,
// p2p.ErrPeerNotFound if the two are not connected (or either is off the
// network), and a *p2p.IncompatibleStreamError wrapping
// ErrStreamNotSupported if addr has no such handler. On a link with latency
// NewStream takes one round trip, as bee's header exchange does; while a
// partition holds the link it waits for the heal. Either wait ends early
// with ctx's error. Once open, the stream outlives ctx, like bee's.
func (nd *Node) NewStream(ctx context.Context, addr swarm.Address, h p2p.Headers, protocol, version, stream string) (p2p.Stream, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n := nd.net

	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil, ErrClosed
	}
	remote := n.nodes[addr.ByteString()]
	blocked := nd.blocklisted(addr) || (remote != nil && remote.blocklisted(nd.overlay))
	l := nd.links[addr.ByteString()]
	gone := nd.killed || (remote != nil && remote.killed)
	n.mu.Unlock()

	if blocked {
		return nil, p2p.ErrPeerBlocklisted
	}
	if l == nil || gone {
		return nil, p2p.ErrPeerNotFound
	}
	if err := l.waitHealed(ctx); err != nil {
		return nil, err
	}
	if rtt := 2 * l.config().Latency; rtt > 0 {
		t := time.NewTimer(rtt)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		}
	}

	name := p2p.NewSwarmStreamName(protocol, version, stream)
	ss, ok := remote.streamSpec(protocol, version, stream)
	if !ok {
		return nil, p2p.NewIncompatibleStreamError(fmt.Errorf("%w: %s", ErrStreamNotSupported, name))
	}

	// Headers travel as bee's header exchange would carry them: copied,
	// never nil on arrival.
	reqHeaders := cloneHeaders(h)
	var respHeaders p2p.Headers
	if ss.Headler != nil {
		respHeaders = ss.Headler(reqHeaders, nd.overlay)
	}

	c := newConn(n, l, nd)
	client := &Stream{c: c, side: dialer, headers: cloneHeaders(respHeaders)}
	server := &Stream{c: c, side: listener, headers: reqHeaders, responseHeaders: respHeaders}
	caller := nd.overlay

	started := l.open(c, func() {
		n.opened.Add(1)
		n.wg.Add(1)
		go n.handle(&handlerRun{ctx: l.ctx, nd: remote, caller: caller, name: name, h: ss.Handler, s: server})
	})
	if !started {
		return nil, p2p.ErrPeerNotFound
	}
	return nd.wrapped(client, addr, true), nil
}

// handle runs a handler on the goroutine n.wg counts, and acts on its error
// as bee's libp2p service does. A handler may wait in a read for as long as
// its stream lives, on this goroutine: the error's handling is kept off
// the stack (a waiting goroutine's stack is only shrunk by the GC if little
// of it is in use).
func (n *Network) handle(r *handlerRun) {
	defer n.wg.Done()
	if err := r.h(r.ctx, p2p.Peer{Address: r.caller, FullNode: true}, r.nd.wrapped(r.s, r.caller, false)); err != nil {
		n.handlerFailed(r.nd, r.caller, r.name, r.s, err)
	}
}

// handlerRun is a handler to run on a stream the node nd accepted.
type handlerRun struct {
	ctx    context.Context
	nd     *Node
	caller swarm.Address
	name   string
	h      p2p.HandlerFunc
	s      *Stream
}

// handlerFailed acts on a handler's error as bee's libp2p service does.
//
//go:noinline
func (n *Network) handlerFailed(nd *Node, caller swarm.Address, name string, s *Stream, err error) {
	nd.mu.Lock()
	nd.handlerErrs = append(nd.handlerErrs, HandlerError{Peer: caller, Protocol: name, Err: err})
	nd.mu.Unlock()

	var de *p2p.DisconnectError
	var bpe *p2p.BlockPeerError
	isDisconnect, isBlock := errors.As(err, &de), errors.As(err, &bpe)
	if !isDisconnect && !isBlock {
		return
	}
	// bee resets the stream, then blocklists and disconnects. Here the
	// blocklisting is recorded and the peers are unlinked before any stream
	// is reset, so a caller whose read failed already gets
	// p2p.ErrPeerBlocklisted or p2p.ErrPeerNotFound from NewStream. The
	// disconnect hooks run after the resets, as in bee.
	if isBlock {
		nd.addBlocklisting(caller, bpe.Duration(), bpe.Error())
	}
	_ = nd.disconnectPeer(caller)
	_ = s.Reset() // the disconnect reset it unless the link was already gone
}

// Peers returns the connected peers ordered by overlay.
func (nd *Node) Peers() []p2p.Peer {
	nd.net.mu.Lock()
	peers := make([]p2p.Peer, 0, len(nd.links))
	for _, l := range nd.links {
		peers = append(peers, peerOf(l.other(nd)))
	}
	nd.net.mu.Unlock()

	slices.SortFunc(peers, func(a, b p2p.Peer) int {
		return bytes.Compare(a.Address.Bytes(), b.Address.Bytes())
	})
	return peers
}

// Disconnect implements p2p.Disconnecter: the node disconnects overlay, as
// Network.Disconnect(nd, peer) does. It returns p2p.ErrPeerNotFound if they
// are not connected.
func (nd *Node) Disconnect(overlay swarm.Address, _ string) error {
	return nd.disconnectPeer(overlay)
}

func (nd *Node) disconnectPeer(overlay swarm.Address) error {
	nd.net.mu.Lock()
	l := nd.links[overlay.ByteString()]
	nd.net.mu.Unlock()

	if l == nil || !nd.net.disconnect(l, nd, allHooks) {
		return p2p.ErrPeerNotFound
	}
	return nil
}

// NetworkStatus implements p2p.NetworkStatuser; the network is always
// available.
func (nd *Node) NetworkStatus() p2p.NetworkStatus { return p2p.NetworkStatusAvailable }

// Blocklist blocklists overlay for d (0 is forever) and disconnects it, as
// p2p.Blocklister does. Unlike bee, a peer that is not connected is
// blocklisted too, and nil returned.
func (nd *Node) Blocklist(overlay swarm.Address, d time.Duration, reason string) error {
	nd.addBlocklisting(overlay, d, reason)
	_ = nd.disconnectPeer(overlay)
	return nil
}

func (nd *Node) addBlocklisting(overlay swarm.Address, d time.Duration, reason string) {
	var expiry time.Time
	if d > 0 {
		expiry = time.Now().Add(d)
	}

	nd.mu.Lock()
	defer nd.mu.Unlock()

	nd.blocked[overlay.ByteString()] = expiry
	nd.blocklists = append(nd.blocklists, Blocklisting{Peer: overlay.Clone(), Duration: d, Reason: reason})
	close(nd.blockedCh)
	nd.blockedCh = make(chan struct{})
}

// blocklisted reports whether overlay is blocklisted now.
func (nd *Node) blocklisted(overlay swarm.Address) bool {
	nd.mu.Lock()
	defer nd.mu.Unlock()

	expiry, ok := nd.blocked[overlay.ByteString()]
	return ok && (expiry.IsZero() || time.Now().Before(expiry))
}

// Blocklisted reports whether overlay is blocklisted now.
func (nd *Node) Blocklisted(overlay swarm.Address) (bool, error) {
	return nd.blocklisted(overlay), nil
}

// Blocklists returns every blocklisting so far, oldest first.
func (nd *Node) Blocklists() []Blocklisting {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return slices.Clone(nd.blocklists)
}

// WaitBlocklisted blocks until nd has blocklisted peer, at any time before
// or during the call, or ctx is done.
func (nd *Node) WaitBlocklisted(ctx context.Context, peer swarm.Address) error {
	for {
		nd.mu.Lock()
		found := slices.ContainsFunc(nd.blocklists, func(b Blocklisting) bool { return b.Peer.Equal(peer) })
		ch := nd.blockedCh
		nd.mu.Unlock()

		if found {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// HandlerErrors returns every non-nil error the node's handlers returned,
// oldest first.
func (nd *Node) HandlerErrors() []HandlerError {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	return slices.Clone(nd.handlerErrs)
}

// Kill takes the node off the network abruptly, as a crash or a pulled cable
// would: every link it has is torn down, which resets all its streams and
// cancels its handlers' contexts. Its own disconnect hooks do not run; each
// peer's DisconnectIn hooks do. A killed node cannot connect again; to bring
// it back, Network.Restart it.
func (nd *Node) Kill() {
	n := nd.net

	n.mu.Lock()
	links := nd.offLocked()
	n.mu.Unlock()

	for _, l := range links {
		n.disconnect(l, nd, peerHooks)
	}
}

// offLocked marks the node off the network, remembers its peers for a
// restart and returns its links. The caller holds net.mu.
func (nd *Node) offLocked() []*link {
	if !nd.killed {
		nd.killed = true
		nd.peers = nd.peers[:0]
		for _, l := range nd.links {
			nd.peers = append(nd.peers, l.other(nd).overlay)
		}
		slices.SortFunc(nd.peers, func(a, b swarm.Address) int { return bytes.Compare(a.Bytes(), b.Bytes()) })
	}
	return slices.Collect(maps.Values(nd.links))
}

// Stop takes the node off the network gracefully, as a node shutting down
// does once its protocols have: new streams to and from it are refused at
// once; Stop then waits until every stream on its links has ended (both ends
// closed, or reset) or ctx is done, and disconnects from every peer as
// Disconnect does, its DisconnectOut hooks and each peer's DisconnectIn hooks
// running. The caller first shuts down what runs on the node (a bps
// Service's Close) so that its streams end. It returns ctx's error if the
// streams had not ended by then; the links are torn down anyway. A stopped
// node cannot connect again; to bring it back, Network.Restart it.
func (nd *Node) Stop(ctx context.Context) error {
	n := nd.net

	n.mu.Lock()
	links := nd.offLocked()
	n.mu.Unlock()

	var err error
	for _, l := range links {
		if err != nil {
			break
		}
		select {
		case <-l.whenDrained():
		case <-ctx.Done():
			err = fmt.Errorf("stop: streams still open: %w", ctx.Err())
		}
	}
	for _, l := range links {
		n.disconnect(l, nd, allHooks)
	}
	return err
}

// PeersAtExit returns the peers nd had when it went off the network, ordered
// by overlay; nil while it is on it.
func (nd *Node) PeersAtExit() []swarm.Address {
	nd.net.mu.Lock()
	defer nd.net.mu.Unlock()
	if !nd.killed {
		return nil
	}
	return slices.Clone(nd.peers)
}

// Alive reports whether the node is on the network: not killed, stopping,
// stopped or removed.
func (nd *Node) Alive() bool {
	nd.net.mu.Lock()
	defer nd.net.mu.Unlock()
	return !nd.killed
}

func cloneHeaders(h p2p.Headers) p2p.Headers {
	c := make(p2p.Headers, len(h))
	for k, v := range h {
		c[k] = bytes.Clone(v)
	}
	return c
}
