// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package session shares a node's BPS client streams among its local
// sessions — the WebSocket sessions of the API (pkg/api). A Mux holds one
// subscriber stream per cohort at a broker (a Hub) and one publisher stream
// per address in it (a PubStream); the cohort's Room hands each message once
// to each Session and keeps the admin's service feed as the node verified
// it; on a node with storage a session of a FEED_TOPIC cohort recovers the
// updates it missed (SWIP-65), by feed lookup or by pot descent.
//
// Files: mux.go is the Mux, its options, errors and metrics; room.go a
// cohort's room and the View its sessions share; streams.go the shared
// streams; refmap.go their reference counts; recovery.go and
// potrecovery.go gap recovery. It uses pkg/bps through its exported API.
package session

import (
	"context"
	"errors"
	"fmt"
	"github.com/ethersphere/bps/pkg/bps"
	"time"

	"github.com/ethersphere/bee/v2/pkg/log"
	m "github.com/ethersphere/bee/v2/pkg/metrics"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/internal/owned"
	"github.com/prometheus/client_golang/prometheus"
)

// Mux shares this node's client streams among its local sessions — the
// WebSocket sessions of the API, say. Every session watching a cohort at a
// broker shares one subscriber stream (a Hub); every session publishing as
// one address in it shares one publisher stream (a PubStream), which also
// receives (SWIP-60: publishers receive). Whatever stream brings a
// message, the cohort's Room hands it once to each session of the cohort
// here — a dedup window drops the copies the node's other streams bring —
// and keeps the admin's service feed as the node verified it: the roster,
// its index, the end. A Room never waits for a session: a session that
// cannot take a delivery leaves the room.
//
// Every Room, Hub and PubStream is acquired and released: the last release
// ends it.
type Mux interface {
	// Room returns the room of sp at broker, made if there is none.
	Room(broker swarm.Address, sp *bps.Spec) (*Room, error)
	// LookupRoom returns the room of sp at broker, if there is one, without
	// holding it.
	LookupRoom(broker swarm.Address, sp *bps.Spec) *Room
	// Subscribe returns the room's subscriber stream, joining the broker if
	// there is none.
	Subscribe(ctx context.Context, r *Room) (*Hub, error)
	// Publish returns the room's publisher stream of o.Addr, joining the
	// broker declaring it if there is none (SWIP-74 Rev 8). The node signs
	// nothing: under explicit authorship the stream is pending, a
	// spectator or silent until a session's AUTH, signed by its dApp under
	// the stream's challenge, claims it (PubStream.Claim).
	Publish(ctx context.Context, r *Room, o StreamOptions) (*PubStream, error)
	// HoldPublisher returns the open publisher stream of addr in sp at
	// broker, if there is one.
	HoldPublisher(broker swarm.Address, sp *bps.Spec, addr []byte) *PubStream
	// Streams describes the shared streams, subscriber streams first.
	Streams() []StreamInfo
	// Metrics returns the mux's collectors.
	Metrics() []prometheus.Collector
	// Close ends the shared streams and waits for the mux's goroutines.
	Close() error
}

// Session is one local consumer of a cohort: it takes the deliveries a
// Room hands it, and is ended when the stream it depends on ends. A
// publishing session's dApp signs every chunk, its claiming AUTH
// included, under the challenge of the publisher stream it uses. Its methods are called with
// the room's, hub's or stream's lock held: they must not block, nor call
// back into the mux.
type Session interface {
	// Deliver hands a content message of the cohort; false: the session
	// cannot take it (it ends itself) and leaves the room.
	Deliver(v *View) bool
	// Service hands a service SOC of the admin's feed as the node verified
	// it (gap: the node missed updates before it); false as for Deliver.
	Service(svc *bps.ServiceMsg, gap bool) bool
	// EndOfCohort ends the session after the admin's EOS, once what it
	// queued is out; final is that service chunk if the session receives,
	// else nil (gap as for Service).
	EndOfCohort(final *bps.ServiceMsg, gap bool)
	// End ends the session because the stream it depends on ended; err says
	// why (ErrMuxClosed, *StreamEndError, *NotAdmittedError).
	End(err error)
	// Poke asks the session to look at its publisher state again: the
	// roster changed, its publisher stream was claimed, or it was rejoined
	// under a new challenge (PubStream.Challenge).
	Poke()
	// Closed reports whether the session has ended.
	Closed() bool
}

