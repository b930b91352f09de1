// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package bps implements Broadcast Pub/Sub for Swarm as a bee p2p protocol
// (/swarm/pubsub/1.0.0/stream): the broker of SWIP-74 and SWIP-60, the
// multihop tree of SWIP-61 and the self-indexed feeds of SWIP-65.
//
// One Service is every role a node plays. It answers Joins as the root of
// the cohorts it brokers or as a relay of those it follows, and joins other
// nodes as a subscriber (Subscribe) or a publisher (Publish). A node's
// whole state in one cohort is one place (place.go); its rules each live
// in one file:
//
//	broker.go        a Join answered: refusal, admission, the child's reader
//	registry.go      admission into the broker half (bounds, seats, claims)
//	cohort.go        the broker half: ingest from children, accept, fan-out
//	relay.go         a relay: the broker half fed by a subscription
//	probe.go         probes and candidates at a node at capacity
//	subscription.go  a subscription: parents, repair, reparent, leave
//	receiver.go      verification and dedup of what parents deliver
//	lag.go, reorder.go  withholding detection; index order across parents
//	lazy.go          a lazy second parent: announce, ask, promote
//	publisher.go     a publisher stream; building feed and service updates
//	client.go        joining a node: the handshake and its backoff
//	claim.go         the challenge and the claim
//	validate.go, soc.go, owner_*.go  the checks a publication passes
//	servicefeed.go   the admin's service feed: fresh, stale or gap
//	dedup.go         the dedup key of a frame and the bounded window
//	stream.go, codec.go  one stream type both directions share; framing
//	pricing.go       charging for depth on bee's accounting, settled in batches
//	nodedefaults.go  a full node's defaults, which bee-bps and bps-sim read
//	storage.go, potprofile.go  persistence and the pot profile (SWIP-65)
//	spec.go          cohort specs and their canonical form
//	tree.go          the node's positions, as the API shows them
//	metrics.go, trace.go, audience.go, backoff.go, lru.go  counters and
//	                 events; the bounds shown; client backoff; bounded maps
//
// Every stream handler is resident: it blocks for the stream's lifetime and
// returns p2p.NewBlockPeerError when the peer provably misbehaved. Every
// goroutine the Service starts is owned by it and waited for by Close.
package bps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/internal/owned"
)

// loggerName is the tree path name of the logger for this package.
const loggerName = "bps"

const (
	protocolName    = "pubsub"
	protocolVersion = "1.0.0"
	streamName      = "stream"
)

// ProtocolID is the full libp2p protocol id BPS streams are opened on.
var ProtocolID = p2p.NewSwarmStreamName(protocolName, protocolVersion, streamName)

// Errors the client side reports.
var (
	// ErrFull is returned when a broker answered FULL: back off and rejoin.
	ErrFull = errors.New("bps: broker is full")
	// ErrRejected is returned when a broker answered REJECTED: the spec is
	// refused there and rejoining unchanged is pointless.
	ErrRejected = errors.New("bps: spec rejected by broker")
	// ErrClosed is returned after the Service or a handle was closed.
	ErrClosed = errors.New("bps: closed")
	// ErrClaimNotTaken is returned when the broker reset a publisher stream,
	// which is how it answers a claim that did not upgrade the stream.
	ErrClaimNotTaken = errors.New("bps: publisher stream reset by broker")
)

