// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"sync/atomic"

	m "github.com/ethersphere/bee/v2/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Counter names one of the per-cohort counters of silent outcomes: SWIP-74
// Rev 8's, SWIP-60 rev 14's invalid_roster, and this project's.
type Counter int

// The counters.
const (
	CounterInvalidSOC     Counter = iota // not the chunk the frame says (id, signature, owner, what its kind fixes)
	CounterWrongOwner                    // a valid chunk whose owner may not publish here (a receiver's roster, an implicit binding's shape)
	CounterWrongStream                   // a frame from a stream that may send none, or a kind it may not send
	CounterUnknownKind                   // a kind this node does not know (dropped), or none (a violation)
	CounterWrongChallenge                // signed for another stream's challenge
	CounterInvalidRoster                 // a valid ROSTER chunk whose payload is not a Roster
	CounterClaimTimeout                  // a pending or silent stream cut at the claim deadline
	CounterRetransmit                    // DATA below its owner's cursor, ROSTER below the roster cursor
	CounterQueueReset                    // a stream reset for a full queue
	CounterRevoked                       // frames of a revoked address dropped within its grace
	CounterRateLimited                   // anyone authors: a publication past its owner's or its stream's rate (rate.go)
	numCounters
)

var counterNames = [numCounters]string{
	"invalid_soc", "wrong_owner", "wrong_stream", "unknown_kind",
	"wrong_challenge", "invalid_roster", "claim_timeout", "retransmit",
	"queue_reset", "revoked", "rate_limited",
}

// String is the counter's SWIP-74 name.
func (c Counter) String() string {
	if c < 0 || c >= numCounters {
		return "unknown"
	}
	return counterNames[c]
}

// Counters is a snapshot of a cohort's counters, keyed by SWIP-74 name.
type Counters map[string]uint64

// counters holds a cohort's live counters.
type counters [numCounters]atomic.Uint64

func (c *counters) snapshot() Counters {
	out := make(Counters, numCounters)
	for i := range c {
		out[Counter(i).String()] = c[i].Load()
	}
	return out
}

type metrics struct {
	// all fields exported: Metrics() collects them by reflection.
	InvalidSOC     prometheus.Counter
	WrongOwner     prometheus.Counter
	WrongStream    prometheus.Counter
	UnknownKind    prometheus.Counter
	WrongChallenge prometheus.Counter
	InvalidRoster  prometheus.Counter
	ClaimTimeout   prometheus.Counter
	Retransmit     prometheus.Counter
	QueueReset     prometheus.Counter
	Revoked        prometheus.Counter
	RateLimited    prometheus.Counter

	Accepted    prometheus.Counter
	Delivered   prometheus.Counter
	Joins       *prometheus.CounterVec
	Violations  prometheus.Counter
	Reclaimed   prometheus.Counter
	Ended       prometheus.Counter
	Cohorts     prometheus.Gauge
	Subscribers prometheus.Gauge
	Publishers  prometheus.Gauge

	ClientReceived prometheus.Counter
	ClientDropped  prometheus.Counter

	Probes        prometheus.Counter
	Rationed      prometheus.Counter
	Reparents     prometheus.Counter
	Withheld      prometheus.Counter
	Faults        prometheus.Counter
	Forwarded     prometheus.Counter
	Unchecked     prometheus.Counter
	ParentLost    prometheus.Counter
	Escapes       prometheus.Counter
	Heartbeats    prometheus.Counter
	HeartbeatGaps prometheus.Counter

	ParentlessSeconds   prometheus.Counter
	SingleParentSeconds prometheus.Counter
	Repairs             prometheus.Counter
	RepairSeconds       prometheus.Counter
	Replayed            prometheus.Counter

	LazyAsked    prometheus.Counter
	LazyServed   prometheus.Counter
	LazyGone     prometheus.Counter
	LazyUnserved prometheus.Counter
	LazyPromoted prometheus.Counter
}

