// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Accountant is a plugin that charges its peers on bee's accounting: the
// node hands it bee's own (the accounting.Interface pushsync and retrieval
// use, settled by pseudosettle and swap, shown by GET /balances) once it is
// built, before its protocol is registered. A plugin may hold charges and
// apply them in batches (BPS does, pkg/bps/pricing.go): Shutdown closes the
// plugin before bee, so what it applies as its streams end reaches a live
// accounting.
type Accountant interface {
	SetAccounting(accounting.Interface)
}

// withAccounting builds plugins with factory and hands acc to those that
// are an Accountant.
func withAccounting(factory PluginFactory, acc accounting.Interface) PluginFactory {
	return func(streamer p2p.Streamer, overlay swarm.Address, logger log.Logger) (Plugin, error) {
		pl, err := factory(streamer, overlay, logger)
		if err != nil {
			return nil, err
		}
		if a, ok := pl.(Accountant); ok && acc != nil {
			a.SetAccounting(acc)
		}
		return pl, nil
	}
}
