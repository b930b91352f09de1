// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"fmt"
	"time"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Options configure a Service, in groups: each has its defaults (Default…)
// and its validation, and New names the group a bad value is in. A zero
// field takes its group's default; every bound is node policy and nothing
// of it is on the wire. The groups are embedded, so that a field reads as
// o.QueueLen whatever its group.
type Options struct {
	Bounds
	Timing
	Tree
	Pricing
	Wire
	Deps
}

// Bounds are the resource bounds of a node (SWIP-74's values where it
// gives one).
type Bounds struct {
	// MaxStreamsPerCohort bounds the fan-out set (subscriber streams) of a
	// cohort; one extra seat is admitted for an absent admin. Default 64.
	MaxStreamsPerCohort int
	// MaxPublisherStreams bounds the claimed publisher streams of a cohort.
	// Default 8.
	MaxPublisherStreams int
	// MaxCohorts bounds the live cohorts of this broker. Default 1024.
	MaxCohorts int
	// MaxCohortsPerPeer bounds the cohorts one peer connection may hold
	// streams in. Default 16.
	MaxCohortsPerPeer int
	// QueueLen is the outbound queue per subscriber stream, in frames; a full
	// queue resets that stream. Default 64.
	QueueLen int
	// MaxInvalidFrames is how many invalid publications (bad SOC, wrong owner,
	// not a bare index) a publisher stream may send before it is reset and
	// its peer blocklisted. Default 8.
	MaxInvalidFrames int
	// DedupWindow is the number of recent chunk identifiers a cohort (and a
	// subscription) remembers under a binding that dedups on chunk address
	// (SWIP-60's bounded horizon). Default 256.
	DedupWindow int
	// EndedCohorts bounds how many cohorts ended by END_OF_STREAM the broker
	// remembers, so that a later Join for one is told of the end rather than
	// creating a fresh cohort; the least recently ended is forgotten first.
	// Default 1024.
	EndedCohorts int
	// ClientCursors bounds the subscriber cursors kept per (topic, admin).
	// Default 4096; the least recently used is forgotten first.
	ClientCursors int
	// PublishRate bounds, where anyone may author (implicit authorship,
	// ALL), the publications a node takes from one owner address in a
	// cohort, and from one publisher stream, a second; past it they are
	// dropped and counted rate_limited. Default 100.
	PublishRate int
	// PublishBurst is how many publications past PublishRate an owner or a
	// stream may send at once. Default 1000.
	PublishBurst int
	// PeerProbeRounds bounds the probe rounds one peer's Joins start at
	// this node, over all cohorts: a token bucket of this many, refilled
	// at this many per 10 s. A Join past it is answered from the pool only
	// (or held for others' rounds at a crowded root), counted
	// (docs/protocol.md, "Threat model"). Default 8.
	PeerProbeRounds int
	// PrefixProbeRounds bounds the same for all peers whose overlays share
	// a leading byte, since overlays are cheap to mine. Default 64.
	PrefixProbeRounds int
}

// Timing are a node's deadlines, timeouts and backoff.
type Timing struct {
	// Inactivity reclaims a cohort that accepted no message for this long.
	// Default 10 minutes.
	Inactivity time.Duration
	// ClaimDeadline disconnects a pending or silent stream that has not
	// claimed by then (SWIP-74 Rev 8). Default 30 seconds.
	ClaimDeadline time.Duration
	// RevocationGrace is how long a publisher a roster revoked may still
	// send, tolerated, after the roster was written to its stream (SWIP-60
	// rev 14). Default 5 seconds.
	RevocationGrace time.Duration
	// BlocklistDuration is how long a violating peer is blocklisted. Default
	// p2p.DefaultBlocklistTime.
	BlocklistDuration time.Duration
	// BackoffMin and BackoffMax bound the client's randomised exponential
	// backoff after FULL, REJECTED or a reset. Defaults 1 s and 30 s.
	BackoffMin, BackoffMax time.Duration
	// HandshakeTimeout bounds the wait for a Join or an Ack. Default 30 s.
	HandshakeTimeout time.Duration
	// WriteTimeout bounds one frame write on a stream. Default 30 s.
	WriteTimeout time.Duration
	// EndedTTL is how long the broker remembers an ended cohort. Default 1 h.
	EndedTTL time.Duration
	// EndGrace bounds how long a stream of an ended cohort may stay open
	// after the broker delivered END_OF_STREAM and closed its side; then it
	// is reset. Default 5 s.
	EndGrace time.Duration
}