func newMetrics() metrics {
	const subsystem = "bps"
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem, Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: m.Namespace, Subsystem: subsystem, Name: name, Help: help})
	}
	return metrics{
		InvalidSOC:     counter("invalid_soc", "Frames whose chunk is not the one the frame says: id, signature, owner, or what its kind fixes."),
		WrongOwner:     counter("wrong_owner", "Valid chunks by an owner that may not publish here."),
		WrongStream:    counter("wrong_stream", "Frames from a stream that may send none, or of a kind it may not send."),
		UnknownKind:    counter("unknown_kind", "Frames of a kind this node does not know (dropped), or of none (a violation)."),
		WrongChallenge: counter("wrong_challenge", "Frames signed under another stream's challenge."),
		InvalidRoster:  counter("invalid_roster", "Valid ROSTER chunks whose payload is not a roster of 20-byte addresses."),
		ClaimTimeout:   counter("claim_timeout", "Pending or silent streams disconnected at the claim deadline."),
		Retransmit:     counter("retransmit", "DATA below its publisher's cursor, ROSTER below the roster cursor."),
		QueueReset:     counter("queue_reset", "Streams reset for a full outbound queue."),
		Revoked:        counter("revoked", "Frames of a revoked publisher dropped within its revocation grace."),
		RateLimited:    counter("rate_limited", "Publications dropped past their owner's or their stream's publish rate, where anyone may author."),

		Accepted:  counter("accepted", "Publications accepted by this broker."),
		Delivered: counter("delivered", "Frames queued to subscriber streams by this broker."),
		Joins: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: m.Namespace, Subsystem: subsystem, Name: "joins", Help: "Joins answered, by status.",
		}, []string{"status"}),
		Violations:  counter("violations", "Streams reset and peers blocklisted for protocol violations."),
		Reclaimed:   counter("reclaimed", "Cohorts reclaimed for inactivity."),
		Ended:       counter("ended", "Cohorts ended by their admin's END_OF_STREAM."),
		Cohorts:     gauge("cohorts", "Live cohorts brokered here."),
		Subscribers: gauge("subscriber_streams", "Subscriber streams attached here."),
		Publishers:  gauge("publisher_streams", "Publisher streams attached here."),

		ClientReceived: counter("client_received", "Deliveries accepted by this node's subscriptions."),
		ClientDropped:  counter("client_dropped", "Deliveries dropped by this node's subscriptions (stale or invalid)."),

		Probes:        counter("probes", "Subtree probes this node originated or forwarded for a joiner (SWIP-61)."),
		Rationed:      counter("probes_rationed", "Joins answered from the pool only: their peer, or its overlay's prefix, had started its bound of probe rounds here, or the peer had Joined the root past its bound within a minute (a hunter)."),
		Reparents:     counter("reparents", "Moves to a new parent on a Reparent (SWIP-61)."),
		Withheld:      counter("withheld_parents", "Parents dropped for lagging their sister (SWIP-61)."),
		Faults:        counter("liveness_faults", "Subscriptions that lost both parents (SWIP-61)."),
		Forwarded:     counter("forwarded", "Publications a relay forwarded rootward (SWIP-61)."),
		Unchecked:     counter("relayed_unchecked", "Publications a child relayed that were dropped unchecked: its stream made this node check too many that failed this second."),
		ParentLost:    counter("parents_lost", "Parent streams of subscriptions that ended other than by close."),
		Escapes:       counter("gap_escapes", "Parents left because both parents passed over an update of an explicit feed: the node took a parent the root's probe found instead."),
		Heartbeats:    counter("heartbeats", "Root heartbeats a subscription took (verified, new) and passed to its children."),
		HeartbeatGaps: counter("heartbeat_gaps", "Gaps a subscription saw through the root's heartbeat: an accepted index that never came, or missed periods."),

		ParentlessSeconds:   counter("parentless_seconds", "Seconds subscriptions spent without a parent after their first attach: receiving nothing (SWIP-61)."),
		SingleParentSeconds: counter("single_parent_seconds", "Seconds subscriptions spent with one parent where they want two: the next failure is not masked (SWIP-61)."),
		Repairs:             counter("repairs", "Repairs that gave a subscription back the parents it wants after it lost one (SWIP-61)."),
		RepairSeconds:       counter("repair_seconds", "Seconds from a lost parent to the repair that replaced it, summed over repairs (SWIP-61)."),
		Replayed:            counter("replayed", "Deliveries sent again to a child that lost every parent and asked for what it missed (Join.replay_ms)."),

		LazyAsked:    counter("lazy_asked", "Announcements of a lazy parent this node's subscriptions asked for (lazy push)."),
		LazyServed:   counter("lazy_served", "Deliveries this node sent a lazy child that asked for them (lazy push)."),
		LazyGone:     counter("lazy_gone", "Asks of lazy children for announcements too old to serve (lazy push)."),
		LazyUnserved: counter("lazy_unserved", "Asks of this node's subscriptions a lazy parent did not serve in time (lazy push)."),
		LazyPromoted: counter("lazy_promoted", "Lazy parents this node's subscriptions set eager (lazy push)."),
	}
}

// byCounter is the node-wide Prometheus counter for c.
func (mt *metrics) byCounter(c Counter) prometheus.Counter {
	return [numCounters]prometheus.Counter{
		mt.InvalidSOC, mt.WrongOwner, mt.WrongStream, mt.UnknownKind,
		mt.WrongChallenge, mt.InvalidRoster, mt.ClaimTimeout, mt.Retransmit,
		mt.QueueReset, mt.Revoked, mt.RateLimited,
	}[c]
}

// Metrics is a set of the Service's Prometheus collectors that Services
// may share (Options.Metrics).
type Metrics struct{ m metrics }

// NewMetrics makes a set of collectors for Options.Metrics.
func NewMetrics() *Metrics { return &Metrics{m: newMetrics()} }

// Collectors returns the set's collectors, to register once.
func (ms *Metrics) Collectors() []prometheus.Collector {
	return m.PrometheusCollectorsFromFields(ms.m)
}

// Metrics returns the Service's Prometheus collectors (shared ones, if
// Options.Metrics gave them).
func (s *Service) Metrics() []prometheus.Collector {
	return m.PrometheusCollectorsFromFields(s.metrics)
}
