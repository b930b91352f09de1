// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/gorilla/mux"
	"github.com/gorilla/websocket"
)

// pubsubWsHandler serves GET /pubsub/{topic}: it parses and checks the
// request, then opens the session — reaching the broker and joining the
// cohort (the node's shared streams where they exist) — before it upgrades,
// so that every failure it can know of is an HTTP status; then it runs the
// session until it ends.
func (s *Server) pubsubWsHandler(w http.ResponseWriter, r *http.Request) {
	logger := s.logger.WithName("pubsub_ws").Build()

	// A page cannot read a refused upgrade's status: its refusals are
	// recorded and sent as a close after the upgrade (closeRefused).
	out := w
	var rec *refusalRecorder
	if fromPage(r) {
		rec = newRefusalRecorder()
		out = rec
	}
	ss, gsoc := s.prepareSession(out, r, logger)
	if ss == nil {
		if rec != nil {
			s.closeRefused(w, r, logger, rec, gsoc)
		}
		return
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil { // the upgrader has answered
		logger.Debug("upgrade failed", "error", err)
		ss.abort("upgrade failed")
		return
	}
	ss.ws.Store(ws)
	ss.run()
}

// prepareSession parses and checks a session request and opens the
// session, ready for its upgrade; on failure it has answered w and returns
// nil, and whether the request was the GSOC client's (no text frames).
func (s *Server) prepareSession(w http.ResponseWriter, r *http.Request, logger log.Logger) (*wsSession, bool) {
	p, msg, reasons := s.parseSession(r)
	if len(reasons) > 0 {
		badRequest(w, logger, msg, reasons...)
		_, binding := r.URL.Query()["binding"]
		return nil, !binding
	}
	if !s.checkSession(w, r, logger, p) {
		return nil, p.gsoc
	}
	ss, err := s.openSession(r, p, logger)
	if err != nil {
		s.openFailed(w, logger, err)
		return nil, p.gsoc
	}
	return ss, p.gsoc
}

// checkSession answers a request that cannot become a session here: not a
// WebSocket upgrade, from an origin not allowed, or naming a batch the node
// cannot stamp with.
func (s *Server) checkSession(w http.ResponseWriter, r *http.Request, logger log.Logger, p *plan) bool {
	switch {
	case !websocket.IsWebSocketUpgrade(r):
		badRequest(w, logger, "expected a websocket upgrade")
		return false
	case !s.checkOrigin(r):
		jsonhttp.Forbidden(w, "origin not allowed")
		return false
	case p.batch != nil:
		return s.checkBatch(w, r, logger, p.batch)
	}
	return true
}

// errOwnCohort: the peer is this node.
var errOwnCohort = errors.New("is this node: a node does not join its own cohorts")

// openSession sets the session of p up before its upgrade: it reserves the
// client's share, reaches the broker, enters the cohort, holds the room and
// the shared streams the session starts with, and makes the session a
// member of its room. On failure it has undone all of it, and the caller
// answers with openFailed.
func (s *Server) openSession(r *http.Request, p *plan, logger log.Logger) (_ *wsSession, err error) {
	client := s.clientOf(r)
	if err := s.reserve(client); err != nil {
		return nil, err
	}
	ss := newSession(s, p, client, logger)
	defer func() {
		if err != nil {
			ss.abort("join failed")
		}
	}()

	ctx, cancel := context.WithTimeout(r.Context(), s.opts.JoinTimeout)
	defer cancel()
	defer context.AfterFunc(s.ctx, cancel)()

	if ss.broker, err = s.peers.resolve(ctx, p.peer); err != nil {
		return nil, err
	}
	if ss.broker.Equal(s.svc.Overlay()) {
		return nil, errOwnCohort
	}
	if err := s.enterCohort(client, ss.broker, cohortKey(ss.broker, p.spec)); err != nil {
		return nil, err
	}
	ss.entered = true
	if ss.room, err = s.mux.Room(ss.broker, p.spec); err != nil {
		return nil, err
	}
	if p.spectates() {
		if ss.hub, err = s.mux.Subscribe(ctx, ss.room); err != nil {
			return nil, err
		}
	}
	if p.publish {
		// Joined before the upgrade, declaring addr (SWIP-74 Rev 8), so
		// that a broker that cannot be joined is an HTTP status; the
		// session learns the stream's challenge from its Ack and hands it
		// to the dApp, which signs every chunk — its claiming AUTH first —
		// once upgraded.
		if ss.stream, err = s.mux.Publish(ctx, ss.room, p.streamOptions()); err != nil {
			return nil, err
		}
	}
	// The session is a member of its room before the dApp sees the upgrade:
	// a session that receives at once receives everything accepted after.
	ss.join()
	return ss, nil
}

// openFailed answers a session openSession could not set up.
func (s *Server) openFailed(w http.ResponseWriter, logger log.Logger, err error) {
	var le *limitError
	switch {
	case errors.Is(err, errOwnCohort):
		badRequest(w, logger, "invalid query params", jsonhttp.Reason{Field: "peer", Error: err.Error()})
	case errors.As(err, &le), errors.Is(err, ErrServerClosed):
		refused(w, logger, err)
	default:
		s.joinFailed(w, logger, err)
	}
}

// maxServiceBody bounds the body of a service request: the JSON of a
// service chunk's fields, its soc in hex (2 × (id ‖ signature ‖ span ‖ a
// 4096-byte payload)), with room for the rest.
const maxServiceBody = 2*socMax + 512

// serviceHandler serves POST /pubsub/{topic}/service: the admin's control
// plane (SWIP-60 rev 14). The body is a ROSTER or EOS chunk the admin's
// dApp signed under the challenge of the admin's stream on this node —
// {"kind","index","challenge","soc"} — which the node checks as the broker
// will (bps.Spec.Verify at the admin's address under that challenge) and
// relays on that stream: the node holds no keys. The broker answers
// nothing; 200 means written.
func (s *Server) serviceHandler(w http.ResponseWriter, r *http.Request) {
	logger := s.logger.WithName("pubsub_service").Build()
	topic, err := ParseTopic(mux.Vars(r)["topic"])
	if err != nil {
		badRequest(w, logger, "invalid path params", jsonhttp.Reason{Field: "topic", Error: err.Error()})
		return
	}

	if reasons := checkQuery(r, serviceQuery{}); len(reasons) > 0 {
		badRequest(w, logger, "invalid query params", reasons...)
		return
	}
	var q serviceQuery
	if reasons := s.mapParams(queryGetter(r), &q); len(reasons) > 0 {
		badRequest(w, logger, "invalid query params", reasons...)
		return
	}
	var reasons reasonList
	ref := s.parsePeerParam(q.Peer, &reasons)
	sp := buildSpec(topic, specParams{binding: q.Binding, admin: q.Admin, publishers: q.Publishers, closed: q.Closed, history: q.History}, &reasons)
	if len(reasons) > 0 {
		badRequest(w, logger, "invalid query params", reasons...)
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxServiceBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			jsonhttp.RequestEntityTooLarge(w, fmt.Sprintf("a service request is at most %d bytes", maxServiceBody))
			return
		}
		badRequest(w, logger, "read body: "+err.Error())
		return
	}
	b, svc, err := serviceChunk(sp, body)
	if err != nil {
		logger.Debug("service chunk refused", "error", err)
		badRequest(w, logger, err.Error())
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.opts.JoinTimeout)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	broker, err := s.peers.resolve(ctx, ref)
	if err != nil {
		s.joinFailed(w, logger, err)
		return
	}

	if rm := s.mux.LookupRoom(broker, sp); rm != nil && b.Kind == pb.Kind_ROSTER {
		if st := rm.Service(); st.Seen && b.Index < st.Next {
			jsonhttp.Conflict(w, fmt.Sprintf("stale service index %d: this node holds the admin's rosters up to index %d; the next is %d", b.Index, st.Next-1, st.Next))
			return
		}
	}
	e := s.mux.HoldPublisher(broker, sp, sp.Admin)
	if e == nil {
		jsonhttp.Conflict(w, fmt.Sprintf("no admin stream with this challenge: no session on this node publishes as the admin %x in this cohort at this broker (open GET /pubsub/{topic}?addr=<admin> with this spec and peer)", sp.Admin))
		return
	}
	defer e.Release()
	if ch, _ := e.Challenge(); !bytes.Equal(ch, b.Challenge) {
		jsonhttp.Conflict(w, "no admin stream with this challenge: the admin's stream on this node has another (it was joined again: sign under the latest challenge frame)")
		return
	}
	if err := e.Send(ctx, b); err != nil {
		var se *session.StaleError
		if errors.As(err, &se) {
			jsonhttp.Conflict(w, "no admin stream with this challenge: the admin's stream was joined again: sign under the latest challenge frame")
			return
		}
		logger.Debug("relay failed", "error", err)
		jsonhttp.BadGateway(w, "relay: "+err.Error())
		return
	}
	s.metrics.ServiceRelayed.Inc()
	// The node takes what it relayed as the service feed in force: the
	// admin's stream never gets its own back, and a session here may be
	// waiting for this very roster.
	if _, addr, err := serviceOf(sp, b); err == nil {
		e.Room().Deliver(bps.Delivery{Kind: b.Kind, Index: b.Index, Challenge: b.Challenge, Address: addr, Owner: sp.Admin, Data: b.Soc, Service: svc})
	}
	jsonhttp.OK(w, serviceResponse{Index: svc.Index})
}

