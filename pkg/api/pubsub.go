// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/gorilla/websocket"
)

// pubsubWsHandler serves GET /pubsub/{topic}: it validates the request,
// reaches the broker and joins the cohort (the node's shared streams where
// they exist) before it upgrades, so that every failure it can know of is an
// HTTP status; then it runs the session until it ends.
func (s *Server) pubsubWsHandler(w http.ResponseWriter, r *http.Request) {
	logger := s.logger.WithName("pubsub_ws").Build()

	p, msg, reasons := s.parseSession(r)
	if len(reasons) > 0 {
		badRequest(w, logger, msg, reasons...)
		return
	}
	if !websocket.IsWebSocketUpgrade(r) {
		badRequest(w, logger, "expected a websocket upgrade")
		return
	}
	if !s.checkOrigin(r) {
		jsonhttp.Forbidden(w, "origin not allowed")
		return
	}
	client := s.clientOf(r)
	if err := s.reserve(client); err != nil {
		refused(w, logger, err)
		return
	}
	upgraded, entered := false, false
	var broker swarm.Address
	defer func() {
		if entered {
			s.leaveCohort(client, broker, cohortKey(broker, p.spec))
		}
		if !upgraded {
			s.unreserve(client)
		}
	}()

	ctx, cancel := context.WithTimeout(r.Context(), s.opts.JoinTimeout)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()

	broker, err := s.peers.resolve(ctx, p.peer)
	if err != nil {
		s.joinFailed(w, logger, err)
		return
	}
	if broker.Equal(s.svc.Overlay()) {
		badRequest(w, logger, "invalid query params", jsonhttp.Reason{Field: "peer", Error: "is this node: a node does not join its own cohorts"})
		return
	}
	if err := s.enterCohort(client, broker, cohortKey(broker, p.spec)); err != nil {
		refused(w, logger, err)
		return
	}
	entered = true

	rm, err := s.acquireRoom(broker, p.spec)
	if err != nil {
		s.joinFailed(w, logger, err)
		return
	}
	var h *hub
	if p.spectates() {
		if h, err = s.acquireHub(ctx, rm); err != nil {
			s.releaseRoom(rm)
			s.joinFailed(w, logger, err)
			return
		}
	}
	var e *pubStream
	if p.publish && !p.claims() {
		if e, err = s.acquirePub(ctx, rm, p, nil); err != nil {
			if h != nil {
				s.releaseHub(h)
			}
			s.releaseRoom(rm)
			s.joinFailed(w, logger, err)
			return
		}
	}

	// The session exists, holding its first frame and a member of its
	// room, before the dApp sees the upgrade: a session that receives at
	// once receives everything accepted after that.
	ss := newSession(s, p, broker, rm, h, logger)
	ss.client, entered = client, false // the session leaves the cohort (release)
	if p.claims() && (p.spec.Closed || rm.rostered(p.addr)) {
		// The stream opens at once (the admin, a closed cohort, an
		// address the roster names): joined before the upgrade, so that
		// a broker that cannot be joined is an HTTP status; the dApp signs
		// the claim once upgraded.
		if e, err = s.startPub(ctx, rm, p, ss); err != nil {
			ss.close(websocket.CloseGoingAway, "join failed", nil)
			ss.release(nil)
			s.joinFailed(w, logger, err)
			return
		}
	}
	receive := true
	switch {
	case e != nil && !p.claims():
		ss.attachPub(e)
	case !p.publish:
		ss.ready("subscriber")
	case p.claims() && h != nil && !rm.rostered(p.addr):
		// An open cohort: the session watches it until a roster names addr.
		ss.wait(reasonNotRostered)
	default:
		receive = false // from its ready frame on
	}
	rm.add(ss, receive)
	if h != nil && !h.add(ss) {
		ss.close(websocket.CloseGoingAway, "the broker ended the subscription", nil)
	}

	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil { // the upgrader has answered
		logger.Debug("upgrade failed", "error", err)
		ss.close(websocket.CloseGoingAway, "upgrade failed", nil)
		ss.release(e)
		return
	}
	upgraded = true
	ss.ws.Store(ws)
	ss.run(e)
}