// Tree are the parameters of a node's place in a cohort's tree (SWIP-61):
// relaying, probing, parents and their judgement.
type Tree struct {
	// RelayCapacity is how many children this node accepts, per cohort it
	// follows, as a relay (SWIP-61); 0: it does not relay, and answers a
	// Join for a cohort it only follows as a node at capacity with no
	// subtree. A broker's own fan-out is MaxStreamsPerCohort. Default 0
	// (NodeOptions: DefaultRelayCapacity).
	RelayCapacity int
	// ProbeWait bounds how long a node at capacity waits for its subtree's
	// candidates before it answers a joiner (SWIP-61); a node forwarding a
	// probe waits half of it. Default 2 s.
	ProbeWait time.Duration
	// SingleParent keeps every subscription single-parented (SWIP-61 allows
	// it on self-indexed feeds, SWIP-65); by default a subscription keeps
	// two parents when the tree can offer them.
	SingleParent bool
	// NoLazyPush: this node speaks no lazy push (lazy.go): its Joins and
	// Acks never set push, so both parents of its subscriptions send every
	// delivery whole, and so does it to every child. By default a
	// subscription's second parent only announces what it takes and sends
	// it when asked, and this node does the same for a child that asks it
	// to (negotiated per stream: a peer that does not speak it gets every
	// frame whole).
	NoLazyPush bool
	// LazyWait is how long, at least, a subscription waits for a delivery
	// a lazy parent announced to come from its eager parent before it
	// asks the lazy one; the wait follows how late the eager parent's
	// frames have come, up to 500 ms (or LazyWait, if longer). Default
	// 100 ms.
	LazyWait time.Duration
	// MaxLag is how many deliveries one parent may miss that its sister
	// gave, among the last LagWindow the node accepted, before it is
	// dropped as withholding and replaced (SWIP-61). Default 8.
	MaxLag int
	// Heartbeat is the period at which this node, as a cohort's root,
	// signs and sends a HEARTBEAT down the tree: each publisher's latest
	// accepted index, so that a node whose parents withhold a publisher
	// sees the silence as a gap (heartbeat.go). Explicit FEED_TOPIC
	// cohorts only. Default 2 s; negative: none (the Ack states none, and
	// this node's subscriptions still judge what their roots send).
	Heartbeat time.Duration
}

// Pricing is what the node charges for depth on bee's accounting
// (Deps.Accounting; price.go, ledger.go): zero Prices, or no accounting,
// charge nothing.
type Pricing struct {
	// Prices are the prices charged; zero: nothing is charged (there is no
	// default: DefaultPrices are a node's, NodeOptions).
	Prices Prices
	// Settlement is when each stream's meter applies what it counted; its
	// zero fields take their defaults.
	Settlement Settlement
}

// Deps are what the Service is given to work with: the node's logger,
// accounting, peer check and dialer, and the observers of its events. Each
// may be nil.
type Deps struct {
	// Logger is the node logger; default a no-op logger.
	Logger log.Logger
	// Accounting is bee's accounting, charged Pricing.Prices (pushsync and
	// retrieval charge the same one); nil: the Service charges nothing.
	Accounting accounting.Interface
	// PeerCheck, when set, runs before a Join is read on every incoming
	// stream, and on every outgoing publisher stream of a cohort under
	// explicit authorship before a claim is sent on it. On an incoming
	// stream an error resets the stream and blocklists the peer, except a
	// p2p.DisconnectError, which is returned to bee as is (bee closes the
	// connection); on an outgoing one the publish fails. The node uses it
	// for SWIP-74 item 11: a broker's signed address record must name the
	// connection's authenticated peer id before a claim is signed over its
	// overlay.
	PeerCheck func(ctx context.Context, peer p2p.Peer, stream p2p.Stream) error
	// Connect, if set, connects this node to peer at underlays before it
	// attaches there (a probe's candidate, a reparent's target); nil:
	// peers are assumed reachable by overlay.
	Connect func(ctx context.Context, peer swarm.Address, underlays [][]byte) error
	// Underlays, if set, returns this node's own underlay addresses, named
	// in the candidates it offers and the reparents it sends.
	Underlays func() [][]byte
	// Tracer observes protocol events (tests, simulator); may be nil.
	Tracer Tracer
	// Metrics, if set, are the Prometheus collectors the Service counts
	// on, shared with every Service given the same; nil: its own, as a
	// node has. A process that runs many nodes (a simulator) shares one
	// set, each node's counts then add up in it, to save a node the
	// collectors' memory (about 9 KB).
	Metrics *Metrics
	// Signer is the key this node signs its heartbeats with as a root
	// (heartbeat.go): the node's bee signer, whose Ethereum address bee's
	// handshake binds to its overlay. nil: a key drawn when the Service is
	// made (a test network, the simulator).
	Signer crypto.Signer
}

