// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// DefaultRelayCapacity is how many children a full node accepts per cohort
// it follows, as a relay (SWIP-61), unless configured: a quarter of a
// broker's default fan-out. Options' zero value relays nothing (a library
// embedding, a light node, which cannot be dialled); NodeOptions relays
// this many.
const DefaultRelayCapacity = DefaultMaxStreamsPerCohort / 4

// NodeOptions are the Options of a full bee-bps node configured with no
// bps-* option, every default filled in: the one source of the node's
// defaults, which bee-bps's flags and bps-sim's scenario both read. A
// subscription keeps two parents (SingleParent false); the prices are
// DefaultPricing's, charged once Deps.Accounting is set.
func NodeOptions() Options {
	o := Options{Tree: Tree{RelayCapacity: DefaultRelayCapacity}, Pricing: DefaultPricing()}
	o.setDefaults()
	o.Logger = nil // setDefaults' no-op logger: the caller's to set
	return o
}
