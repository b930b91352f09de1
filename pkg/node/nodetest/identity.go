// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package nodetest

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/ethersphere/bee/v2/pkg/addressbook"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/p2p/libp2p"
	statestore "github.com/ethersphere/bee/v2/pkg/statestore/mock"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bee/v2/pkg/topology/lightnode"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node"
	ma "github.com/multiformats/go-multiaddr"
)

// Identity is one bee identity on the network without a whole node: bee's
// own libp2p service (its handshake, its addressbook) with a key of its own,
// the BPS protocol, and nothing else. Many of them stand for many distinct
// nodes at a broker, at the cost of a libp2p host each.
type Identity struct {
	Overlay swarm.Address
	Full    bool
	P2P     *libp2p.Service
	BPS     *bps.Service
}

// IdentityOptions describe an Identity.
type IdentityOptions struct {
	NetworkID uint64
	Full      bool // handshake as a full node
	// Near, when not zero, is an overlay the identity's overlay must have
	// proximity Bin with (mined with the nonce): e.g. many identities in
	// one kademlia bin of a broker.
	Near swarm.Address
	Bin  uint8
	// BPS are the options of the identity's BPS service.
	BPS    bps.Options
	Logger log.Logger // default: none
}

// maxNonceTries bounds the overlay mining: proximity Bin with Near takes
// about 2^(Bin+1) tries.
const maxNonceTries = 1 << 16

// NewIdentity starts an Identity listening on loopback. Its BPS service
// checks transport binding (node.TransportBinding) against its own
// addressbook. Close it.
func NewIdentity(ctx context.Context, o IdentityOptions) (*Identity, error) {
	logger := o.Logger
	if logger == nil {
		logger = log.Noop
	}
	swarmKey, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		return nil, err
	}
	libp2pKey, err := crypto.GenerateSecp256r1Key() // as bee's libp2p key
	if err != nil {
		return nil, err
	}
	overlay, nonce, err := mineOverlay(swarmKey, o)
	if err != nil {
		return nil, err
	}

	store := statestore.NewStateStore()
	book := addressbook.New(store)
	p2ps, err := libp2p.New(ctx, crypto.NewDefaultSigner(swarmKey), o.NetworkID, overlay, "127.0.0.1:0", book, store,
		lightnode.NewContainer(overlay), logger, nil, libp2p.Options{
			PrivateKey:        libp2pKey,
			FullNode:          o.Full,
			Nonce:             nonce,
			AllowPrivateCIDRs: true,
		})
	if err != nil {
		return nil, fmt.Errorf("nodetest: libp2p: %w", err)
	}
	id := &Identity{Overlay: overlay, Full: o.Full, P2P: p2ps}
	fail := func(err error) (*Identity, error) { return nil, errors.Join(err, id.Close()) }

	if err := addDiscarded(p2ps); err != nil {
		return fail(err)
	}
	o.BPS.Logger = logger
	o.BPS.PeerCheck = node.TransportBinding(book)
	if o.BPS.Signer == nil {
		o.BPS.Signer = crypto.NewDefaultSigner(swarmKey) // the heartbeat key, bound to overlay as in a node
	}
	if id.BPS, err = bps.New(p2ps, overlay, o.BPS); err != nil {
		return fail(err)
	}
	for _, spec := range id.BPS.Protocols() {
		if err := p2ps.AddProtocol(spec); err != nil {
			return fail(err)
		}
	}
	if err := p2ps.Ready(); err != nil {
		return fail(err)
	}
	return id, nil
}

// mineOverlay draws nonces until key's overlay falls in bin o.Bin of
// o.Near (any overlay if o.Near is zero).
func mineOverlay(key *ecdsa.PrivateKey, o IdentityOptions) (swarm.Address, []byte, error) {
	nonce := make([]byte, 32)
	for i := 0; i < maxNonceTries; i++ {
		if _, err := rand.Read(nonce); err != nil {
			return swarm.ZeroAddress, nil, err
		}
		overlay, err := crypto.NewOverlayAddress(key.PublicKey, o.NetworkID, nonce)
		if err != nil {
			return swarm.ZeroAddress, nil, err
		}
		if o.Near.IsZero() || swarm.Proximity(o.Near.Bytes(), overlay.Bytes()) == o.Bin {
			return overlay, nonce, nil
		}
	}
	return swarm.ZeroAddress, nil, fmt.Errorf("nodetest: no overlay in bin %d of %s after %d tries", o.Bin, o.Near, maxNonceTries)
}

// addDiscarded takes what a bee node sends every peer it accepts: its
// payment threshold (bee's pricing) and, to a full node, peers it knows
// (bee's hive). An identity takes both and ignores them; without the
// protocols bee would drop the connection.
func addDiscarded(p2ps *libp2p.Service) error {
	for _, spec := range []p2p.ProtocolSpec{
		{Name: "pricing", Version: "1.0.0", StreamSpecs: []p2p.StreamSpec{{Name: "pricing", Handler: discard}}},
		{Name: "hive", Version: "2.0.0", StreamSpecs: []p2p.StreamSpec{{Name: "peers", Handler: discard}}},
	} {
		if err := p2ps.AddProtocol(spec); err != nil {
			return err
		}
	}
	return nil
}

// maxDiscard bounds what a discarded stream may carry.
const maxDiscard = 1 << 20

// discard reads a stream to its end, bounded in size and time, and closes it.
func discard(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
	t := time.AfterFunc(30*time.Second, func() { _ = s.Reset() })
	defer t.Stop()
	if _, err := io.Copy(io.Discard, io.LimitReader(s, maxDiscard)); err != nil {
		_ = s.Reset()
		return err
	}
	return s.FullClose()
}

// Connect dials a node at addrs.
func (id *Identity) Connect(ctx context.Context, addrs []ma.Multiaddr) error {
	_, err := id.P2P.Connect(ctx, addrs)
	return err
}

// Close ends the BPS service, then the libp2p service.
func (id *Identity) Close() error {
	var errs []error
	if id.BPS != nil {
		errs = append(errs, id.BPS.Close())
	}
	errs = append(errs, id.P2P.Close())
	return errors.Join(errs...)
}