// Default values of Options.
const (
	DefaultMaxStreamsPerCohort = 64
	DefaultMaxPublisherStreams = 8
	DefaultMaxCohorts          = 1024
	DefaultMaxCohortsPerPeer   = 16
	DefaultQueueLen            = 64
	DefaultInactivity          = 10 * time.Minute
	DefaultClaimDeadline       = 30 * time.Second
	DefaultRevocationGrace     = 5 * time.Second
	DefaultMaxInvalidFrames    = 8
	DefaultBackoffMin          = time.Second
	DefaultBackoffMax          = 30 * time.Second
	DefaultHandshakeTimeout    = 30 * time.Second
	DefaultWriteTimeout        = 30 * time.Second
	DefaultClientCursors       = 4096
	DefaultDedupWindow         = 256
	DefaultEndedCohorts        = 1024
	DefaultPublishRate         = 100
	DefaultPublishBurst        = 1000
	DefaultEndedTTL            = time.Hour
	DefaultEndGrace            = 5 * time.Second
	DefaultProbeWait           = 2 * time.Second
	DefaultMaxLag              = 8
	DefaultLazyWait            = 100 * time.Millisecond
	DefaultPeerProbeRounds     = 8
	DefaultPrefixProbeRounds   = 64
)

// DefaultBounds are the bounds a zero Bounds field takes.
func DefaultBounds() Bounds {
	return Bounds{
		MaxStreamsPerCohort: DefaultMaxStreamsPerCohort,
		MaxPublisherStreams: DefaultMaxPublisherStreams,
		MaxCohorts:          DefaultMaxCohorts,
		MaxCohortsPerPeer:   DefaultMaxCohortsPerPeer,
		QueueLen:            DefaultQueueLen,
		MaxInvalidFrames:    DefaultMaxInvalidFrames,
		DedupWindow:         DefaultDedupWindow,
		EndedCohorts:        DefaultEndedCohorts,
		ClientCursors:       DefaultClientCursors,
		PublishRate:         DefaultPublishRate,
		PublishBurst:        DefaultPublishBurst,
		PeerProbeRounds:     DefaultPeerProbeRounds,
		PrefixProbeRounds:   DefaultPrefixProbeRounds,
	}
}

// DefaultTiming is the timing a zero Timing field takes.
func DefaultTiming() Timing {
	return Timing{
		Inactivity:        DefaultInactivity,
		ClaimDeadline:     DefaultClaimDeadline,
		RevocationGrace:   DefaultRevocationGrace,
		BlocklistDuration: p2p.DefaultBlocklistTime,
		BackoffMin:        DefaultBackoffMin,
		BackoffMax:        DefaultBackoffMax,
		HandshakeTimeout:  DefaultHandshakeTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		EndedTTL:          DefaultEndedTTL,
		EndGrace:          DefaultEndGrace,
	}
}

// DefaultTree are the tree parameters a zero Tree field takes: no relaying
// (a library embedding; NodeOptions relays), two parents, lazy push.
func DefaultTree() Tree {
	return Tree{ProbeWait: DefaultProbeWait, LazyWait: DefaultLazyWait, MaxLag: DefaultMaxLag}
}

// DefaultPricing is a node's pricing: DefaultPrices, settled at the
// defaults of Settlement.
func DefaultPricing() Pricing {
	return Pricing{Prices: DefaultPrices(), Settlement: Settlement{}.withDefaults()}
}

// setDefaults fills every zero field with its group's default.
func (o *Options) setDefaults() {
	o.Bounds.setDefaults()
	o.Timing.setDefaults()
	o.Tree.setDefaults()
	o.Wire.setDefaults()
	if o.Logger == nil {
		o.Logger = log.Noop
	}
}

func (b *Bounds) setDefaults() {
	d := DefaultBounds()
	for _, f := range []struct {
		v *int
		d int
	}{
		{&b.MaxStreamsPerCohort, d.MaxStreamsPerCohort},
		{&b.MaxPublisherStreams, d.MaxPublisherStreams},
		{&b.MaxCohorts, d.MaxCohorts},
		{&b.MaxCohortsPerPeer, d.MaxCohortsPerPeer},
		{&b.QueueLen, d.QueueLen},
		{&b.MaxInvalidFrames, d.MaxInvalidFrames},
		{&b.DedupWindow, d.DedupWindow},
		{&b.EndedCohorts, d.EndedCohorts},
		{&b.ClientCursors, d.ClientCursors},
		{&b.PublishRate, d.PublishRate},
		{&b.PublishBurst, d.PublishBurst},
		{&b.PeerProbeRounds, d.PeerProbeRounds},
		{&b.PrefixProbeRounds, d.PrefixProbeRounds},
	} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
}

