// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package bps implements Broadcast Pub/Sub for Swarm as a bee p2p protocol
// (/swarm/pubsub/1.0.0/stream, and upstream's two ids): the broker of
// SWIP-74 Rev 8 and SWIP-60 rev 14, the multihop tree of SWIP-61 and the
// self-indexed feeds of SWIP-65.
//
// One Service is every role a node plays. It answers Joins as the root of
// the cohorts it brokers or as a relay of those it follows, and joins other
// nodes as a subscriber (Subscribe) or a publisher (Publish). A node's
// whole state in one cohort is one place (place.go); its rules each live
// in one file:
//
//	broker.go        a Join answered: refusal, admission, the child's reader
//	registry.go      admission into the broker half (bounds, roles, claims)
//	cohort.go        the broker half: ingest from children, accept, fan-out;
//	                 parentRole, the one interface a root and a relay answer
//	relay.go         the relay role: a subscription's deliveries down to its
//	                 children, its children's publications up its parents
//	lease.go         publishing from depth: challenges the root leases
//	probe.go         probes and candidates at a node at capacity; flash crowds
//	subscription.go  a subscription: parents, repair, reparent, leave; the
//	                 one seam (took) through which its observers hear
//	receiver.go      verification and dedup of what parents deliver
//	judge.go, escape.go  the parent judge: lag, withholding, the gap escape
//	reorder.go       index order across parents
//	lazy.go          a lazy second parent: announce, ask, promote
//	publisher.go     a publisher stream: the claim, sending, the heartbeat
//	chunks.go        what a client signs: session-feed, storage, roster chunks
//	client.go        joining a node: the handshake and its backoff
//	protocols.go     the protocol ids served and joined on
//	claim.go         the challenge
//	validate.go, soc.go, owner_*.go  the checks a Broadcast passes
//	servicefeed.go   the admin's service feed: fresh, stale or gap
//	held.go          ended cohorts and forgotten cohorts' service feeds, shared
//	                 fairly by peer
//	rate.go          the publish rate where anyone may publish
//	dedup.go         the dedup key of a frame and the bounded window
//	stream.go, codec.go  one stream type both directions share; framing
//	pricing.go       charging for depth on bee's accounting: the service's API
//	price.go         pure price arithmetic and which frames are priced
//	ledger.go        the ledgers and their flusher, settling in batches
//	options.go       Options in groups, each with its defaults and validation
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
	joinIDs *joinIDs     // client side: the protocol id that worked, per broker
	pricing *pricing     // charging for depth on bee's accounting; nil: free (pricing.go)
	beatKey beatSigner   // what this node signs its heartbeats with as a root (heartbeat.go)
	rations rations      // probe rounds strangers' Joins start (ration.go)
	ctx     context.Context
	cancel  context.CancelFunc
	owned   owned.Group // every goroutine the Service starts or tracks
}

// New builds a Service that opens streams through streamer and is known to
// its peers by overlay, with all it needs (o.Deps): its logger, bee's
// accounting, the peer check and the dialer are given here, before its
// protocol is registered, and never changed. An invalid group of o is an
// error naming the group and the field.
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
	if err := s.initBeat(); err != nil {
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.reg = newRegistry(s)
	s.backoff = newBackoffs(o.BackoffMin, o.BackoffMax)
	s.cursors = newCursorCache(o.ClientCursors)
	s.joinIDs = newJoinIDs(o.Wire)
	if o.Accounting != nil && o.Prices != (Prices{}) {
		s.pricing = newPricing(s.ctx, o.Accounting, o.Prices, o.Settlement)
		s.pricing.goOwned = s.goOwned
		s.pricing.blocklist = o.BlocklistDuration
	}
	return s, nil
}

// Overlay is this node's overlay address.
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
