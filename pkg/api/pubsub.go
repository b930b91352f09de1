// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/log"
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
	if err := s.reserve(); err != nil {
		logger.Debug("session refused", "error", err)
		jsonhttp.ServiceUnavailable(w, err.Error())
		return
	}
	upgraded := false
	defer func() {
		if !upgraded {
			s.unreserve()
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

	var h *hub
	if p.subscribes() {
		if h, err = s.acquireHub(ctx, broker, p.spec); err != nil {
			s.joinFailed(w, logger, err)
			return
		}
	}
	var e *pubStream
	if p.publish && !p.claims() {
		if e, err = s.acquirePub(ctx, broker, p, nil); err != nil {
			if h != nil {
				s.releaseHub(h)
			}
			s.joinFailed(w, logger, err)
			return
		}
	}

	// The session exists, holding its ready frame and attached to its hub,
	// before the dApp sees the upgrade: it receives everything accepted
	// after that.
	ss := newSession(s, p, broker, h, logger)
	if e != nil {
		ss.attachPub(e)
	} else if !p.publish {
		ss.ready("subscriber")
	}
	if h != nil && !p.claims() && !h.add(ss) {
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
		if errors.As(err, &be) && !be.until.IsZero() {
			retry = time.Until(be.until)
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retry, time.Second).Seconds()))))
	}
	jsonhttp.Respond(w, code, msg)
}

// run runs the upgraded session: registered, its reader and writer
// started, its publisher stream opened where that takes a claim (the dApp
// signs it through the session) — and waits for it to end. pre is the
// publisher stream opened before the upgrade, if any.
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
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.JoinTimeout+2*s.opts.ClaimTimeout)
		e, err := s.acquirePub(ctx, ss.broker, ss.plan, ss.claimSigner())
		cancel()
		if err != nil {
			if errors.Is(err, errClaim) {
				s.metrics.ClaimsFailed.Inc()
			}
			ss.fail(closeStatus(err), "publish: "+err.Error())
		} else {
			held = e
			ss.attachPub(e)
			// Deliveries start after the ready frame.
			if h := ss.hub; h != nil && !ss.closed() && !h.add(ss) {
				ss.fail(websocket.CloseGoingAway, "the broker ended the subscription")
			}
		}
	}

	<-ss.readerDone
	<-ss.writerDone
	ss.release(held)
}

// release detaches an ended session from its hub and publisher stream.
func (ss *session) release(held *pubStream) {
	ss.hard.Stop() // set: the session is closed
	if h := ss.hub; h != nil {
		h.remove(ss)
		ss.s.releaseHub(h)
	}
	if held != nil {
		held.remove(ss)
		ss.s.releasePub(held)
	}
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
		if ss.plan.claims() {
			f.Index = &ss.plan.index
		}
	}
	if !ss.sendControl(f) {
		ss.fail(websocket.ClosePolicyViolation, "slow consumer: session queue full")
	}
}

// bindingName is the binding as the binding query parameter names it.
func bindingName(b pb.TopicBinding) string {
	if b == pb.TopicBinding_FEED_TOPIC {
		return "feed"
	}
	return strings.ToLower(b.String())
}