// Options configure a Service. Zero values take the defaults below; every
// bound is node policy and nothing of it is on the wire.
type Options struct {
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
	// Inactivity reclaims a cohort that accepted no message for this long.
	// Default 10 minutes.
	Inactivity time.Duration
	// ClaimDeadline disconnects the extra admin seat if it has not claimed by
	// then. Default 30 seconds.
	ClaimDeadline time.Duration
	// MaxInvalidFrames is how many invalid publications (bad SOC, wrong owner,
	// not a bare index) a publisher stream may send before it is reset and
	// its peer blocklisted. Default 8.
	MaxInvalidFrames int
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
	// DedupWindow is the number of recent chunk identifiers a cohort (and a
	// subscription) remembers under a binding that dedups on chunk address
	// (SWIP-60's bounded horizon). Default 256.
	DedupWindow int
	// EndedCohorts bounds how many cohorts ended by END_OF_STREAM the broker
	// remembers, so that a later Join for one is told of the end rather than
	// creating a fresh cohort; the least recently ended is forgotten first.
	// Default 1024.
	EndedCohorts int
	// EndedTTL is how long the broker remembers an ended cohort. Default 1 h.
	EndedTTL time.Duration
	// EndGrace bounds how long a stream of an ended cohort may stay open
	// after the broker delivered END_OF_STREAM and closed its side; then it
	// is reset. Default 5 s.
	EndGrace time.Duration
	// ClientCursors bounds the subscriber cursors kept per (topic, admin).
	// Default 4096; the least recently used is forgotten first.
	ClientCursors int
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
	// RelayCapacity is how many children this node accepts, per cohort it
	// follows, as a relay (SWIP-61); 0: it does not relay, and answers a
	// Join for a cohort it only follows as a node at capacity with no
	// subtree. A broker's own fan-out is MaxStreamsPerCohort. Default 0.
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
	// Underlays, if set, returns this node's own underlay addresses, named
	// in the candidates it offers and the reparents it sends.
	Underlays func() [][]byte
	// Connect, if set, connects this node to peer at underlays before it
	// attaches there (a probe's candidate, a reparent's target); nil:
	// peers are assumed reachable by overlay.
	Connect func(ctx context.Context, peer swarm.Address, underlays [][]byte) error
	// Logger is the node logger; default a no-op logger.
	Logger log.Logger
	// Tracer observes protocol events (tests, simulator); may be nil.
	Tracer Tracer
	// Metrics, if set, are the Prometheus collectors the Service counts
	// on, shared with every Service given the same; nil: its own, as a
	// node has. A process that runs many nodes (a simulator) shares one
	// set, each node's counts then add up in it, to save a node the
	// collectors' memory (about 9 KB).
	Metrics *Metrics
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
	DefaultMaxInvalidFrames    = 8
	DefaultBackoffMin          = time.Second
	DefaultBackoffMax          = 30 * time.Second
	DefaultHandshakeTimeout    = 30 * time.Second
	DefaultWriteTimeout        = 30 * time.Second
	DefaultClientCursors       = 4096
	DefaultDedupWindow         = 256
	DefaultEndedCohorts        = 1024
	DefaultEndedTTL            = time.Hour
	DefaultEndGrace            = 5 * time.Second
	DefaultProbeWait           = 2 * time.Second
	DefaultMaxLag              = 8
	DefaultLazyWait            = 100 * time.Millisecond
)

func (o *Options) setDefaults() {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxStreamsPerCohort, DefaultMaxStreamsPerCohort)
	def(&o.MaxPublisherStreams, DefaultMaxPublisherStreams)
	def(&o.MaxCohorts, DefaultMaxCohorts)
	def(&o.MaxCohortsPerPeer, DefaultMaxCohortsPerPeer)
	def(&o.QueueLen, DefaultQueueLen)
	def(&o.MaxInvalidFrames, DefaultMaxInvalidFrames)
	def(&o.ClientCursors, DefaultClientCursors)
	def(&o.DedupWindow, DefaultDedupWindow)
	def(&o.EndedCohorts, DefaultEndedCohorts)
	defd(&o.EndedTTL, DefaultEndedTTL)
	defd(&o.EndGrace, DefaultEndGrace)
	defd(&o.ProbeWait, DefaultProbeWait)
	defd(&o.LazyWait, DefaultLazyWait)
	def(&o.MaxLag, DefaultMaxLag)
	defd(&o.Inactivity, DefaultInactivity)
	defd(&o.ClaimDeadline, DefaultClaimDeadline)
	defd(&o.BlocklistDuration, p2p.DefaultBlocklistTime)
	defd(&o.BackoffMin, DefaultBackoffMin)
	defd(&o.BackoffMax, DefaultBackoffMax)
	defd(&o.HandshakeTimeout, DefaultHandshakeTimeout)
	defd(&o.WriteTimeout, DefaultWriteTimeout)
	if o.Logger == nil {
		o.Logger = log.Noop
	}
}

func (o *Options) validate() error {
	for name, v := range map[string]int{
		"MaxStreamsPerCohort": o.MaxStreamsPerCohort,
		"MaxPublisherStreams": o.MaxPublisherStreams,
		"MaxCohorts":          o.MaxCohorts,
		"MaxCohortsPerPeer":   o.MaxCohortsPerPeer,
		"QueueLen":            o.QueueLen,
		"MaxInvalidFrames":    o.MaxInvalidFrames,
		"ClientCursors":       o.ClientCursors,
		"DedupWindow":         o.DedupWindow,
		"EndedCohorts":        o.EndedCohorts,
		"RelayCapacity":       o.RelayCapacity,
		"MaxLag":              o.MaxLag,
	} {
		if v < 0 {
			return fmt.Errorf("bps: option %s must not be negative, got %d", name, v)
		}
	}
	for name, v := range map[string]time.Duration{
		"Inactivity":        o.Inactivity,
		"ClaimDeadline":     o.ClaimDeadline,
		"BlocklistDuration": o.BlocklistDuration,
		"BackoffMin":        o.BackoffMin,
		"BackoffMax":        o.BackoffMax,
		"HandshakeTimeout":  o.HandshakeTimeout,
		"WriteTimeout":      o.WriteTimeout,
		"LazyWait":          o.LazyWait,
		"EndedTTL":          o.EndedTTL,
		"EndGrace":          o.EndGrace,
		"ProbeWait":         o.ProbeWait,
	} {
		if v < 0 {
			return fmt.Errorf("bps: option %s must not be negative, got %s", name, v)
		}
	}
	if o.BackoffMin > o.BackoffMax {
		return fmt.Errorf("bps: BackoffMin %s exceeds BackoffMax %s", o.BackoffMin, o.BackoffMax)
	}
	return nil
}

