// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/gorilla/websocket"
)

// backoffError: the node may not join this cohort at that broker before
// until (the mandatory backoff after FULL, REJECTED or a reset); cause is the
// broker's answer that imposed it, if this join got one.
type backoffError struct {
	until time.Time
	cause error
}

func (e *backoffError) Error() string {
	msg := fmt.Sprintf("backing off from the broker until %s", e.until.UTC().Format(time.RFC3339))
	if e.cause != nil {
		msg = e.cause.Error() + ": " + msg
	}
	return msg
}

func (e *backoffError) Unwrap() error { return e.cause }

// joinErr turns FULL into a backoffError, so the dApp learns when to retry.
func (s *Server) joinErr(broker swarm.Address, sp *bps.Spec, err error) error {
	if errors.Is(err, bps.ErrFull) {
		return &backoffError{until: s.svc.BackoffUntil(broker, sp), cause: err}
	}
	return err
}

// hub is the one subscriber stream that every session on this node
// subscribing to a cohort at a broker shares. Its goroutine reads the
// subscription and fans each delivery out to the sessions without blocking:
// a session whose queue is full is closed.
//
// refs and ending are guarded by Server.mu; sessions and ended by hub.mu.
type hub struct {
	s      *Server
	key    string
	broker swarm.Address
	spec   *bps.Spec
	ready  chan struct{} // closed once the subscription is open or failed
	err    error         // why it failed; read after ready
	sub    *bps.Subscription
	stop   chan struct{} // closed when the last session left
	buf    []*session    // fan-out scratch, hub goroutine only

	refs   int  // sessions attached or waiting for ready
	ending bool // no longer in Server.hubs

	mu       sync.Mutex
	sessions map[*session]struct{}
	ended    bool

	delivered atomic.Uint64
}

func cohortKey(broker swarm.Address, sp *bps.Spec) string {
	return broker.ByteString() + string(sp.Canonical())
}

// acquireHub returns the open hub of (broker, sp), joining the broker if
// there is none; the caller releases it with releaseHub.
func (s *Server) acquireHub(ctx context.Context, broker swarm.Address, sp *bps.Spec) (*hub, error) {
	key := cohortKey(broker, sp)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrServerClosed
	}
	h := s.hubs[key]
	creator := h == nil
	if creator {
		h = &hub{s: s, key: key, broker: broker, spec: sp, ready: make(chan struct{}),
			stop: make(chan struct{}), sessions: make(map[*session]struct{})}
		s.hubs[key] = h
	}
	h.refs++
	s.mu.Unlock()

	if creator {
		s.openHub(ctx, h)
	}
	select {
	case <-h.ready:
	case <-ctx.Done():
		s.releaseHub(h)
		return nil, ctx.Err()
	}
	if h.err != nil {
		s.releaseHub(h)
		return nil, h.err
	}
	return h, nil
}

// openHub joins the broker as a subscriber and starts the hub's goroutine.
func (s *Server) openHub(ctx context.Context, h *hub) {
	defer close(h.ready)
	if until := s.svc.BackoffUntil(h.broker, h.spec); time.Until(until) > 0 {
		h.err = &backoffError{until: until}
		s.dropHub(h)
		return
	}
	sub, err := s.svc.Subscribe(ctx, h.broker, h.spec)
	if err != nil {
		h.err = s.joinErr(h.broker, h.spec, err)
		s.dropHub(h)
		return
	}
	h.sub = sub
	s.metrics.Hubs.Inc()
	if !s.goOwned(h.run) {
		s.metrics.Hubs.Dec()
		_ = sub.Close()
		h.err = ErrServerClosed
		s.dropHub(h)
	}
}

// dropHub takes h out of the map: later sessions open a new one.
func (s *Server) dropHub(h *hub) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.ending = true
	if s.hubs[h.key] == h {
		delete(s.hubs, h.key)
	}
}

// releaseHub drops a reference; the last one ends the subscription.
func (s *Server) releaseHub(h *hub) {
	s.mu.Lock()
	h.refs--
	last := h.refs == 0 && !h.ending
	if last {
		h.ending = true
		if s.hubs[h.key] == h {
			delete(s.hubs, h.key)
		}
	}
	s.mu.Unlock()
	if last {
		close(h.stop)
	}
}

