// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethersphere/bee/v2/pkg/addressbook"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/libp2p/go-libp2p/core/network"
	libp2ppeer "github.com/libp2p/go-libp2p/core/peer"
)

// PeerCheck vets an incoming protocol stream before the plugin reads it.
type PeerCheck func(ctx context.Context, peer p2p.Peer, stream p2p.Stream) error

// PeerChecker is a plugin that takes a PeerCheck; the node gives it the
// transport binding check before registering its protocol.
type PeerChecker interface {
	SetPeerCheck(PeerCheck)
}

// ErrUnbound is returned by the transport binding check when a peer's signed
// address record does not name the connection's peer id.
var ErrUnbound = errors.New("signed address record does not name the connection's peer id")

// TransportBinding is SWIP-74 item 11's check, which bee's handshake does not
// make: the signed address record a peer presented in its handshake (bee's
// addressbook keeps it) must name the authenticated peer id of the
// connection the stream arrived on. Without it a record that is merely
// self-consistent — signed by the overlay's key, but replayed by someone who
// saw it — would bind the overlay, and so a claim's O_B, to an impostor.
//
// bee hands a handler its libp2p stream, whose connection it reaches through
// network.Stream's Conn; a stream that is not a libp2p one (an in-memory test
// network) has no connection to check and passes.
func TransportBinding(book addressbook.Getter) PeerCheck {
	return func(_ context.Context, peer p2p.Peer, stream p2p.Stream) error {
		cs, ok := stream.(interface{ Conn() network.Conn })
		if !ok {
			return nil
		}
		remote := cs.Conn().RemotePeer()
		rec, _, err := book.Get(peer.Address)
		if err != nil {
			return fmt.Errorf("%w: no record for %s: %w", ErrUnbound, peer.Address, err)
		}
		for _, u := range rec.Underlays {
			if id, err := libp2ppeer.IDFromP2PAddr(u); err == nil && id == remote {
				return nil
			}
		}
		return fmt.Errorf("%w: %s's record names none of connection peer %s", ErrUnbound, peer.Address, remote)
	}
}