// Service is a BPS node: broker for the cohorts others join here, and client
// of the brokers it joins.
type Service struct {
	streamer p2p.Streamer
	overlay  swarm.Address
	opts     Options
	logger   log.Logger
	metrics  metrics
	tracer   Tracer

	reg     *registry    // broker side
	backoff *backoffs    // client side: per (broker, cohort)
	cursors *cursorCache // client side: per (topic, admin)
	pricing *pricing     // charging for depth on bee's accounting; nil: free (pricing.go)
	ctx     context.Context
	cancel  context.CancelFunc
	owned   owned.Group // every goroutine the Service starts or tracks
}

// New builds a Service that opens streams through streamer and is known to
// its peers by overlay.
func New(streamer p2p.Streamer, overlay swarm.Address, o Options) (*Service, error) {
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	s := &Service{
		streamer: streamer,
		overlay:  overlay,
		opts:     o,
		logger:   o.Logger.WithName(loggerName).Register(),
		tracer:   o.Tracer,
	}
	if o.Metrics != nil {
		s.metrics = o.Metrics.m
	} else {
		s.metrics = newMetrics()
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.reg = newRegistry(s)
	s.backoff = newBackoffs(o.BackoffMin, o.BackoffMax)
	s.cursors = newCursorCache(o.ClientCursors)
	return s, nil
}

// Protocol is the bee p2p protocol spec to register with AddProtocol.
func (s *Service) Protocol() p2p.ProtocolSpec {
	return p2p.ProtocolSpec{
		Name:    protocolName,
		Version: protocolVersion,
		StreamSpecs: []p2p.StreamSpec{
			{
				Name:    streamName,
				Handler: s.handler,
			},
		},
	}
}

// Overlay is the overlay address this node signs claims against as a broker.
func (s *Service) Overlay() swarm.Address { return s.overlay }

// Close ends every stream and cohort, broker and client side, and waits for
// every goroutine the Service started, at most timeout (default 5 s).
func (s *Service) Close() error {
	if !s.owned.Close() {
		return nil
	}
	s.cancel()
	s.reg.closeAll()
	s.reg.closeParents()
	if !s.owned.Wait(closeTimeout) {
		return errors.New("bps: close timed out waiting for streams")
	}
	return nil
}

const closeTimeout = 5 * time.Second

// closed reports whether Close was called.
func (s *Service) closed() bool { return s.owned.Closed() }

// goOwned runs f on a goroutine owned by the service; it returns false without
// running f once the service is closed.
func (s *Service) goOwned(f func()) bool { return s.owned.Go(f) }

// track registers the calling goroutine (a stream handler run by the p2p
// layer, a timer's callback) with the service so Close waits for it; it
// returns false once the service is closed. The caller calls s.done.
func (s *Service) track() bool { return s.owned.Track() }

// done ends what track registered.
func (s *Service) done() { s.owned.Done() }

// HoldsStreams reports whether peer holds at least one live stream at this
// broker. The node keeps such peers out of bee's kademlia bin counts, so
// that bee's topology neither refuses nor prunes for their sake.
func (s *Service) HoldsStreams(peer swarm.Address) bool {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	return len(s.reg.peers[peer.ByteString()]) > 0
}

// SetPeerCheck sets Options.PeerCheck after construction, for a node that
// builds the check once bee is up. Call it before registering Protocol.
func (s *Service) SetPeerCheck(f func(ctx context.Context, peer p2p.Peer, stream p2p.Stream) error) {
	s.opts.PeerCheck = f
}

// SetDialer sets how this node reaches a relay a probe named or a reparent
// points to (connect, by underlays), and its own underlays, named in the
// candidates it offers (SWIP-61). Call it before the protocol is
// registered.
func (s *Service) SetDialer(connect func(ctx context.Context, peer swarm.Address, underlays [][]byte) error, underlays func() [][]byte) {
	s.opts.Connect, s.opts.Underlays = connect, underlays
}