// MuxOptions configure a Mux. Zero values take the defaults.
type MuxOptions struct {
	// JoinTimeout bounds joining the broker. Default DefaultHandshakeTimeout.
	JoinTimeout time.Duration
	// SilentWait bounds how long a publisher stream under explicit
	// authorship may stay unclaimed where the broker holds it to a claim
	// deadline (SWIP-74 Rev 8): a pending stream (the admin's, or one whose
	// address the roster names) with no session's AUTH yet, and a closed
	// cohort's silent stream that no roster admitted. The mux closes it
	// then, before the broker's claim deadline, at which the broker
	// disconnects the stream as a violation and blocklists the node. A
	// spectator (an open cohort) has no deadline. Default
	// DefaultSilentWait.
	SilentWait time.Duration
	// Rejoins bounds how often a publisher stream the broker lost is
	// joined again, one after another, before its sessions are ended
	// (each rejoin gives the stream a new challenge: the sessions' dApps
	// claim again and re-sign). Zero: DefaultRejoins; negative: never.
	Rejoins int
	// Storage, if set, is where sessions of FEED_TOPIC cohorts recover the
	// updates they missed (SWIP-65): each session follows each publisher's
	// feed, and a gap is retrieved, verified and handed in index order
	// before the update that revealed it. Nil: a gap is not seen.
	Storage bps.Storage
	// RecoverMax bounds the updates one gap recovers (the latest before
	// the update that revealed it; older ones are reported as a gap).
	// Default DefaultRecoverMax.
	RecoverMax int
	// RecoverTimeout bounds one recovery. Default DefaultRecoverTimeout.
	RecoverTimeout time.Duration
	// RecoverBudget bounds the chunk retrievals the gap recoveries of one
	// cohort's sessions make at this node, all together, a minute (past a
	// burst of 4 × RecoverMax); each chunk is retrieved once for every
	// session that misses it. What is over it is a gap. Default
	// DefaultRecoverBudget.
	RecoverBudget int
	// Logger logs what the mux does that an operator may look into, at
	// debug level: a gap recovery could not fill, and why. Nil: nothing.
	Logger log.Logger
}

// DefaultSilentWait is MuxOptions.SilentWait's default: two thirds of the
// claim deadline.
const DefaultSilentWait = bps.DefaultClaimDeadline * 2 / 3

// DefaultRejoins is MuxOptions.Rejoins's default.
const DefaultRejoins = 3

// roomWindow bounds the deliveries a room remembers to drop the second copy
// of a message that reaches the node on two of its streams.
const roomWindow = 512

// muxCloseTimeout bounds how long Close waits for the mux's goroutines.
const muxCloseTimeout = 10 * time.Second

// ErrMuxClosed: the mux closed (the node is shutting down).
var ErrMuxClosed = errors.New("bps: session mux closed")

// StreamEndError: the shared stream a session depends on ended; Err is
// nil for a clean end by the broker.
type StreamEndError struct {
	Publisher bool // a publisher stream, else the subscriber stream
	Err       error
}

func (e *StreamEndError) Error() string {
	switch {
	case e.Err == nil && e.Publisher:
		return "the broker ended the publisher stream"
	case e.Err == nil:
		return "the broker ended the subscription"
	case e.Publisher:
		return "publisher stream reset by the broker: " + e.Err.Error()
	default:
		return "subscription lost: " + e.Err.Error()
	}
}

func (e *StreamEndError) Unwrap() error { return e.Err }

// NotAdmittedError: a publisher stream the broker holds to a claim
// deadline was not claimed within the silent wait — no session sent its
// AUTH (Pending: the address may publish), or a closed cohort's roster
// never named the address — and the mux closed it before the broker's
// claim deadline.
type NotAdmittedError struct {
	Addr    []byte
	Wait    time.Duration
	Pending bool
}

func (e *NotAdmittedError) Error() string {
	if e.Pending {
		return fmt.Sprintf("no AUTH for %x within %s of the challenge; the node closed the stream before the broker's claim deadline", e.Addr, e.Wait)
	}
	return fmt.Sprintf("closed cohort: no roster named %x within %s; the node closed the stream before the broker's claim deadline", e.Addr, e.Wait)
}

// StreamOptions describe a shared publisher stream.
type StreamOptions struct {
	Addr []byte // the address it publishes as
	// Receive: the stream hands what the broker sends it to the room. A
	// stream whose sessions share its identity with other publishers (the
	// GSOC key) receives on the subscriber stream instead.
	Receive bool
}

