// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/gorilla/websocket"
)

// joinFailed answers a failure to reach or join the broker.
func (s *Server) joinFailed(w http.ResponseWriter, logger log.Logger, err error) {
	code, msg := joinStatus(err)
	logger.Debug("join failed", "error", err)
	if code == http.StatusServiceUnavailable {
		retry := s.opts.JoinTimeout
		var be *session.BackoffError
		var cbe *p2p.ConnectionBackoffError
		switch {
		case errors.Is(err, p2p.ErrPeerNotFound) && !errors.As(err, new(*connectError)):
			retry = notConnectedRetry
		case errors.As(err, &be) && !be.Until.IsZero():
			retry = time.Until(be.Until)
		case errors.As(err, &cbe):
			retry = time.Until(cbe.TryAfter())
		}
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(retry, time.Second).Seconds()))))
	}
	jsonhttp.Respond(w, code, msg)
}

// notConnectedRetry is the Retry-After of a broker overlay the node is not
// connected to and has no address for: a node that has just started
// connects to its peers within seconds.
const notConnectedRetry = 5 * time.Second

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

// joinStatus maps a failure to reach or join a broker to an HTTP status
// and a reason that says which: the broker's answer (FULL, REJECTED), the
// node's backoff with the failure that imposed it, or why the connection or
// the stream could not be had — bee refusing to dial (a light node, a
// blocklisted peer, its own dial backoff), the broker dropping the
// connection (its topology full, or this node blocklisted there), a peer
// that does not speak BPS.
func joinStatus(err error) (int, string) {
	var (
		be  *session.BackoffError
		cbe *p2p.ConnectionBackoffError
		ise *p2p.IncompatibleStreamError
		ce  *connectError
	)
	switch {
	case errors.As(err, &be):
		msg := "broker unavailable: this node backs off from joining this cohort at the broker until " + be.Until.UTC().Format(time.RFC3339)
		if be.Cause != nil {
			_, why := joinStatus(be.Cause)
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
	case errors.Is(err, errStaleUnderlay):
		return http.StatusBadGateway, "cannot reach the broker: " + err.Error()
	case errors.Is(err, p2p.ErrPeerBlocklisted):
		return http.StatusServiceUnavailable, "this node blocklists the broker for now (it misbehaved, or failed the transport check): " + err.Error()
	case errors.As(err, &cbe):
		return http.StatusServiceUnavailable, "this node backs off from dialling the broker after failed dials: " + err.Error()
	case errors.As(err, &ise):
		return http.StatusBadGateway, "the peer does not speak BPS: not a broker: " + err.Error()
	case errors.Is(err, p2p.ErrPeerNotFound) && errors.As(err, &ce):
		return http.StatusServiceUnavailable, "the broker dropped the connection — its topology takes no more peers like this node, or it blocklists this node: " + err.Error()
	case errors.Is(err, p2p.ErrPeerNotFound):
		// Not (yet) connected, and no address for it in the addressbook: a
		// node that has just started connects to its peers in a while, so
		// this may pass.
		return http.StatusServiceUnavailable, "this node is not connected to the broker (yet), and its addressbook holds no address for it: try again, or give its multiaddr as peer, and the node dials it"
	default:
		return http.StatusBadGateway, "cannot reach or join the broker: " + err.Error()
	}
}

// closeStatus maps a failure to open a publisher stream after the upgrade
// to a close code.
func closeStatus(err error) int {
	var be *session.BackoffError
	switch {
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

// endStatus is the close code and reason of a session whose shared stream
// ended with err (session.Session.End).
func endStatus(err error) (int, string) {
	var (
		na *session.NotAdmittedError
		se *session.StreamEndError
	)
	switch {
	case errors.Is(err, session.ErrMuxClosed):
		return websocket.CloseGoingAway, "node shutting down"
	case errors.Is(err, bps.ErrEndOfStream):
		return websocket.CloseNormalClosure, eosReason
	case errors.Is(err, session.ErrRecoveryBacklog):
		return websocket.ClosePolicyViolation, err.Error()
	case errors.As(err, &na):
		return websocket.ClosePolicyViolation, err.Error()
	case errors.As(err, &se) && se.Err == nil:
		return websocket.CloseGoingAway, err.Error()
	default:
		return websocket.CloseInternalServerErr, err.Error()
	}
}

// eosReason closes the sessions of a cohort whose admin published
// END_OF_STREAM: an attributable end, not the broker's.
const eosReason = "end of stream: the admin ended the cohort"

// slowReason closes a session whose queue is full.
func slowReason(queue int) string {
	return fmt.Sprintf("slow consumer: %d frames queued, not read", queue)
}
