// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"cmp"
	"math/big"
	"slices"

	"github.com/ethersphere/bee/v2/pkg/bigint"
)

// pricingInfo is what BPS charges for depth on bee's accounting and what it
// has charged each peer it holds priced streams with (GET /pubsub/,
// "pricing"; docs/protocol.md, "Prices"). bee's GET /balances shows the
// same charges inside each peer's whole balance, with pushsync's and
// retrieval's. Amounts are bee's accounting units, as decimal strings like
// bee's.
type pricingInfo struct {
	DeliveryPrice *bigint.BigInt `json:"deliveryPrice"` // a child owes its parent per delivery
	PublishPrice  *bigint.BigInt `json:"publishPrice"`  // per hop: a publication from depth d costs d × this
	Peers         []peerCharges  `json:"peers"`
}

// peerCharges is what BPS moved on bee's accounting with one peer over the
// streams this node holds with it now.
type peerCharges struct {
	Peer string `json:"peer"` // hex overlay
	// Balance is Debited − Credited, in bee's sign: positive, the peer owes
	// this node for BPS; negative, this node owes the peer.
	Balance  *bigint.BigInt `json:"balance"`
	Debited  *bigint.BigInt `json:"debited"`  // charged to the peer: deliveries to it, its publications
	Credited *bigint.BigInt `json:"credited"` // charged to this node by the peer
	Streams  int            `json:"streams"`  // priced streams with the peer
}

// pricing is the "pricing" of GET /pubsub/; nil if the node charges
// nothing.
func (s *Server) pricing() *pricingInfo {
	p := s.svc.Prices()
	if p.Delivery == 0 && p.Publish == 0 {
		return nil
	}
	u := func(v uint64) *big.Int { return new(big.Int).SetUint64(v) }
	out := &pricingInfo{DeliveryPrice: bigint.Wrap(u(p.Delivery)), PublishPrice: bigint.Wrap(u(p.Publish)), Peers: []peerCharges{}}
	for _, c := range s.svc.Charges() {
		out.Peers = append(out.Peers, peerCharges{
			Peer:     c.Peer.String(),
			Balance:  bigint.Wrap(new(big.Int).Sub(u(c.Debited), u(c.Credited))),
			Debited:  bigint.Wrap(u(c.Debited)),
			Credited: bigint.Wrap(u(c.Credited)),
			Streams:  c.Streams,
		})
	}
	slices.SortFunc(out.Peers, func(a, b peerCharges) int { return cmp.Compare(a.Peer, b.Peer) })
	return out
}
