// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// EventKind names a protocol event a Tracer observes.
type EventKind int

// Events.
const (
	EventJoin       EventKind = iota // broker answered a Join (Status set)
	EventClaim                       // broker upgraded a stream to a publisher stream
	EventAccept                      // broker accepted a publication (Index set)
	EventDrop                        // broker dropped a frame silently (Counter set)
	EventViolation                   // broker reset a stream and blocklisted its peer (Err set)
	EventQueueReset                  // broker reset a subscriber stream for a full queue
	EventLeave                       // a stream left a cohort at the broker (Err set if it failed)
	EventReclaim                     // broker reclaimed a cohort
	EventDeliver                     // a subscription accepted a delivery (Index set)
	EventClientDrop                  // a subscription dropped a delivery
	EventEnd                         // broker ended a cohort on its admin's END_OF_STREAM
	EventParent                      // a subscription attached to a parent (Peer; Status: the join's outcome)
	EventParentLost                  // a subscription lost a parent (Peer; Err why)
	EventProbe                       // a node at capacity probed its subtree (Index: candidates found)
	EventReparent                    // a child moved to the parent a Reparent named (Peer: the new parent; Err set if it refused or failed)
	EventWithheld                    // a subscription dropped a parent that lagged its sister (Peer)
	EventFault                       // a subscription lost both parents: a liveness fault
	EventForward                     // a relay forwarded a publication rootward (Peer: the child it came from)
	EventAsk                         // a subscription asked a lazy parent for deliveries it announced (Peer; Index: how many)
	EventPromote                     // a subscription set a lazy parent eager (Peer)
	EventAnnounced                   // a subscription waits for the frame a lazy parent announced (Peer)
	EventEscape                      // a subscription left one of two parents that both passed over an update, for a parent the root's probe found (Peer: the one left; Index: the update passed over; Err set if no new parent was found)
	EventActivity                    // the root took an AUTH on a publisher stream as activity (Peer)
	EventHeartbeat                   // a subscription took a root heartbeat (Peer: the parent; Index: its sequence), or saw a gap through it (Err set: why)
)

var eventNames = [...]string{"join", "claim", "accept", "drop", "violation", "queue_reset", "leave", "reclaim", "deliver", "client_drop", "end",
	"parent", "parent_lost", "probe", "reparent", "withheld", "fault", "forward", "ask", "promote", "announced", "escape", "activity", "heartbeat"}

func (k EventKind) String() string {
	if k < 0 || int(k) >= len(eventNames) {
		return "unknown"
	}
	return eventNames[k]
}

// Event is one observed protocol event.
type Event struct {
	Kind    EventKind
	Cohort  string        // Spec.String()
	Peer    swarm.Address // the remote peer, where there is one
	Status  string        // EventJoin: OK, FULL, REJECTED
	Counter Counter       // EventDrop
	Index   uint64        // EventAccept, EventDeliver, EventEscape
	Service bool          // EventAccept, EventDeliver: a service SOC
	Err     error
}

// Tracer observes protocol events; it must not block. Tests and the
// simulator use it to synchronise on events instead of sleeping.
type Tracer interface {
	Trace(Event)
}

// TracerFunc adapts a function to a Tracer.
type TracerFunc func(Event)

// Trace calls f.
func (f TracerFunc) Trace(e Event) { f(e) }

func (s *Service) trace(e Event) {
	if s.tracer != nil {
		s.tracer.Trace(e)
	}
}
