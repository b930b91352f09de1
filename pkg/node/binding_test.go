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

// connStream is a p2p.Stream on a libp2p connection from remote.
type connStream struct {
	p2p.Stream
	conn network.Conn
}

func (s connStream) Conn() network.Conn { return s.conn }

type remoteConn struct {
	network.Conn
	id libp2ppeer.ID
}

func (c remoteConn) RemotePeer() libp2ppeer.ID { return c.id }

const (
	idA = "QmdUqT7DLbnDNZiJf8VP4YL9uEJL1LU7ntV9RUWZwXP4Qe"
	idB = "QmT9VCsdnyXsxSk1FchxXzAqdLFe3kNP7P2eobNX7AjzZX"
)

// TestTransportBinding: a stream passes iff the peer's signed address
// record names the connection's peer id (SWIP-74 item 11).
func TestTransportBinding(t *testing.T) {
	t.Parallel()
	overlay := swarm.RandAddress(t)
	u := ma.StringCast("/ip4/127.0.0.1/tcp/1634/p2p/" + idA)
	check := node.TransportBinding(book{overlay.ByteString(): {Overlay: overlay, Underlays: []ma.Multiaddr{u}}})
	peerA, _ := libp2ppeer.Decode(idA)
	peerB, _ := libp2ppeer.Decode(idB)
	ctx := context.Background()

	if err := check(ctx, p2p.Peer{Address: overlay}, connStream{conn: remoteConn{id: peerA}}); err != nil {
		t.Fatalf("bound record refused: %v", err)
	}
	if err := check(ctx, p2p.Peer{Address: overlay}, connStream{conn: remoteConn{id: peerB}}); !errors.Is(err, node.ErrUnbound) {
		t.Fatalf("a record replayed over another connection: %v, want ErrUnbound", err)
	}
	if err := check(ctx, p2p.Peer{Address: swarm.RandAddress(t)}, connStream{conn: remoteConn{id: peerA}}); !errors.Is(err, node.ErrUnbound) {
		t.Fatalf("no record: %v, want ErrUnbound", err)
	}
	if err := check(ctx, p2p.Peer{Address: overlay}, nil); err != nil {
		t.Fatalf("a stream without a connection: %v", err)
	}
}
