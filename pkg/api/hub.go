// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/gorilla/websocket"
)

// backoffError: the node may not join this cohort at that broker before
// until (the mandatory backoff after FULL, REJECTED or a reset); cause is why
// the attempt that imposed it failed — the broker's answer, a reset, a
// connection that failed — if known.
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

// backingOff reports the backoff the node is in for sp at broker, if any,
// with the reason the last attempt failed.
func (s *Server) backingOff(broker swarm.Address, sp *bps.Spec) *backoffError {
	until, reason := s.svc.Backoff(broker, sp)
	if time.Until(until) <= 0 {
		return nil
	}
	return &backoffError{until: until, cause: reason}
}

// hub is the one subscriber stream that every session on this node
// watching a cohort at a broker shares. Its goroutine reads the
// subscription and hands each delivery to the cohort's room, which fans it
// out. Its session set is the sessions that depend on the stream: they are
// closed when it ends.
//
// refs and ending are guarded by Server.mu; sessions and ended by hub.mu.
type hub struct {
	s      *Server
	key    string
	broker swarm.Address
	spec   *bps.Spec
	room   *room
	ready  chan struct{} // closed once the subscription is open or failed
	err    error         // why it failed; read after ready
	sub    *bps.Subscription
	stop   chan struct{} // closed when the last session left

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
func (s *Server) acquireHub(ctx context.Context, r *room) (*hub, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrServerClosed
	}
	h := s.hubs[r.key]
	creator := h == nil
	if creator {
		h = &hub{s: s, key: r.key, broker: r.broker, spec: r.spec, room: r, ready: make(chan struct{}),
			stop: make(chan struct{}), sessions: make(map[*session]struct{})}
		s.hubs[r.key] = h
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
	if be := s.backingOff(h.broker, h.spec); be != nil {
		h.err = be
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

// run hands deliveries to the room until the last session leaves or the
// subscription ends; in the latter case it closes the sessions left with the
// reason.
func (h *hub) run() {
	defer h.s.metrics.Hubs.Dec()
	for {
		select {
		case d, ok := <-h.sub.C():
			if !ok {
				h.s.dropHub(h)
				code, reason := streamEnd(h.s, h.sub.Err(), "the broker ended the subscription", "subscription lost: ")
				h.closeAll(code, reason)
				return
			}
			if d.Service == nil {
				h.delivered.Add(1)
			}
			h.room.deliver(d)
		case <-h.stop:
			_ = h.sub.Close()
			return
		}
	}
}

// streamEnd is the close code and reason for the sessions of a stream that
// ended with err (nil: cleanly).
func streamEnd(s *Server, err error, clean, lost string) (int, string) {
	switch {
	case s.ctx.Err() != nil:
		return websocket.CloseGoingAway, "node shutting down"
	case errors.Is(err, bps.ErrEndOfStream):
		return websocket.CloseNormalClosure, eosReason
	case err != nil:
		return websocket.CloseInternalServerErr, lost + err.Error()
	default:
		return websocket.CloseGoingAway, clean
	}
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
// address in a cohort at a broker shares. Where publishing takes a claim,
// a dApp of one of its sessions signs it (the node holds no keys); every
// frame any of them sends is still verified against the address before it
// is published, so sharing grants nothing a dApp could not do with the
// address's signatures alone. Unless its sessions receive on the node's
// subscriber stream (a GSOC publisher), it receives: what the broker sends
// it — the messages of every other identity — goes to the cohort's room.
//
// taken is whether the broker made it a publisher stream, as far as the node
// can tell: at once for the admin, under ALL and implicit authorship, and in
// an open cohort (the node claims for another address only once a roster
// it verified names it); in a closed cohort, not before the stream's first
// delivery — a stream whose claim was not taken is silent there, and the
// broker delivers the latest service SOC when it takes the claim.
//
// refs and ending are guarded by Server.mu; sessions, opener and ended by
// pubStream.mu.
type pubStream struct {
	s       *Server
	key     string
	broker  swarm.Address
	spec    *bps.Spec
	room    *room
	addr    []byte
	index   uint64
	claims  bool
	receive bool
	ready   chan struct{}
	joined  chan struct{} // closed once the broker took the Join (then the claim)
	err     error
	p       *bps.Publisher
	stop    chan struct{}
	wake    chan struct{} // the room's roster changed, or the silent wait passed
	taken   atomic.Bool
	expired atomic.Bool // a closed cohort: the silent wait passed untaken
	silent  *time.Timer // a closed cohort: the silent wait, until taken
	claimed uint64      // run goroutine: the service index the last reclaim answered

	refs   int
	ending bool

	mu       sync.Mutex
	sessions map[*session]struct{}
	opener   *session // signs the first claim
	ended    bool

	sent atomic.Uint64
}

// acquirePub returns the publisher stream of (broker, cohort, p.addr),
// opening it if there is none — a dApp of its sessions signs the claim,
// opener's first; the caller releases it with releasePub.
func (s *Server) acquirePub(ctx context.Context, r *room, p *plan, opener *session) (*pubStream, error) {
	e, creator, err := s.refPub(r, p, opener)
	if err != nil {
		return nil, err
	}
	if creator {
		s.openPub(ctx, e)
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

// startPub is acquirePub for a session not upgraded yet, whose dApp signs
// the claim only once it is: it returns as soon as the broker has taken the
// Join, while the claim may still be pending, so that the broker's refusal
// is an HTTP status. The stream is opened on a goroutine the Server owns;
// the caller waits for ready before using it, and releases it.
func (s *Server) startPub(ctx context.Context, r *room, p *plan, opener *session) (*pubStream, error) {
	e, creator, err := s.refPub(r, p, opener)
	if err != nil {
		return nil, err
	}
	if creator {
		octx, cancel := context.WithTimeout(s.ctx, s.opts.JoinTimeout+2*s.opts.ClaimTimeout)
		if !s.goOwned(func() { defer cancel(); s.openPub(octx, e) }) {
			cancel()
			e.err = ErrServerClosed
			s.dropPub(e)
			close(e.ready)
		}
	}
	select {
	case <-e.joined:
		return e, nil
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

// refPub takes a reference to the publisher stream of (broker, cohort,
// p.addr), making one if there is none (creator: the caller opens it).
func (s *Server) refPub(r *room, p *plan, opener *session) (e *pubStream, creator bool, _ error) {
	key := r.key + string(p.addr)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false, ErrServerClosed
	}
	e = s.pubs[key]
	creator = e == nil
	if creator {
		e = &pubStream{s: s, key: key, broker: r.broker, spec: r.spec, room: r, addr: p.addr, index: p.index,
			claims: p.claims(), receive: !p.echoes(), opener: opener,
			ready: make(chan struct{}), joined: make(chan struct{}), stop: make(chan struct{}), wake: make(chan struct{}, 1),
			sessions: make(map[*session]struct{})}
		s.pubs[key] = e
	}
	e.refs++
	s.mu.Unlock()
	return e, creator, nil
}

func (s *Server) openPub(ctx context.Context, e *pubStream) {
	defer close(e.ready)
	if be := s.backingOff(e.broker, e.spec); be != nil {
		e.err = be
		s.dropPub(e)
		return
	}
	var sign bps.ClaimSigner
	if e.claims {
		sign = e.sign
	}
	joined := func() { close(e.joined) }
	p, err := s.svc.Publish(ctx, e.broker, e.spec, bps.PublishOptions{Addr: e.addr, Sign: sign, Index: e.index, Receive: e.receive, Joined: joined})
	if err != nil {
		e.err = s.joinErr(e.broker, e.spec, err)
		s.dropPub(e)
		return
	}
	e.p = p
	if e.spec.Closed && !bytes.Equal(e.addr, e.spec.Admin) {
		e.silent = time.AfterFunc(s.opts.SilentWait, func() {
			e.expired.Store(true)
			e.poke()
		})
	} else {
		e.taken.Store(true)
	}
	e.claimed = e.room.service().next // the roster the first claim was made under
	e.room.addPub(e)
	s.metrics.PublisherStreams.Inc()
	if !s.goOwned(e.run) {
		s.metrics.PublisherStreams.Dec()
		e.room.removePub(e)
		e.stopSilent()
		_ = p.Close()
		e.err = ErrServerClosed
		s.dropPub(e)
	}
}

// sign is the stream's claim signer: the dApp of one of its sessions signs,
// the opener's while it lives (bps.Publisher.Reclaim signs again later).
func (e *pubStream) sign(ctx context.Context, challenge []byte, broker swarm.Address, index uint64) ([]byte, error) {
	ss := e.signer()
	if ss == nil {
		return nil, fmt.Errorf("%w: no session left to sign it", errClaim)
	}
	return ss.claimSigner()(ctx, challenge, broker, index)
}

func (e *pubStream) signer() *session {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.opener != nil && !e.opener.closed() {
		return e.opener
	}
	for ss := range e.sessions {
		if !ss.closed() {
			return ss
		}
	}
	return nil
}

func (s *Server) dropPub(e *pubStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e.ending = true
	if s.pubs[e.key] == e {
		delete(s.pubs, e.key)
	}
}

// holdPub takes a reference to the open publisher stream of key, if there
// is one; the caller releases it with releasePub.
func (s *Server) holdPub(key string) *pubStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.pubs[key]
	if e == nil || e.ending || !isClosed(e.ready) || e.err != nil {
		return nil
	}
	e.refs++
	return e
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

// poke wakes the stream's goroutine; it never blocks.
func (e *pubStream) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *pubStream) stopSilent() {
	if e.silent != nil {
		e.silent.Stop()
	}
}

// run hands what the broker sends to the room, until the last session
// leaves or the broker ends the stream (then it closes the sessions left
// with the reason). In a closed cohort it also sees the stream admitted (its
// first delivery), claims again when the node learns of a roster naming
// the address while the stream is silent, and closes a stream still silent
// after SilentWait — before the broker's claim deadline, which the broker
// enforces as a violation, blocklisting the whole node.
func (e *pubStream) run() {
	defer e.s.metrics.PublisherStreams.Dec()
	defer e.room.removePub(e)
	defer e.stopSilent()
	for {
		select {
		case d, ok := <-e.p.C():
			if !ok {
				e.s.dropPub(e)
				code, reason := streamEnd(e.s, e.p.Err(), "the broker ended the publisher stream", "publisher stream reset by the broker: ")
				e.closeAll(code, reason)
				return
			}
			e.room.deliver(d)
			if !e.taken.Load() {
				e.taken.Store(true)
				e.stopSilent()
				e.pokeSessions()
			}
		case <-e.wake:
			if e.taken.Load() {
				continue
			}
			if e.expired.Load() {
				e.end(websocket.ClosePolicyViolation, fmt.Sprintf("closed cohort: the broker did not admit %x within %s (not in its roster); the node closed the stream before the broker's claim deadline", e.addr, e.s.opts.SilentWait))
				return
			}
			if err := e.reclaim(); err != nil {
				e.end(closeStatus(err), "claim again: "+err.Error())
				return
			}
		case <-e.stop:
			_ = e.p.Close()
			return
		}
	}
}

// end closes the stream and its sessions.
func (e *pubStream) end(code int, reason string) {
	e.s.dropPub(e)
	e.closeAll(code, reason)
	_ = e.p.Close()
}

// reclaim claims again on a silent stream once the node holds a roster
// naming the address it did not hold before (SWIP-60: a roster naming it is
// the cue to claim again). A silent stream is certainly not a publisher
// stream, so the claim cannot land on one.
func (e *pubStream) reclaim() error {
	st := e.room.service()
	if !e.room.rostered(e.addr) || st.next <= e.claimed {
		return nil
	}
	e.claimed = st.next
	ctx, cancel := context.WithTimeout(e.s.ctx, e.s.opts.JoinTimeout+e.s.opts.ClaimTimeout)
	defer cancel()
	if err := e.p.Reclaim(ctx); err != nil {
		if errors.Is(err, errClaim) {
			e.s.metrics.ClaimsFailed.Inc()
		}
		return err
	}
	e.s.metrics.Reclaims.Inc()
	return nil
}

func (e *pubStream) pokeSessions() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ss := range e.sessions {
		ss.poke()
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
	if e.opener == ss {
		e.opener = nil
	}
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

// joinStatus maps a failure to reach or join a broker to an HTTP status
// and a reason that says which: the broker's answer (FULL, REJECTED), the
// node's backoff with the failure that imposed it, or why the connection or
// the stream could not be had — bee refusing to dial (a light node, a
// blocklisted peer, its own dial backoff), the broker dropping the
// connection (its topology full, or this node blocklisted there), a peer
// that does not speak BPS.
func joinStatus(err error) (int, string) {
	var (
		be  *backoffError
		cbe *p2p.ConnectionBackoffError
		ise *p2p.IncompatibleStreamError
		ce  *connectError
	)
	switch {
	case errors.As(err, &be):
		msg := "broker unavailable: this node backs off from joining this cohort at the broker until " + be.until.UTC().Format(time.RFC3339)
		if be.cause != nil {
			_, why := joinStatus(be.cause)
			msg += "; the last attempt: " + why
		}
		return http.StatusServiceUnavailable, msg
	case errors.Is(err, bps.ErrFull):
		return http.StatusServiceUnavailable, "the broker is full: it takes no more streams in this cohort, or no more cohorts from this node: " + err.Error()
	case errors.Is(err, bps.ErrRejected):
		return http.StatusBadRequest, "the broker rejected the cohort spec"
	case errors.Is(err, ErrServerClosed), errors.Is(err, bps.ErrClosed):
		return http.StatusServiceUnavailable, "node shutting down"
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, "broker did not answer in time"
	case errors.Is(err, p2p.ErrDialLightNode):
		return http.StatusBadRequest, "peer is a light node: a broker is a full node"
	case errors.Is(err, p2p.ErrUnsupportedAddresses):
		return http.StatusBadRequest, "peer: this node cannot dial that multiaddr (no supported address)"
	case errors.Is(err, errUnknownOverlay):
		return http.StatusBadRequest, err.Error()
	case errors.Is(err, p2p.ErrPeerBlocklisted):
		return http.StatusServiceUnavailable, "this node blocklists the broker for now (it misbehaved, or failed the transport check): " + err.Error()
	case errors.As(err, &cbe):
		return http.StatusServiceUnavailable, "this node backs off from dialling the broker after failed dials: " + err.Error()
	case errors.As(err, &ise):
		return http.StatusBadGateway, "the peer does not speak BPS: not a broker: " + err.Error()
	case errors.Is(err, p2p.ErrPeerNotFound) && errors.As(err, &ce):
		return http.StatusServiceUnavailable, "the broker dropped the connection — its topology takes no more peers like this node, or it blocklists this node: " + err.Error()
	case errors.Is(err, p2p.ErrPeerNotFound):
		return http.StatusNotFound, "this node is not connected to the broker: give its multiaddr as peer, and the node dials it"
	default:
		return http.StatusBadGateway, "cannot reach or join the broker: " + err.Error()
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
