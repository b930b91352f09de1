// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/gorilla/websocket"
)

// eosReason closes the sessions of a cohort whose admin published
// END_OF_STREAM: an attributable end, not the broker's.
const eosReason = "end of stream: the admin ended the cohort"

// roomWindow bounds the deliveries a room remembers to drop the second copy
// of a message that reaches the node on two of its streams.
const roomWindow = 512

// room is what this node's sessions in one cohort at one broker share
// besides the streams: the fan-out to the sessions, a dedup window over what
// the node's streams deliver (a message reaches the node once on each stream
// it holds in the cohort that is not bound to the message's owner: its
// subscriber stream and every publisher stream), and the service feed as the
// node has verified it — the roster, its index, the end.
//
// Every stream of the cohort on this node hands its deliveries to deliver. A
// session is a member from its setup to its end, and receives deliveries
// while it is marked receiving: a session of a closed cohort only once the
// broker admitted its address.
//
// refs and ending are guarded by Server.mu; the rest by room.mu, under which
// deliver runs whole: it only enqueues and never blocks.
type room struct {
	s      *Server
	key    string
	broker swarm.Address
	spec   *bps.Spec

	refs   int
	ending bool

	mu       sync.Mutex
	sessions map[*session]bool       // member → receives deliveries
	pubs     map[*pubStream]struct{} // poked when the roster changes
	seen     *bps.Window
	svcSeen  bool                // a service SOC was applied
	svcNext  uint64              // the lowest service index the node takes next
	latest   *pb.ServiceMessage  // the last service SOC applied
	roster   map[string]struct{} // the publishers latest names (admin excluded)
	ended    bool                // END_OF_STREAM applied
}

// acquireRoom returns the room of (broker, sp), creating it; the caller
// releases it with releaseRoom.
func (s *Server) acquireRoom(broker swarm.Address, sp *bps.Spec) (*room, error) {
	key := cohortKey(broker, sp)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrServerClosed
	}
	r := s.rooms[key]
	if r == nil {
		r = &room{s: s, key: key, broker: broker, spec: sp, sessions: make(map[*session]bool),
			pubs: make(map[*pubStream]struct{}), seen: bps.NewWindow(roomWindow)}
		s.rooms[key] = r
	}
	r.refs++
	return r, nil
}

// releaseRoom drops a reference; the last one forgets the room.
func (s *Server) releaseRoom(r *room) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.refs--; r.refs == 0 {
		r.ending = true
		if s.rooms[r.key] == r {
			delete(s.rooms, r.key)
		}
	}
}

// lookupRoom returns the room of key, if any.
func (s *Server) lookupRoom(key string) *room {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rooms[key]
}

// add makes ss a member, receiving at once if receive. A session joining a
// cohort that has ended is closed as the others were.
func (r *room) add(ss *session, receive bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ended {
		ss.close(websocket.CloseNormalClosure, eosReason, nil)
		return
	}
	r.sessions[ss] = false
	if receive {
		r.receiveLocked(ss)
	}
}

// receive marks a member receiving.
func (r *room) receive(ss *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if recv, ok := r.sessions[ss]; ok && !recv {
		r.receiveLocked(ss)
	}
}

// receiveLocked marks ss receiving and tells it the roster the node holds,
// as a broker tells a new stream (SWIP-60: the latest service SOC first).
func (r *room) receiveLocked(ss *session) {
	r.sessions[ss] = true
	if r.latest != nil && ss.plan.control() && !ss.sendText(newServiceFrame(r.latest, false)) {
		delete(r.sessions, ss)
		ss.slow()
	}
}

func (r *room) remove(ss *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.sessions, ss)
}

func (r *room) addPub(e *pubStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pubs[e] = struct{}{}
}

func (r *room) removePub(e *pubStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pubs, e)
}