// run fans deliveries out until the last session leaves or the subscription
// ends; in the latter case it closes the sessions left with the reason.
func (h *hub) run() {
	defer h.s.metrics.Hubs.Dec()
	for {
		select {
		case d, ok := <-h.sub.C():
			if !ok {
				h.s.dropHub(h)
				code, reason := websocket.CloseGoingAway, "the broker ended the subscription"
				if err := h.sub.Err(); err != nil {
					code, reason = websocket.CloseInternalServerErr, "subscription lost: "+err.Error()
				}
				if h.s.ctx.Err() != nil {
					code, reason = websocket.CloseGoingAway, "node shutting down"
				}
				h.closeAll(code, reason)
				return
			}
			h.deliver(d)
		case <-h.stop:
			_ = h.sub.Close()
			return
		}
	}
}

// deliver hands d to every session, encoded once per field list. It never
// blocks: a full queue closes that session.
func (h *hub) deliver(d bps.Delivery) {
	if d.Service != nil {
		// A service SOC (roster, end of stream): the subscription has
		// applied it; it is not content.
		return
	}
	v := newView(h.spec, d)
	h.mu.Lock()
	h.buf = h.buf[:0]
	for ss := range h.sessions {
		h.buf = append(h.buf, ss)
	}
	h.mu.Unlock()
	h.delivered.Add(1)
	for _, ss := range h.buf {
		if ss.closed() {
			continue
		}
		if ss.echo != nil && ss.echo.take(v.echoKey()) {
			continue // its own message
		}
		frame, err := v.frame(ss.plan.fields)
		if err != nil {
			h.remove(ss)
			ss.fail(websocket.CloseInternalServerErr, err.Error())
			continue
		}
		if !ss.enqueue(websocket.BinaryMessage, frame) {
			h.remove(ss)
			h.s.metrics.SlowSessions.Inc()
			ss.fail(websocket.ClosePolicyViolation, fmt.Sprintf("slow consumer: %d frames queued, not read", cap(ss.queue)))
			continue
		}
		h.s.metrics.Delivered.Inc()
	}
	clear(h.buf)
}

// add attaches a session; false if the hub has ended.
func (h *hub) add(ss *session) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ended {
		return false
	}
	h.sessions[ss] = struct{}{}
	return true
}

func (h *hub) remove(ss *session) {
	h.mu.Lock()
	delete(h.sessions, ss)
	h.mu.Unlock()
}

func (h *hub) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// closeAll ends the hub for its sessions.
func (h *hub) closeAll(code int, reason string) {
	h.mu.Lock()
	h.ended = true
	all := make([]*session, 0, len(h.sessions))
	for ss := range h.sessions {
		all = append(all, ss)
	}
	clear(h.sessions)
	h.mu.Unlock()
	for _, ss := range all {
		ss.fail(code, reason)
	}
}

// pubStream is the one publisher stream that every session publishing as an
// address in a cohort at a broker shares. The first session's dApp signs the
// claim; the others share it (every frame they send is still verified
// against the address before it is published).
//
// refs and ending are guarded by Server.mu; sessions and ended by pubStream.mu.
type pubStream struct {
	s      *Server
	key    string
	broker swarm.Address
	spec   *bps.Spec
	addr   []byte
	index  uint64
	ready  chan struct{}
	err    error
	p      *bps.Publisher
	stop   chan struct{}

	refs   int
	ending bool

	mu       sync.Mutex
	sessions map[*session]struct{}
	ended    bool

	sent atomic.Uint64
}

// acquirePub returns the publisher stream of (broker, spec, addr), opening
// it if there is none with sign (nil where no claim is needed); the caller
// releases it with releasePub.
func (s *Server) acquirePub(ctx context.Context, broker swarm.Address, p *plan, sign bps.ClaimSigner) (*pubStream, error) {
	key := cohortKey(broker, p.spec) + string(p.addr)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrServerClosed
	}
	e := s.pubs[key]
	creator := e == nil
	if creator {
		e = &pubStream{s: s, key: key, broker: broker, spec: p.spec, addr: p.addr, index: p.index,
			ready: make(chan struct{}), stop: make(chan struct{}), sessions: make(map[*session]struct{})}
		s.pubs[key] = e
	}
	e.refs++
	s.mu.Unlock()

	if creator {
		s.openPub(ctx, e, sign)
	}
	select {
	case <-e.ready:
	case <-ctx.Done():
		s.releasePub(e)
		return nil, ctx.Err()
	}
	if e.err != nil {
		s.releasePub(e)
		return nil, e.err
	}
	return e, nil
}

