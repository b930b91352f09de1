// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"fmt"

	beenode "github.com/ethersphere/bee/v2/pkg/node"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/seam"
)

// StreamHolder is a plugin that tells which peers hold its live streams.
// The node keeps those peers out of bee's kademlia bin counts (see
// keepStreamPeers).
type StreamHolder interface {
	HoldsStreams(peer swarm.Address) bool
}

// keepStreamPeers makes bee's kademlia count the peers that hold the
// plugin's live streams as it counts static nodes: not at all. bee v2.8.1
// refuses an inbound full node (at the handshake's Pick, and again in
// Connected) whose bin already holds OverSaturationPeers (18) reachable
// peers, and every five minutes prunes bins shallower than the depth down
// to 18 at random; it has no option for either. Without this a broker's
// audience of full nodes would stop at about 18 per bin, and a subscriber's
// connection could be pruned under its stream. A peer that holds no stream
// still counts, so kademlia bounds every other connection as before.
func keepStreamPeers(b *beenode.Bee, in *seam.Internals, h StreamHolder) error {
	kad, err := seam.Kademlia(b)
	if err != nil {
		return err
	}
	if err := seam.KeepPeers(in.P2P, kad, h.HoldsStreams); err != nil {
		return fmt.Errorf("keep stream peers in kademlia: %w", err)
	}
	return nil
}
