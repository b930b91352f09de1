// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/ethersphere/bee/v2/pkg/bzz"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	ma "github.com/multiformats/go-multiaddr"
)

// Plugin is a p2p protocol attached to a running bee node. If it also has
// Metrics() []prometheus.Collector (bee's metrics.Collector), those are
// registered with bee's metrics and served by its /metrics.
type Plugin interface {
	// Protocol is registered with the node's libp2p service once.
	Protocol() p2p.ProtocolSpec
	// Close is called on Shutdown, after the API port has stopped and
	// before bee shuts down; streams are still open then.
	Close() error
}

// PluginFactory builds a plugin for a node: streamer opens streams over the
// node's libp2p service, overlay is the node's address.
type PluginFactory func(streamer p2p.Streamer, overlay swarm.Address, logger log.Logger) (Plugin, error)

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

// attach builds the plugin, registers its protocol, then catches up: peers
// that connected before the registration (during NewBee, to bootnodes or
// from the addressbook) never fired its connect hooks, so its ConnectOut
// hook runs once for each of them. A peer that connects while this runs may
// see the hook twice (once from libp2p, once from here): hooks must be
// idempotent. Like libp2p, a failing hook disconnects the peer.
func attach(ctx context.Context, host protocolHost, overlay swarm.Address, logger log.Logger, factory PluginFactory, check PeerCheck) (Plugin, error) {
	pl, err := factory(host, overlay, logger)
	if err != nil {
		return nil, fmt.Errorf("plugin: %w", err)
	}
	if pc, ok := pl.(PeerChecker); ok && check != nil {
		pc.SetPeerCheck(check)
	}
	if d, ok := pl.(Dialer); ok {
		if dh, ok := host.(dialingHost); ok {
			d.SetDialer(dialer(dh))
		}
	}
	spec := pl.Protocol()
	if err := host.AddProtocol(spec); err != nil {
		return nil, fmt.Errorf("plugin: add protocol %s/%s: %w", spec.Name, spec.Version, joinClose(err, pl))
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

// Dialer is a plugin that reaches peers by underlay beyond those it is
// connected to (BPS: a relay a probe named): the node gives it a connect
// function over its libp2p service and its own underlays.
type Dialer interface {
	SetDialer(connect func(ctx context.Context, peer swarm.Address, underlays [][]byte) error, underlays func() [][]byte)
}

// dialingHost is what dialing needs of bee's libp2p service.
type dialingHost interface {
	Connect(ctx context.Context, addrs []ma.Multiaddr) (*bzz.Address, error)
	Addresses() ([]ma.Multiaddr, error)
	Peers() []p2p.Peer
}

// maxDialUnderlays bounds the underlays tried for one peer.
const maxDialUnderlays = 8

// dialer adapts h to a Dialer's functions: connect does nothing if the
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
