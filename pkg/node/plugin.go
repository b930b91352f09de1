// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/bzz"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	ma "github.com/multiformats/go-multiaddr"
)

// Plugin is a p2p protocol attached to a running bee node. If it also has
// Metrics() []prometheus.Collector (bee's metrics.Collector), those are
// registered with bee's metrics and served by its /metrics.
//
// A plugin that serves more than one protocol also has Protocols()
// []p2p.ProtocolSpec: every spec it returns is registered, Protocol's
// first.
type Plugin interface {
	// Protocol is registered with the node's libp2p service once.
	Protocol() p2p.ProtocolSpec
	// Close is called on Shutdown, after the API port has stopped and
	// before bee shuts down; streams are still open then.
	Close() error
}

// PluginFactory builds a plugin for a node from all the node has for it
// (env): the plugin is built once bee is, before its protocol is
// registered, and is never handed anything later.
type PluginFactory func(env PluginEnv) (Plugin, error)

// PluginEnv is what a node gives the plugin it builds. Every field is
// ready when the factory runs: the node builds its plugin after bee, whose
// accounting and libp2p service it reads through the seam.
type PluginEnv struct {
	// Streamer opens streams over the node's libp2p service.
	Streamer p2p.Streamer
	// Overlay is the node's address.
	Overlay swarm.Address
	// Signer is bee's signer, the node's swarm key: its Ethereum address
	// is the one bee's handshake binds to Overlay (bzz.Address). BPS signs
	// its root heartbeats with it. nil on a test host.
	Signer crypto.Signer
	// Logger is the node's logger.
	Logger log.Logger
	// PeerCheck is the transport binding check (TransportBinding) a plugin
	// runs on a stream before it trusts the peer's overlay; nil if the
	// node has none.
	PeerCheck PeerCheck
	// Accounting is bee's own (the accounting.Interface pushsync and
	// retrieval use, settled by pseudosettle and swap, shown by GET
	// /balances), for a plugin that charges its peers; nil if the node has
	// none. A plugin may hold charges and apply them in batches (BPS does,
	// pkg/bps/ledger.go): Shutdown closes the plugin before bee, so what it
	// applies as its streams end reaches a live accounting.
	Accounting accounting.Interface
	// Connect dials a peer by its underlays (binary multiaddrs) unless it
	// is connected already, and checks the overlay that answers; Underlays
	// are the node's own. Both nil if the node cannot dial (a test host).
	Connect   func(ctx context.Context, peer swarm.Address, underlays [][]byte) error
	Underlays func() [][]byte
}

// Connector dials peers by underlay; bee's libp2p service is one. The
// /pubsub handler uses it to reach a broker given by its multiaddr.
type Connector interface {
	Connect(ctx context.Context, addrs []ma.Multiaddr) (*bzz.Address, error)
}

// PubSubHandlerFactory builds the handler of the API paths under /pubsub for
// a node: pl is the node's plugin (nil without one), conn its libp2p
// service. If the handler is an io.Closer, Shutdown closes it once the API
// port has stopped accepting, before the plugin.
type PubSubHandlerFactory func(pl Plugin, conn Connector, logger log.Logger) (http.Handler, error)

// protocolHost is what attaching a plugin needs of bee's libp2p service.
type protocolHost interface {
	p2p.Streamer
	AddProtocol(p2p.ProtocolSpec) error
	Peers() []p2p.Peer
	Disconnect(overlay swarm.Address, reason string) error
}

// attach builds the plugin with env, the host its streamer and, if the host
// can dial, its dialer; registers its protocol, then catches up: peers
// that connected before the registration (during NewBee, to bootnodes or
// from the addressbook) never fired its connect hooks, so its ConnectOut
// hook runs once for each of them. A peer that connects while this runs may
// see the hook twice (once from libp2p, once from here): hooks must be
// idempotent. Like libp2p, a failing hook disconnects the peer.
func attach(ctx context.Context, host protocolHost, env PluginEnv, factory PluginFactory) (Plugin, error) {
	env.Streamer = host
	if dh, ok := host.(dialingHost); ok {
		env.Connect, env.Underlays = dialer(dh)
	}
	logger := env.Logger
	if logger == nil {
		logger = log.Noop
	}
	pl, err := factory(env)
	if err != nil {
		return nil, fmt.Errorf("plugin: %w", err)
	}
	spec := pl.Protocol()
	specs := []p2p.ProtocolSpec{spec}
	if m, ok := pl.(interface{ Protocols() []p2p.ProtocolSpec }); ok {
		specs = m.Protocols()
	}
	for _, sp := range specs {
		if err := host.AddProtocol(sp); err != nil {
			return nil, fmt.Errorf("plugin: add protocol %s/%s: %w", sp.Name, sp.Version, joinClose(err, pl))
		}
	}
	if spec.ConnectOut == nil {
		return pl, nil
	}
	for _, peer := range host.Peers() {
		if err := spec.ConnectOut(ctx, peer); err != nil {
			logger.Debug("plugin catch-up: connect hook failed", "protocol", spec.Name, "peer_address", peer.Address, "error", err)
			_ = host.Disconnect(peer.Address, "failed to process outbound connection notifier")
		}
	}
	return pl, nil
}

// joinClose closes c and adds its error to err.
func joinClose(err error, c interface{ Close() error }) error {
	if cerr := c.Close(); cerr != nil {
		return fmt.Errorf("%w (close: %w)", err, cerr)
	}
	return err
}

// dialingHost is what dialing needs of bee's libp2p service.
type dialingHost interface {
	Connect(ctx context.Context, addrs []ma.Multiaddr) (*bzz.Address, error)
	Addresses() ([]ma.Multiaddr, error)
	Peers() []p2p.Peer
}

// maxDialUnderlays bounds the underlays tried for one peer.
const maxDialUnderlays = 8

// dialer adapts h to PluginEnv's Connect and Underlays: connect does nothing if the
// peer is connected already, else dials the underlays (binary multiaddrs)
// and checks that the overlay answering is the one asked for; underlays
// are h's own addresses, binary.
func dialer(h dialingHost) (func(context.Context, swarm.Address, [][]byte) error, func() [][]byte) {
	connect := func(ctx context.Context, peer swarm.Address, underlays [][]byte) error {
		for _, p := range h.Peers() {
			if p.Address.Equal(peer) {
				return nil
			}
		}
		addrs := make([]ma.Multiaddr, 0, len(underlays))
		for _, u := range underlays[:min(len(underlays), maxDialUnderlays)] {
			a, err := ma.NewMultiaddrBytes(u)
			if err != nil {
				return fmt.Errorf("underlay: %w", err)
			}
			addrs = append(addrs, a)
		}
		if len(addrs) == 0 {
			return fmt.Errorf("no underlay for %s", peer)
		}
		bz, err := h.Connect(ctx, addrs)
		if err != nil && !errors.Is(err, p2p.ErrAlreadyConnected) {
			return err
		}
		if bz != nil && !bz.Overlay.Equal(peer) {
			return fmt.Errorf("dialled %s, answered by %s", peer, bz.Overlay)
		}
		return nil
	}
	underlays := func() [][]byte {
		addrs, err := h.Addresses()
		if err != nil {
			return nil
		}
		out := make([][]byte, 0, len(addrs))
		for _, a := range addrs {
			out = append(out, a.Bytes())
		}
		return out
	}
	return connect, underlays
}