func (t *Timing) setDefaults() {
	d := DefaultTiming()
	for _, f := range []struct {
		v *time.Duration
		d time.Duration
	}{
		{&t.Inactivity, d.Inactivity},
		{&t.ClaimDeadline, d.ClaimDeadline},
		{&t.RevocationGrace, d.RevocationGrace},
		{&t.BlocklistDuration, d.BlocklistDuration},
		{&t.BackoffMin, d.BackoffMin},
		{&t.BackoffMax, d.BackoffMax},
		{&t.HandshakeTimeout, d.HandshakeTimeout},
		{&t.WriteTimeout, d.WriteTimeout},
		{&t.EndedTTL, d.EndedTTL},
		{&t.EndGrace, d.EndGrace},
	} {
		if *f.v == 0 {
			*f.v = f.d
		}
	}
}

func (t *Tree) setDefaults() {
	d := DefaultTree()
	if t.ProbeWait == 0 {
		t.ProbeWait = d.ProbeWait
	}
	if t.LazyWait == 0 {
		t.LazyWait = d.LazyWait
	}
	if t.MaxLag == 0 {
		t.MaxLag = d.MaxLag
	}
	if t.Heartbeat == 0 {
		t.Heartbeat = DefaultHeartbeat
	}
}

// validate checks every group, and names the one at fault.
func (o *Options) validate() error {
	for _, g := range []struct {
		name  string
		check func() error
	}{
		{"bounds", o.Bounds.validate},
		{"timing", o.Timing.validate},
		{"tree", o.Tree.validate},
		{"pricing", o.Pricing.validate},
		{"wire", o.Wire.validate},
	} {
		if err := g.check(); err != nil {
			return fmt.Errorf("bps: options: %s: %w", g.name, err)
		}
	}
	return nil
}

func (b Bounds) validate() error {
	return nonNegative(map[string]int{
		"MaxStreamsPerCohort": b.MaxStreamsPerCohort,
		"MaxPublisherStreams": b.MaxPublisherStreams,
		"MaxCohorts":          b.MaxCohorts,
		"MaxCohortsPerPeer":   b.MaxCohortsPerPeer,
		"QueueLen":            b.QueueLen,
		"MaxInvalidFrames":    b.MaxInvalidFrames,
		"ClientCursors":       b.ClientCursors,
		"DedupWindow":         b.DedupWindow,
		"EndedCohorts":        b.EndedCohorts,
		"PublishRate":         b.PublishRate,
		"PublishBurst":        b.PublishBurst,
		"PeerProbeRounds":     b.PeerProbeRounds,
		"PrefixProbeRounds":   b.PrefixProbeRounds,
	})
}

func (t Timing) validate() error {
	if err := nonNegative(map[string]time.Duration{
		"Inactivity":        t.Inactivity,
		"ClaimDeadline":     t.ClaimDeadline,
		"RevocationGrace":   t.RevocationGrace,
		"BlocklistDuration": t.BlocklistDuration,
		"BackoffMin":        t.BackoffMin,
		"BackoffMax":        t.BackoffMax,
		"HandshakeTimeout":  t.HandshakeTimeout,
		"WriteTimeout":      t.WriteTimeout,
		"EndedTTL":          t.EndedTTL,
		"EndGrace":          t.EndGrace,
	}); err != nil {
		return err
	}
	if t.BackoffMin > t.BackoffMax {
		return fmt.Errorf("BackoffMin %s exceeds BackoffMax %s", t.BackoffMin, t.BackoffMax)
	}
	return nil
}

func (t Tree) validate() error {
	if err := nonNegative(map[string]int{"RelayCapacity": t.RelayCapacity, "MaxLag": t.MaxLag}); err != nil {
		return err
	}
	if t.Heartbeat > 0 && (t.Heartbeat < minHeartbeat || t.Heartbeat > maxHeartbeat) {
		return fmt.Errorf("Heartbeat %s: must be between %s and %s (negative: none)", t.Heartbeat, minHeartbeat, maxHeartbeat)
	}
	return nonNegative(map[string]time.Duration{"ProbeWait": t.ProbeWait, "LazyWait": t.LazyWait})
}

func (p Pricing) validate() error {
	if err := nonNegative(map[string]int{"Settlement.Frames": p.Settlement.Frames, "Settlement.Receipt": p.Settlement.Receipt}); err != nil {
		return err
	}
	return nonNegative(map[string]time.Duration{"Settlement.Interval": p.Settlement.Interval})
}

// nonNegative reports a named value that is negative.
func nonNegative[T int | time.Duration](vs map[string]T) error {
	for name, v := range vs {
		if v < 0 {
			return fmt.Errorf("%s must not be negative, got %v", name, v)
		}
	}
	return nil
}