// ServiceState is the admin's service feed as the node knows it.
type ServiceState struct {
	Seen   bool     // a service SOC was applied
	Next   uint64   // the lowest service index taken next
	Roster [][]byte // the publishers the roster in force names (admin excluded), sorted
	Ended  bool     // END_OF_STREAM taken
}

// StreamInfo describes a shared stream.
type StreamInfo struct {
	Publisher bool // a publisher stream, else a subscriber stream
	Broker    swarm.Address
	Spec      *bps.Spec
	Addr      []byte // publisher: the address
	Sessions  int    // sessions sharing it
	Received  uint64 // subscriber: deliveries handed to the room
	Dropped   uint64 // subscriber: deliveries the subscription dropped
	Sent      uint64 // publisher: messages published
	Claims    bool   // publisher: under explicit authorship
	Taken     bool   // publisher, explicit authorship: a session's AUTH claimed it, as far as the node can tell
	Seq       int    // publisher: the stream's join (1, then 2, … after each rejoin)
	Service   ServiceState
}

// mux implements Mux. Each refMap guards its map; a Room's, Hub's and
// PubStream's own mutex their session sets. Every goroutine it starts is
// owned and waited for by Close.
type mux struct {
	svc     Protocol
	opts    MuxOptions
	metrics muxMetrics
	logger  log.Logger

	ctx    context.Context // ended by Close: bounds every join
	cancel context.CancelFunc

	owned owned.Group // every goroutine the mux starts

	rooms *refMap[*Room]      // by broker ‖ canonical spec
	hubs  *refMap[*Hub]       // by broker ‖ canonical spec
	pubs  *refMap[*PubStream] // by broker ‖ canonical spec ‖ addr
}

var _ Mux = (*mux)(nil)

// NewMux returns the mux of the node whose BPS service is svc (Node).
func NewMux(svc Protocol, o MuxOptions) Mux {
	if o.JoinTimeout <= 0 {
		o.JoinTimeout = bps.DefaultHandshakeTimeout
	}
	if o.Rejoins == 0 {
		o.Rejoins = DefaultRejoins
	}
	if o.SilentWait <= 0 {
		o.SilentWait = DefaultSilentWait
	}
	if o.RecoverBudget <= 0 {
		o.RecoverBudget = DefaultRecoverBudget
	}
	if o.RecoverMax <= 0 {
		o.RecoverMax = DefaultRecoverMax
	}
	if o.RecoverTimeout <= 0 {
		o.RecoverTimeout = DefaultRecoverTimeout
	}
	logger := o.Logger
	if logger == nil {
		logger = log.Noop
	}
	x := &mux{svc: svc, opts: o, logger: logger, metrics: newMuxMetrics(),
		rooms: newRefMap[*Room](), hubs: newRefMap[*Hub](), pubs: newRefMap[*PubStream]()}
	x.ctx, x.cancel = context.WithCancel(context.Background())
	return x
}

func cohortKey(broker swarm.Address, sp *bps.Spec) string {
	return broker.ByteString() + string(sp.Canonical())
}

// goOwned runs f on a goroutine Close waits for; false once closed.
func (x *mux) goOwned(f func()) bool { return x.owned.Go(f) }

func (x *mux) isClosed() bool { return x.owned.Closed() }

// Close ends every shared stream — their sessions are ended with
// ErrMuxClosed — and waits for the mux's goroutines, at most
// muxCloseTimeout.
func (x *mux) Close() error {
	if !x.owned.Close() {
		return nil
	}
	x.cancel()
	if !x.owned.Wait(muxCloseTimeout) {
		return errors.New("bps: mux close timed out waiting for its streams")
	}
	return nil
}

// ended is why the sessions of a stream that ended with err are ended.
func (x *mux) ended(err error, publisher bool) error {
	switch {
	case x.ctx.Err() != nil:
		return ErrMuxClosed
	case errors.Is(err, bps.ErrEndOfStream):
		return bps.ErrEndOfStream
	default:
		return &StreamEndError{Publisher: publisher, Err: err}
	}
}

// backoff is the backoff the node is in for sp at broker, if any, with
// why the attempt that imposed it failed.
func (x *mux) backoff(broker swarm.Address, sp *bps.Spec) *BackoffError {
	until, reason := x.svc.Backoff(broker, sp)
	if time.Until(until) <= 0 {
		return nil
	}
	return &BackoffError{Until: until, Cause: reason}
}

