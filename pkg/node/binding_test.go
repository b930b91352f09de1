// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/addressbook"
	"github.com/ethersphere/bee/v2/pkg/bzz"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/node"
	"github.com/libp2p/go-libp2p/core/network"
	libp2ppeer "github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

type book map[string]*bzz.Address

func (b book) Get(o swarm.Address) (*bzz.Address, bool, error) {
	if a, ok := b[o.ByteString()]; ok {
		return a, true, nil
	}
	return nil, false, addressbook.ErrNotFound
}

// connStream is a p2p.Stream on a libp2p connection from remote, opened in
// direction dir.
type connStream struct {
	p2p.Stream
	conn network.Conn
	dir  network.Direction
}

func (s connStream) Conn() network.Conn { return s.conn }

func (s connStream) Stat() network.Stats { return network.Stats{Direction: s.dir} }

type remoteConn struct {
	network.Conn
	id libp2ppeer.ID
}

func (c remoteConn) RemotePeer() libp2ppeer.ID { return c.id }

const (
	idA = "QmdUqT7DLbnDNZiJf8VP4YL9uEJL1LU7ntV9RUWZwXP4Qe"
	idB = "QmT9VCsdnyXsxSk1FchxXzAqdLFe3kNP7P2eobNX7AjzZX"
)

// TestTransportBinding: SWIP-74 item 11 by direction. An outgoing stream
// (this node will claim against the peer's overlay) passes iff the peer's
// signed address record names the connection's peer id; an incoming one
// passes without a record (bee keeps none for light nodes) and is refused,
// by disconnecting and not blocklisting, when a record names another peer
// id.
func TestTransportBinding(t *testing.T) {
	t.Parallel()
	bound := swarm.RandAddress(t)
	u := ma.StringCast("/ip4/127.0.0.1/tcp/1634/p2p/" + idA)
	check := node.TransportBinding(book{bound.ByteString(): {Overlay: bound, Underlays: []ma.Multiaddr{u}}})
	peerA, _ := libp2ppeer.Decode(idA)
	peerB, _ := libp2ppeer.Decode(idB)
	unknown := swarm.RandAddress(t) // a light node: no record
	ctx := context.Background()

	for _, tc := range []struct {
		name       string
		overlay    swarm.Address
		from       libp2ppeer.ID
		dir        network.Direction
		unbound    bool // fails with ErrUnbound
		disconnect bool // as a p2p.DisconnectError
	}{
		{"outgoing, bound", bound, peerA, network.DirOutbound, false, false},
		{"outgoing, record replayed over another connection", bound, peerB, network.DirOutbound, true, false},
		{"outgoing, no record", unknown, peerA, network.DirOutbound, true, false},
		{"incoming, bound", bound, peerA, network.DirInbound, false, false},
		{"incoming, record replayed over another connection", bound, peerB, network.DirInbound, true, true},
		{"incoming, no record (a light node)", unknown, peerA, network.DirInbound, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := check(ctx, p2p.Peer{Address: tc.overlay}, connStream{conn: remoteConn{id: tc.from}, dir: tc.dir})
			if got := errors.Is(err, node.ErrUnbound); got != tc.unbound {
				t.Fatalf("err %v, want ErrUnbound %v", err, tc.unbound)
			}
			var de *p2p.DisconnectError
			if got := errors.As(err, &de); got != tc.disconnect {
				t.Fatalf("err %v: a DisconnectError %v, want %v", err, got, tc.disconnect)
			}
			var be *p2p.BlockPeerError
			if errors.As(err, &be) {
				t.Fatalf("err %v blocklists the overlay", err)
			}
		})
	}

	if err := check(ctx, p2p.Peer{Address: bound}, nil); err != nil {
		t.Fatalf("a stream without a connection: %v", err)
	}

	failing := node.TransportBinding(brokenBook{})
	err := failing(ctx, p2p.Peer{Address: bound}, connStream{conn: remoteConn{id: peerA}, dir: network.DirInbound})
	if err == nil || errors.Is(err, node.ErrUnbound) {
		t.Fatalf("a failing addressbook: %v, want its error", err)
	}
}

// brokenBook is an addressbook whose store fails.
type brokenBook struct{}

func (brokenBook) Get(swarm.Address) (*bzz.Address, bool, error) {
	return nil, false, errors.New("disk on fire")
}