// topicsHandler serves GET /pubsub/: the cohorts this node brokers, then the
// subscriber and publisher streams its sessions share.
func (s *Server) topicsHandler(w http.ResponseWriter, _ *http.Request) {
	a := s.svc.Audience()
	out := topicsResponse{Topics: []topicInfo{}, Audience: audienceInfo{
		StreamsPerCohort:    a.StreamsPerCohort,
		PublishersPerCohort: a.PublisherStreams,
		Cohorts:             a.Cohorts,
		CohortsPerPeer:      a.CohortsPerPeer,
		LightNodes:          beeLightNodes,
		FullNodesPerBin:     beeFullNodesPerBin,
	}, Pricing: s.pricing()}
	for _, e := range s.cohortEntries() {
		out.Topics = append(out.Topics, e.info())
	}
	jsonhttp.OK(w, out)
}

// cohortEntry is everything the node knows of one cohort: its position
// (the root's, or as a follower), its broker half's state (at the root or
// a relay) and the streams its sessions share.
type cohortEntry struct {
	spec    *bps.Spec
	root    *bps.Position
	follow  *bps.Position
	half    *bps.CohortInfo
	streams []session.StreamInfo
}

// cohortEntries gathers the node's cohorts, one entry each, in the order
// the tree lists them, then cohorts known only by a shared stream.
func (s *Server) cohortEntries() []*cohortEntry {
	byKey := make(map[string]*cohortEntry)
	var order []*cohortEntry
	entry := func(sp *bps.Spec) *cohortEntry {
		k := string(sp.Canonical())
		e := byKey[k]
		if e == nil {
			e = &cohortEntry{spec: sp}
			byKey[k] = e
			order = append(order, e)
		}
		return e
	}
	for _, p := range s.svc.Tree() {
		e := entry(p.Spec)
		if len(p.Parents) == 0 {
			e.root = &p
		} else {
			e.follow = &p
		}
	}
	for _, c := range s.svc.Cohorts() {
		entry(c.Spec).half = &c
	}
	for _, st := range s.mux.Streams() {
		e := entry(st.Spec)
		e.streams = append(e.streams, st)
	}
	return order
}

