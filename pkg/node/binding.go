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

// PeerCheck vets a protocol stream: an incoming one before the plugin reads
// it, and an outgoing one before the plugin commits to the peer's overlay
// (BPS: before it sends a claim signed over a broker's overlay).
type PeerCheck func(ctx context.Context, peer p2p.Peer, stream p2p.Stream) error

// ErrUnbound is returned by the transport binding check when a peer's signed
// address record does not name the connection's peer id, or when an
// outgoing stream's peer has no record at all.
var ErrUnbound = errors.New("signed address record does not name the connection's peer id")

// TransportBinding is SWIP-74 item 11's check, which bee's handshake does not
// make: the signed address record a peer presented in its handshake (bee's
// addressbook keeps it) must name the authenticated peer id of the
// connection the stream is on. Without it a record that is merely
// self-consistent — signed by the overlay's key, but replayed by someone who
// saw it — would bind the overlay, and so a claim's O_B, to an impostor.
//
// What it asks depends on the stream's direction:
//
//   - Outgoing (this node opened it, and is about to sign a claim over the
//     peer's overlay): the peer must have a record, and it must name the
//     connection's peer id. A node only claims against brokers (later,
//     relays), which are full nodes: bee stores the record of every full
//     node it has shaken hands with.
//   - Incoming, with a record: it must name the connection's peer id. If it
//     does not, the error is a p2p.DisconnectError: bee closes that
//     connection, but the overlay is not blocklisted — the overlay is the
//     very thing in doubt, and blocklisting it would punish the honest owner
//     of a replayed record.
//   - Incoming, without a record: accepted. bee v2.8.1 stores the records of
//     full nodes only, so every light node is in this case. bee's handshake
//     has verified, on this connection, that the peer signed its overlay,
//     and nothing is claimed against a subscriber's or publisher's overlay:
//     a publisher's claim is bound to this node's own overlay, which is
//     checked on the publisher's side.
//
// bee hands a handler its libp2p stream, whose connection and direction it
// reaches through network.Stream's Conn and Stat; a stream that is not a
// libp2p one (an in-memory test network) has no connection to check and
// passes.
func TransportBinding(book addressbook.Getter) PeerCheck {
	return func(_ context.Context, peer p2p.Peer, stream p2p.Stream) error {
		ls, ok := stream.(interface {
			Conn() network.Conn
			Stat() network.Stats
		})
		if !ok {
			return nil
		}
		remote := ls.Conn().RemotePeer()
		outgoing := ls.Stat().Direction == network.DirOutbound
		rec, _, err := book.Get(peer.Address)
		switch {
		case errors.Is(err, addressbook.ErrNotFound) && !outgoing:
			return nil
		case errors.Is(err, addressbook.ErrNotFound):
			return fmt.Errorf("%w: no signed address record of %s (not a full node?) to bind connection peer %s to", ErrUnbound, peer.Address, remote)
		case err != nil:
			return fmt.Errorf("transport binding: addressbook: %w", err)
		}
		for _, u := range rec.Underlays {
			if id, err := libp2ppeer.IDFromP2PAddr(u); err == nil && id == remote {
				return nil
			}
		}
		err = fmt.Errorf("%w: %s's record names none of connection peer %s", ErrUnbound, peer.Address, remote)
		if outgoing {
			return err
		}
		return p2p.NewDisconnectError(err)
	}
}