func (s *Server) openPub(ctx context.Context, e *pubStream, sign bps.ClaimSigner) {
	defer close(e.ready)
	if until := s.svc.BackoffUntil(e.broker, e.spec); time.Until(until) > 0 {
		e.err = &backoffError{until: until}
		s.dropPub(e)
		return
	}
	p, err := s.svc.Publish(ctx, e.broker, e.spec, bps.PublishOptions{Addr: e.addr, Sign: sign, Index: e.index})
	if err != nil {
		e.err = s.joinErr(e.broker, e.spec, err)
		s.dropPub(e)
		return
	}
	e.p = p
	s.metrics.PublisherStreams.Inc()
	if !s.goOwned(e.watch) {
		s.metrics.PublisherStreams.Dec()
		_ = p.Close()
		e.err = ErrServerClosed
		s.dropPub(e)
	}
}

func (s *Server) dropPub(e *pubStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.ending = true
	if s.pubs[e.key] == e {
		delete(s.pubs, e.key)
	}
}

func (s *Server) releasePub(e *pubStream) {
	s.mu.Lock()
	e.refs--
	last := e.refs == 0 && !e.ending
	if last {
		e.ending = true
		if s.pubs[e.key] == e {
			delete(s.pubs, e.key)
		}
	}
	s.mu.Unlock()
	if last {
		close(e.stop)
	}
}

// watch closes the stream when the last session leaves, or the sessions
// when the broker ends the stream.
func (e *pubStream) watch() {
	defer e.s.metrics.PublisherStreams.Dec()
	select {
	case <-e.p.Done():
		e.s.dropPub(e)
		code, reason := websocket.CloseGoingAway, "the broker ended the publisher stream"
		if err := e.p.Err(); err != nil {
			code, reason = websocket.CloseInternalServerErr, "publisher stream reset by the broker (claim not taken?): "+err.Error()
		}
		if e.s.ctx.Err() != nil {
			code, reason = websocket.CloseGoingAway, "node shutting down"
		}
		e.closeAll(code, reason)
	case <-e.stop:
		_ = e.p.Close()
	}
}

func (e *pubStream) add(ss *session) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ended {
		return false
	}
	e.sessions[ss] = struct{}{}
	return true
}

func (e *pubStream) remove(ss *session) {
	e.mu.Lock()
	delete(e.sessions, ss)
	e.mu.Unlock()
}

func (e *pubStream) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.sessions)
}

func (e *pubStream) closeAll(code int, reason string) {
	e.mu.Lock()
	e.ended = true
	all := make([]*session, 0, len(e.sessions))
	for ss := range e.sessions {
		all = append(all, ss)
	}
	clear(e.sessions)
	e.mu.Unlock()
	for _, ss := range all {
		ss.fail(code, reason)
	}
}

// joinStatus maps a failure to reach or join a broker to an HTTP status.
func joinStatus(err error) (int, string) {
	var be *backoffError
	switch {
	case errors.As(err, &be), errors.Is(err, bps.ErrFull):
		return 503, "broker unavailable: " + err.Error()
	case errors.Is(err, bps.ErrRejected):
		return 400, "the broker rejected the cohort spec"
	case errors.Is(err, ErrServerClosed), errors.Is(err, bps.ErrClosed):
		return 503, "node shutting down"
	case errors.Is(err, context.DeadlineExceeded):
		return 504, "broker did not answer in time"
	default:
		return 502, "cannot reach or join the broker: " + err.Error()
	}
}

// closeStatus maps a failure to open a publisher stream after the upgrade
// to a close code.
func closeStatus(err error) int {
	var be *backoffError
	switch {
	case errors.Is(err, errClaim):
		return websocket.ClosePolicyViolation
	case errors.As(err, &be), errors.Is(err, bps.ErrFull):
		return websocket.CloseTryAgainLater
	case errors.Is(err, bps.ErrRejected):
		return websocket.ClosePolicyViolation
	case errors.Is(err, ErrServerClosed), errors.Is(err, bps.ErrClosed):
		return websocket.CloseGoingAway
	default:
		return websocket.CloseInternalServerErr
	}
}