// joinFailed answers a failure to reach or join the broker.
func (s *Server) joinFailed(w http.ResponseWriter, logger log.Logger, err error) {
	code, msg := joinStatus(err)
	logger.Debug("join failed", "error", err)
	if code == http.StatusServiceUnavailable {
		retry := s.opts.JoinTimeout
		var be *backoffError
		var cbe *p2p.ConnectionBackoffError
		switch {
		case errors.As(err, &be) && !be.until.IsZero():
			retry = time.Until(be.until)
		case errors.As(err, &cbe):
			retry = time.Until(cbe.TryAfter())
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retry, time.Second).Seconds()))))
	}
	jsonhttp.Respond(w, code, msg)
}

// run runs the upgraded session: registered, its reader and writer
// started, and, where publishing takes a claim, its publisher state kept up
// to date (negotiate) — until it ends. pre is the publisher stream opened
// before the upgrade, if any: where publishing takes a claim, joined, its
// claim pending.
func (ss *session) run(pre *pubStream) {
	s := ss.s
	defer s.unregister(ss)
	if !s.register(ss) {
		ss.close(websocket.CloseGoingAway, "node shutting down", nil)
	}
	go ss.writeLoop()
	go ss.readLoop()

	held := pre // the publisher stream this session holds a reference to
	if ss.plan.claims() {
		held = ss.negotiate(pre)
	}
	<-ss.readerDone
	<-ss.writerDone
	ss.release(held)
}

// release detaches an ended session from its room, hub and publisher
// stream.
func (ss *session) release(held *pubStream) {
	ss.hard.Stop() // set: the session is closed
	ss.room.remove(ss)
	if h := ss.hub; h != nil {
		h.remove(ss)
		ss.s.releaseHub(h)
	}
	if held != nil {
		held.remove(ss)
		ss.s.releasePub(held)
	}
	ss.s.releaseRoom(ss.room)
	ss.s.leaveCohort(ss.client, ss.broker, ss.room.key)
}

// refused answers a session refused by a bound (limitError) or because the
// Server closed.
func refused(w http.ResponseWriter, logger log.Logger, err error) {
	logger.Debug("session refused", "error", err)
	var le *limitError
	if errors.As(err, &le) {
		jsonhttp.Respond(w, le.status, le.msg)
		return
	}
	jsonhttp.ServiceUnavailable(w, err.Error())
}

// attachPub lets the session publish on e and tells the dApp it may.
func (ss *session) attachPub(e *pubStream) {
	if !e.add(ss) {
		ss.fail(websocket.CloseGoingAway, "the broker ended the publisher stream")
		return
	}
	ss.pub.Store(e)
	ss.ready("publisher")
}

// Reasons a session publishing under explicit authorship waits.
const (
	reasonNotRostered = "not in the roster: the admin's roster does not name addr; the node claims when one does"
	reasonNotAdmitted = "closed cohort: claim sent, not admitted yet: the broker admits addr once its roster names it"
)

// negotiate keeps a session publishing under explicit authorship in step
// with the roster the node holds and with its publisher stream, until the
// session closes; it returns the publisher stream it holds, if any.
//
// The stream is opened — and the claim signed by the dApp — at once for the
// admin and in a closed cohort, where a claim is the only way in; in an open
// cohort only once a roster the node verified names addr, so that the claim
// is taken: the broker gives no answer to a claim, and a node that misjudged
// it would send a publication on a subscriber stream, or a claim on a
// publisher stream, against itself. The session may publish while the
// stream is a publisher stream (pubStream.taken) and the roster names addr;
// a roster revoking addr makes it wait again — in an open cohort it lets
// go of the stream, and claims anew on a later grant.
func (ss *session) negotiate(pre *pubStream) *pubStream {
	e := pre
	if e != nil {
		e = ss.attachOpened(e)
	}
	for {
		e = ss.evaluate(e)
		select {
		case <-ss.wake:
		case <-ss.quit:
			return e
		}
	}
}

