// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/bzz"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	ma "github.com/multiformats/go-multiaddr"
)

// Connector dials a broker given by its underlay multiaddr. bee's p2p
// service (*libp2p.Service) satisfies it.
type Connector interface {
	Connect(ctx context.Context, addrs []ma.Multiaddr) (*bzz.Address, error)
}

// AddressBook finds a peer's underlays by its overlay: bee's addressbook,
// which keeps the address record every peer the node met signed. A
// Connector that is also an AddressBook (pkg/node's is) lets a dApp name
// the broker by overlay — as upstream's API does — even when the node is
// not connected to it: the node dials the underlays the book holds, which
// stay right across the broker's restarts as far as the book has seen
// them.
type AddressBook interface {
	Underlays(overlay swarm.Address) ([]ma.Multiaddr, error)
}

// peerRef is the peer parameter: a broker overlay, or a multiaddr to dial.
type peerRef struct {
	overlay swarm.Address // given directly: no dial
	addr    ma.Multiaddr  // to dial
	id      string        // addr's /p2p/ peer id: the overlay cache key
}

// parsePeer reads the peer parameter: 64 hex characters are the broker's
// overlay, anything else must be a multiaddr naming the peer (/p2p/…).
func parsePeer(s string) (peerRef, error) {
	if !strings.HasPrefix(s, "/") {
		b, err := decodeHex(s)
		if err != nil || len(b) != swarm.HashSize {
			return peerRef{}, errors.New("want a multiaddr with /p2p/ or a 32-byte overlay in hex")
		}
		return peerRef{overlay: swarm.NewAddress(b)}, nil
	}
	a, err := ma.NewMultiaddr(s)
	if err != nil {
		return peerRef{}, fmt.Errorf("invalid multiaddr: %w", err)
	}
	id, err := a.ValueForProtocol(ma.P_P2P)
	if err != nil {
		return peerRef{}, errors.New("multiaddr names no peer: want a /p2p/ component")
	}
	return peerRef{addr: a, id: id}, nil
}

// peerCacheSize bounds the peer id → overlay cache.
const peerCacheSize = 1024

// peerResolver turns a peer parameter into the broker's overlay, dialling
// the multiaddr if needed.
//
// bee's Connect answers p2p.ErrAlreadyConnected when the node already has a
// connection to the peer on that address. v2.8.1 returns the address with
// that error, earlier versions did not; so every overlay learnt from a
// successful Connect is remembered by the multiaddr's peer id (an overlay is
// bound to its peer identity by bee's handshake), and an ErrAlreadyConnected
// without an address is answered from that cache. A peer connected before
// the bridge ever dialled it (say, by bee's topology) and reported without
// an address cannot be resolved: the request fails with a hint to give the
// overlay instead. The cache is bounded and forgets in insertion order.
type peerResolver struct {
	conn Connector

	mu    sync.Mutex // guards cache and order
	cache map[string]swarm.Address
	order []string
}

func newPeerResolver(conn Connector) *peerResolver {
	return &peerResolver{conn: conn, cache: make(map[string]swarm.Address)}
}

func (r *peerResolver) canDial() bool { return r.conn != nil }

// resolve returns the broker overlay of ref, connecting to it if ref is a
// multiaddr.
func (r *peerResolver) resolve(ctx context.Context, ref peerRef) (swarm.Address, error) {
	if ref.addr == nil {
		return r.resolveOverlay(ctx, ref.overlay)
	}
	a, err := r.conn.Connect(ctx, []ma.Multiaddr{ref.addr})
	switch {
	case err == nil && a != nil:
		r.remember(ref.id, a.Overlay)
		return a.Overlay, nil
	case err == nil:
		return swarm.ZeroAddress, errors.New("connect returned no address")
	case errors.Is(err, p2p.ErrAlreadyConnected):
		if a != nil && !a.Overlay.IsZero() {
			r.remember(ref.id, a.Overlay)
			return a.Overlay, nil
		}
		if o, ok := r.lookup(ref.id); ok {
			return o, nil
		}
		return swarm.ZeroAddress, errUnknownOverlay
	default:
		return swarm.ZeroAddress, &connectError{err: err}
	}
}

// resolveOverlay returns overlay, first connecting to it through the
// underlays the address book holds, if there is one and it knows the peer;
// a peer it does not know is tried as it is (the node may be connected to
// it all the same: bee's topology keeps its own peers).
func (r *peerResolver) resolveOverlay(ctx context.Context, overlay swarm.Address) (swarm.Address, error) {
	book, ok := r.conn.(AddressBook)
	if !ok {
		return overlay, nil
	}
	underlays, err := book.Underlays(overlay)
	if err != nil || len(underlays) == 0 {
		return overlay, nil
	}
	a, err := r.conn.Connect(ctx, underlays)
	switch {
	case err == nil, errors.Is(err, p2p.ErrAlreadyConnected):
		if a != nil && !a.Overlay.IsZero() && !a.Overlay.Equal(overlay) {
			return swarm.ZeroAddress, fmt.Errorf("%w: the underlays the address book holds for %s are %s's now", errStaleUnderlay, overlay, a.Overlay)
		}
		return overlay, nil
	default:
		return swarm.ZeroAddress, &connectError{err: err}
	}
}

// errStaleUnderlay: the address book's underlays for the broker reach
// another peer.
var errStaleUnderlay = errors.New("stale underlay")

// connectError: bee's p2p service could not connect to the broker.
type connectError struct{ err error }

func (e *connectError) Error() string { return "connect to the broker: " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// errUnknownOverlay: connected, but the overlay was never learnt.
var errUnknownOverlay = errors.New("already connected to the broker, but its overlay is unknown here: give the overlay as peer")

func (r *peerResolver) remember(id string, o swarm.Address) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.cache[id]; !ok {
		if len(r.order) >= peerCacheSize {
			delete(r.cache, r.order[0])
			r.order = r.order[1:]
		}
		r.order = append(r.order, id)
	}
	r.cache[id] = o.Clone()
}

func (r *peerResolver) lookup(id string) (swarm.Address, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.cache[id]
	return o, ok
}