// joinErr turns FULL into a BackoffError, so the session learns when to
// retry.
func (x *mux) joinErr(broker swarm.Address, sp *bps.Spec, err error) error {
	if errors.Is(err, bps.ErrFull) {
		until, _ := x.svc.Backoff(broker, sp)
		return &BackoffError{Until: until, Cause: err}
	}
	return err
}

// BackoffError: the node may not join this cohort at that broker before
// Until (the mandatory backoff after FULL, REJECTED or a reset); Cause is
// why the attempt that imposed it failed — the broker's answer, a reset, a
// connection that failed — if known.
type BackoffError struct {
	Until time.Time
	Cause error
}

func (e *BackoffError) Error() string {
	msg := fmt.Sprintf("backing off from the broker until %s", e.Until.UTC().Format(time.RFC3339))
	if e.Cause != nil {
		msg = e.Cause.Error() + ": " + msg
	}
	return msg
}

func (e *BackoffError) Unwrap() error { return e.Cause }

// Room returns the room of sp at broker.
func (x *mux) Room(broker swarm.Address, sp *bps.Spec) (*Room, error) {
	if x.isClosed() {
		return nil, ErrMuxClosed
	}
	key := cohortKey(broker, sp)
	r, _ := x.rooms.acquire(key, func() *Room { return newRoom(x, key, broker, sp) })
	return r, nil
}

// LookupRoom returns the room of sp at broker, if any.
func (x *mux) LookupRoom(broker swarm.Address, sp *bps.Spec) *Room {
	r, _ := x.rooms.lookup(cohortKey(broker, sp))
	return r
}

// Streams describes the open shared streams.
func (x *mux) Streams() []StreamInfo {
	var out []StreamInfo
	for _, h := range x.hubs.values() {
		if !isDone(h.ready) || h.err != nil {
			continue // still joining
		}
		out = append(out, StreamInfo{Broker: h.room.broker, Spec: h.room.spec, Sessions: h.count(),
			Received: h.delivered.Load(), Dropped: h.sub.Dropped(), Service: h.room.Service()})
	}
	for _, e := range x.pubs.values() {
		if !isDone(e.ready) || e.err != nil {
			continue
		}
		out = append(out, StreamInfo{Publisher: true, Broker: e.room.broker, Spec: e.room.spec, Addr: e.addr,
			Sessions: e.count(), Sent: e.sent.Load(), Claims: e.claims, Taken: e.Taken(), Seq: e.Seq(), Service: e.room.Service()})
	}
	return out
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// muxMetrics keep the names they had as the API's (subsystem bps_api).
type muxMetrics struct {
	// all fields exported: Metrics() collects them by reflection.
	Hubs             prometheus.Gauge
	PublisherStreams prometheus.Gauge
	Rejoins          prometheus.Counter
	ServiceGaps      prometheus.Counter
	Recovered        prometheus.Counter
	RecoveryGaps     prometheus.Counter
	RecoveryFetches  prometheus.Counter
	Equivocations    prometheus.Counter
}

func newMuxMetrics() muxMetrics {
	const subsystem = "bps_api"
	return muxMetrics{
		Hubs: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: m.Namespace, Subsystem: subsystem,
			Name: "hubs", Help: "Subscriber streams shared by the sessions."}),
		PublisherStreams: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: m.Namespace, Subsystem: subsystem,
			Name: "publisher_streams", Help: "Publisher streams shared by the sessions."}),
		Rejoins: prometheus.NewCounter(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem,
			Name: "rejoins", Help: "Publisher streams the broker lost, joined again under a new challenge."}),
		ServiceGaps: prometheus.NewCounter(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem,
			Name: "service_gaps", Help: "Gaps in a service feed seen by the node (liveness faults)."}),
		Recovered: prometheus.NewCounter(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem,
			Name: "recovered_updates", Help: "Missed feed updates recovered from storage and handed to a session (SWIP-65)."}),
		RecoveryGaps: prometheus.NewCounter(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem,
			Name: "unrecovered_updates", Help: "Missed feed updates a session was told of as a gap: not recovered."}),
		RecoveryFetches: prometheus.NewCounter(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem,
			Name: "recovery_retrievals", Help: "Chunk retrievals made to recover missed feed updates."}),
		Equivocations: prometheus.NewCounter(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem,
			Name: "equivocations", Help: "Pot-profile updates that failed SWIP-65's anchor check."}),
	}
}

// Metrics returns the mux's collectors.
func (x *mux) Metrics() []prometheus.Collector {
	return m.PrometheusCollectorsFromFields(x.metrics)
}