// rostered reports whether addr may publish as far as the node knows: the
// admin, or named by the latest roster it verified.
func (r *room) rostered(addr []byte) bool {
	if bytes.Equal(addr, r.spec.Admin) {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.roster[string(addr)]
	return ok
}

// serviceState is the service feed as the node knows it.
type serviceState struct {
	seen   bool
	next   uint64
	roster []string // hex, sorted
	ended  bool
}

func (r *room) service() serviceState {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := serviceState{seen: r.svcSeen, next: r.svcNext, ended: r.ended, roster: make([]string, 0, len(r.roster))}
	for p := range r.roster {
		st.roster = append(st.roster, hex.EncodeToString([]byte(p)))
	}
	slices.Sort(st.roster)
	return st
}

// deliver hands one verified delivery of one of the node's streams to the
// members: once, whichever stream brought it first. A content message goes
// to every receiving member but those publishing as its owner (SWIP-60: a
// publisher never receives its own messages; a GSOC publisher, which shares
// its identity, skips exactly what it sent). A service SOC updates the
// node's roster and goes to every receiving member of the session protocol
// as a text frame; END_OF_STREAM then closes every member.
func (r *room) deliver(d bps.Delivery) {
	k := echoKey(d.Address.Bytes(), d.Data)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen.Add(k) {
		return
	}
	if d.Service != nil {
		r.serviceLocked(d)
		return
	}
	v := newView(r.spec, d)
	for ss, recv := range r.sessions {
		if !recv || ss.closed() {
			continue
		}
		if ss.echo != nil {
			if ss.echo.take(v.echoKey()) {
				continue
			}
		} else if ss.plan.publish && bytes.Equal(ss.plan.addr, d.Owner) {
			continue
		}
		frame, err := v.frame(ss.plan.fields)
		if err != nil {
			delete(r.sessions, ss)
			ss.fail(websocket.CloseInternalServerErr, err.Error())
			continue
		}
		if !ss.enqueue(websocket.BinaryMessage, frame) {
			delete(r.sessions, ss)
			ss.slow()
			continue
		}
		r.s.metrics.Delivered.Inc()
	}
}

// serviceLocked applies a service SOC newer than what the node holds and
// tells the members; the caller holds r.mu. A gap is one the stream saw, or
// one the node sees across its streams.
func (r *room) serviceLocked(d bps.Delivery) {
	svc := d.Service
	if r.svcSeen && svc.Index < r.svcNext {
		return // older than what the node holds: a late copy
	}
	gap := d.Gap || (r.svcSeen && svc.Index > r.svcNext)
	r.svcSeen, r.svcNext, r.latest = true, svc.Index+1, svc
	switch svc.Kind {
	case pb.ServiceKind_ROSTER:
		r.roster = make(map[string]struct{}, len(svc.Publishers))
		for _, p := range svc.Publishers {
			r.roster[string(p)] = struct{}{}
		}
	case pb.ServiceKind_END_OF_STREAM:
		r.ended = true
	}
	if gap {
		r.s.metrics.ServiceGaps.Inc()
	}
	frame := newServiceFrame(svc, gap)
	if r.ended {
		for ss, recv := range r.sessions {
			var final []byte
			if recv && ss.plan.control() {
				final = frame
			}
			ss.closeDrained(websocket.CloseNormalClosure, eosReason, final)
		}
		clear(r.sessions)
		return
	}
	for ss, recv := range r.sessions {
		if !recv || !ss.plan.control() || ss.closed() {
			continue
		}
		if !ss.sendText(frame) {
			delete(r.sessions, ss)
			ss.slow()
		}
	}
	// The roster may admit or revoke a publishing session: each looks again.
	for ss := range r.sessions {
		if ss.plan.claims() {
			ss.poke()
		}
	}
	for e := range r.pubs {
		e.poke()
	}
}

// slowReason closes a session whose queue is full.
func slowReason(queue int) string {
	return fmt.Sprintf("slow consumer: %d frames queued, not read", queue)
}