// role is what the node is in the cohort.
func (e *cohortEntry) role() string {
	switch {
	case e.root != nil:
		return "broker"
	}
	for _, st := range e.streams {
		if st.Publisher {
			return "publisher"
		}
	}
	return "subscriber"
}

// info is the entry as GET /pubsub/ shows it.
func (e *cohortEntry) info() topicInfo {
	t := specInfo(e.spec)
	t.Role = e.role()
	t.Relay = e.root == nil && e.follow != nil && len(e.follow.Children) > 0
	pos := e.root
	if pos == nil {
		pos = e.follow
	}
	var peers []swarm.Address
	if pos != nil {
		t.position(*pos)
		t.Streams = pos.Streams
		peers = append(slices.Clone(pos.Parents), pos.Children...)
	} else {
		t.position(bps.Position{})
	}
	if c := e.half; c != nil {
		t.Subscribers, t.Publishers = ptr(c.Subscribers), ptr(c.Publishers)
		t.Accepted, t.Counters = ptr(c.Accepted), c.Counters
		t.Created, t.LastAccept = ptr(c.Created.UTC()), ptr(c.LastAccept.UTC())
		if !c.Spec.Implicit() {
			t.Cursor = ptr(c.Cursor)
			t.Roster, t.ServiceNext, t.Ended = hexList(c.Roster), ptr(c.ServiceNext), ptr(c.Ended)
		}
	}
	sessions := 0
	for _, st := range e.streams {
		sessions += st.Sessions
		t.Streams++
		if t.Broker == "" {
			t.Broker = st.Broker.String()
		}
		if pos == nil {
			peers = append(peers, st.Broker)
		}
		if st.Publisher {
			if t.Addr == "" {
				t.Addr = hex.EncodeToString(st.Addr)
			}
			t.Sent = ptr(deref(t.Sent) + st.Sent)
			if st.Claims {
				t.Taken = ptr(deref(t.Taken) || st.Taken)
			}
		} else {
			t.Received, t.Dropped = ptr(deref(t.Received)+st.Received), ptr(deref(t.Dropped)+st.Dropped)
		}
		if e.half == nil && !st.Spec.Implicit() && (t.ServiceNext == nil || st.Service.Next > *t.ServiceNext) {
			t.Roster, t.ServiceNext, t.Ended = hexList(st.Service.Roster), ptr(st.Service.Next), ptr(st.Service.Ended)
		}
	}
	if len(e.streams) > 0 {
		t.Sessions = ptr(sessions)
	}
	slices.SortFunc(peers, func(a, b swarm.Address) int { return a.Compare(b) })
	for _, p := range slices.CompactFunc(peers, swarm.Address.Equal) {
		t.Connections = append(t.Connections, p.String())
	}
	return t
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// hexList is each of bs in hex.
func hexList(bs [][]byte) *[]string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = hex.EncodeToString(b)
	}
	return &out
}
