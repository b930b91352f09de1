// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package seam

import (
	"reflect"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// CheckType and ReadStruct run the shape check and the read on any struct,
// so tests can feed them look-alikes of node.Bee.
var (
	CheckType  = check
	ReadStruct = read
)

// KeepPeersIn runs KeepPeers on look-alikes of libp2p.Service and
// kademlia.Kad (pointers to structs).
func KeepPeersIn(p2ps, kad any, keep func(swarm.Address) bool) error {
	return keepPeers(reflect.ValueOf(p2ps).Elem(), reflect.ValueOf(kad).Elem(), keep)
}
