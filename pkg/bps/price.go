// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// Price arithmetic and frame classification: what a frame costs, whether a
// frame is priced, and when a ledger settles. Pure: no state and no locks;
// the ledgers that count with it are in ledger.go, the Service's pricing
// API in pricing.go.

import (
	"math"
	"math/bits"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// BeeBasePrice is bee's base price in v2.8.1 (pkg/node: basePrice, not
// exported): what a retrieval or a pushsync hop costs for a chunk at the
// largest proximity, the cheapest chunk bee moves.
const BeeBasePrice = 10_000

// DefaultPrice is the default price of a delivery and of a publication's
// hop: bee's base price shared by a relay's default fan-out, so that a
// relay passing one update to its DefaultRelayCapacity children earns what
// a chunk's hop earns in bee. At it, pseudosettle's refresh alone
// (BeeRefreshRate) pays for 7,200 deliveries a second from a full-node
// parent to each child (720 to a light node).
const DefaultPrice = BeeBasePrice / DefaultRelayCapacity

// Prices are what BPS charges, in bee's accounting units. Node configuration
// (bps-delivery-price, bps-publish-price): both ends of a stream must agree
// on them, as bee's nodes agree on the base price; a node whose prices
// differ keeps a ledger its peers do not, and is cut by bee's accounting
// when the difference passes the threshold.
type Prices struct {
	// Delivery is what a child owes its parent for each Message the parent
	// writes down to it.
	Delivery uint64
	// Publish is what a child at depth d owes its parent, times d, for each
	// Message it writes up.
	Publish uint64
}

// DefaultPrices are DefaultPrice for a delivery and for each hop of a
// publication.
func DefaultPrices() Prices { return Prices{Delivery: DefaultPrice, Publish: DefaultPrice} }

// Settlement is when a peer's ledger applies what its streams counted (see
// meter). The zero value of a field takes its default.
type Settlement struct {
	// Frames: a ledger applies once it holds this many priced frames.
	// Default DefaultSettleFrames; 1 applies every frame on its own.
	Frames int
	// Credit: ... or once what it holds would pass this many units.
	// Default DefaultSettleCredit.
	Credit uint64
	// Interval: ... or at most this long after the first charge it holds.
	// Default DefaultSettleInterval.
	Interval time.Duration
	// Margin: what a child keeps back of what it counted with a peer,
	// applied only when its last stream with that peer ends, so that its
	// ledger never stands above its parent's (see meter). Default: what a
	// parent settling alike may hold unapplied (Credit or Frames frames,
	// whichever is less) and one write of 32 frames in flight each way on
	// each stream, at the dearest price of the streams, at most twice
	// Credit: 80,000 units at the default prices, depth 1 and one stream;
	// 180,000 from four streams on. Negative: none, the child applies as a
	// parent does — for a test of the batches, or an accounting that never
	// settles by refresh.
	Margin int64
	// Debt: at a parent, what a child on a receipted stream may owe in
	// bee's accounting — its balance, what the ledger holds unapplied and
	// the deliveries written it has not acknowledged — before the parent
	// stops writing it deliveries until it pays (receipt.go). Default
	// (0): the payment threshold this node gave the peer (bee's
	// PeerAccounting, ThresholdGiven), 80 % of the limit at which bee
	// disconnects it; none if bee knows none. Negative: no bound.
	Debt int64
	// Receipt: a child sends its parent a receipt on a multihop stream once
	// this many deliveries are untold (and receiptDelay after the first
	// untold one). Default 16.
	Receipt int
}

// BeeRefreshRate is what bee v2.8.1's pseudosettle refreshes a full node
// per second, in accounting units (pkg/node: refreshRate, not exported); a
// light node gets a tenth.
const BeeRefreshRate = 4_500_000

// Default values of Settlement.
const (
	// DefaultSettleFrames is twice the frames one write batches.
	DefaultSettleFrames = 2 * maxBatchFrames
	// DefaultSettleCredit is what pseudosettle refreshes a full node in
	// 20 ms: 1/150 of bee's default payment threshold (13.5 M), 1/15 of a
	// light node's, well inside the 25 % tolerance above either at which
	// bee disconnects a debtor.
	DefaultSettleCredit = BeeRefreshRate / 50
	// DefaultSettleInterval is pseudosettle's own period.
	DefaultSettleInterval = time.Second
)

func (st Settlement) withDefaults() Settlement {
	if st.Frames <= 0 {
		st.Frames = DefaultSettleFrames
	}
	if st.Credit == 0 {
		st.Credit = DefaultSettleCredit
	}
	if st.Interval <= 0 {
		st.Interval = DefaultSettleInterval
	}
	return st
}

// upPrice is Prices.Publish × the depth of a child of a parent that stated
// depth, saturated.
func (p Prices) upPrice(stated uint32) uint64 {
	hi, lo := bits.Mul64(p.Publish, uint64(stated)+1)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// keep is a child's margin with a peer over streams streams whose dearest
// Message costs unit: what its parent's ledger, settling alike, may hold
// unapplied — Credit or Frames frames, whichever is less — and, on each
// stream, a write of maxBatchFrames the parent counts only once it has
// passed and one the child counts only once it has passed; at most twice
// Credit, so that the margin does not delay the child's early payment past
// what bee tolerates (a light node's 25 %: 337,500 units, less what the
// child may hold past its margin). The cap takes over from four streams on
// at the defaults: a refresh sent while more than that many writes are in
// flight at once could be accepted short.
func (st Settlement) keep(unit uint64, streams int) uint64 {
	switch {
	case st.Margin < 0:
		return 0
	case st.Margin > 0:
		return uint64(st.Margin)
	}
	hold := min(st.Credit, price(unit, st.Frames))
	inFlight := price(unit, maxBatchFrames)
	k := hold + price(inFlight, 2*streams)
	if k < hold {
		k = math.MaxUint64
	}
	return min(k, 2*min(st.Credit, math.MaxUint64/2))
}

// lateDelay is how long after a child's last stream with a peer ended it
// applies the margin it kept (Settlement.Interval, at most 250 ms): its
// parent applies what it holds as it sees the stream end, and the end
// travels ahead of the payment on the same connection. Longer would lose
// the margin to a connection bee prunes once its last stream has ended.
func (st Settlement) lateDelay() time.Duration { return min(st.Interval, 250*time.Millisecond) }

// price is unit × n, saturated.
func price(unit uint64, n int) uint64 {
	hi, lo := bits.Mul64(unit, uint64(n))
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// pricedOut reports whether the writer charges for f: a Broadcast (a bare
// frame whose kind is unset is one).
func pricedOut(f *outFrame) bool {
	return f.b != nil && !f.free && (f.kind == 0 || f.kind == kindBroadcast)
}

// pricedUp reports whether a frame read from a child is a Broadcast: every
// bare frame is; an envelope's says so.
func pricedUp(cd codec, b []byte) bool {
	if cd != codecBare {
		return envelopeKind(b) == kindBroadcast
	}
	return true
}

// envelopeKind is the kind of an envelope's frame: its first field's
// number, 0 if it has none.
func envelopeKind(b []byte) frameKind {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || typ != protowire.BytesType || num > math.MaxUint8 {
		return 0
	}
	return frameKind(num)
}