// attachOpened waits for the publisher stream the session started before
// its upgrade (startPub) to be open — its claim signed — and attaches the
// session; it returns the stream it holds after.
func (ss *session) attachOpened(e *pubStream) *pubStream {
	select {
	case <-e.ready:
	case <-ss.quit:
		return e
	}
	if e.err != nil {
		ss.s.releasePub(e)
		if errors.Is(e.err, errClaim) {
			ss.s.metrics.ClaimsFailed.Inc()
		}
		ss.fail(closeStatus(e.err), "publish: "+e.err.Error())
		return nil
	}
	if !e.add(ss) {
		ss.fail(websocket.CloseGoingAway, "the broker ended the publisher stream")
	}
	return e
}

// evaluate looks at the session's publisher state once; e is the stream it
// holds, and it returns the one it holds after.
func (ss *session) evaluate(e *pubStream) *pubStream {
	s, p, rm := ss.s, ss.plan, ss.room
	if ss.closed() {
		return e
	}
	if e == nil {
		if !p.spec.Closed && !rm.rostered(p.addr) {
			ss.wait(reasonNotRostered)
			return nil
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.JoinTimeout+2*s.opts.ClaimTimeout)
		var err error
		e, err = s.acquirePub(ctx, rm, p, ss)
		cancel()
		if err != nil {
			if errors.Is(err, errClaim) {
				s.metrics.ClaimsFailed.Inc()
			}
			ss.fail(closeStatus(err), "publish: "+err.Error())
			return nil
		}
		if !e.add(ss) {
			ss.fail(websocket.CloseGoingAway, "the broker ended the publisher stream")
			return e
		}
	}
	switch {
	case !e.taken.Load():
		ss.wait(reasonNotAdmitted)
	case rm.rostered(p.addr):
		ss.allow(e)
	default:
		st := rm.service()
		ss.wait(fmt.Sprintf("revoked: the admin's roster %d does not name addr", st.next-1))
		if !p.spec.Closed {
			e.remove(ss)
			s.releasePub(e)
			return nil
		}
	}
	return e
}

// wait stops the session publishing and tells the dApp why, once per
// reason.
func (ss *session) wait(reason string) {
	ss.pub.Store(nil)
	ss.waiting.Store(&reason)
	if reason == ss.told {
		return
	}
	ss.told = reason
	if !ss.sendControl(waitingFrame{Type: typeWaiting, Addr: hex.EncodeToString(ss.plan.addr), Reason: reason}) {
		ss.slow()
	}
}

// allow lets the session publish on e: the ready frame, and deliveries from
// then on.
func (ss *session) allow(e *pubStream) {
	if ss.pub.Load() == e {
		return
	}
	ss.told = ""
	ss.pub.Store(e)
	ss.waiting.Store(nil)
	ss.ready("publisher")
	ss.room.receive(ss)
}

// ready sends the ready frame (not to the GSOC client).
func (ss *session) ready(role string) {
	if !ss.plan.control() {
		return
	}
	f := readyFrame{
		Type:    typeReady,
		Role:    role,
		Topic:   hex.EncodeToString(ss.plan.spec.Topic),
		Binding: bindingName(ss.plan.spec.Binding),
		Broker:  ss.broker.String(),
		Fields:  fieldNames(ss.plan.fields),
	}
	if role == "publisher" {
		f.Addr = hex.EncodeToString(ss.plan.addr)
		if ss.plan.claims() && ss.plan.layout == layoutIndex {
			f.Index = &ss.plan.index
		}
	}
	if !ss.sendControl(f) {
		ss.slow()
	}
}

// bindingName is the binding as the binding query parameter names it.
func bindingName(b pb.TopicBinding) string {
	if b == pb.TopicBinding_FEED_TOPIC {
		return "feed"
	}
	return strings.ToLower(b.String())
}
