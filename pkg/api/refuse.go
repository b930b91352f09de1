// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/gorilla/websocket"
)

// A page cannot read the status of a refused WebSocket upgrade: a browser
// reports every refusal as the same 1006 close. So a session request from
// a page — an upgrade with an Origin, which every browser sends and the
// guard has allowed — that the node refuses before the upgrade is upgraded
// after all and closed at once with closeRefusedBase + the HTTP status it
// would have had (4400 for a 400, 4503 for a 503, …) and the reason, after
// an error frame carrying the whole answer. A program (no Origin) gets the
// HTTP status as before.
const closeRefusedBase = 4000

// refusalRecorder holds the answer the handler would have written, for
// closeRefused to turn into a close.
type refusalRecorder struct {
	header http.Header
	status int
	body   []byte
}

func newRefusalRecorder() *refusalRecorder { return &refusalRecorder{header: http.Header{}} }

func (r *refusalRecorder) Header() http.Header { return r.header }

func (r *refusalRecorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *refusalRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	if len(r.body)+len(b) > maxRefusalBody {
		return 0, errors.New("api: refusal body too large")
	}
	r.body = append(r.body, b...)
	return len(b), nil
}

// maxRefusalBody bounds what a refusal's body may hold.
const maxRefusalBody = 64 << 10

// refusalFrame is the error frame of a refused page session: the reason in
// full (as every error frame), and the HTTP answer a program would have
// read — status, bee's message and reasons, Retry-After in seconds.
type refusalFrame struct {
	Type       string            `json:"type"`
	Reason     string            `json:"reason"`
	Status     int               `json:"status"`
	Message    string            `json:"message"`
	Reasons    []jsonhttp.Reason `json:"reasons,omitempty"`
	RetryAfter int               `json:"retryAfter,omitempty"`
}

// fromPage reports whether r is a session request from a page: an upgrade
// carrying an Origin.
func fromPage(r *http.Request) bool {
	return r.Header.Get("Origin") != "" && websocket.IsWebSocketUpgrade(r)
}

// refusedLabel is the sessions_refused label of status: its close code, or
// "other" outside 400–599 — a bounded set.
func refusedLabel(status int) string {
	if status < 400 || status > 599 {
		return "other"
	}
	return strconv.Itoa(closeRefusedBase + status)
}

// closeRefused upgrades a page's refused session request and closes it with
// the refusal rec recorded: an error frame (not to the GSOC client, which
// speaks no text frames) and a close frame with code closeRefusedBase +
// status. It waits at most closeGrace for the page's close frame.
func (s *Server) closeRefused(w http.ResponseWriter, r *http.Request, logger log.Logger, rec *refusalRecorder, gsoc bool) {
	f := refusalFrame{Type: typeError, Status: rec.status}
	var body jsonhttp.StatusResponse
	if err := json.Unmarshal(rec.body, &body); err == nil {
		f.Message, f.Reasons = body.Message, body.Reasons
	}
	if f.Message == "" {
		f.Message = http.StatusText(rec.status)
	}
	if ra, err := strconv.Atoi(rec.header.Get("Retry-After")); err == nil && ra > 0 {
		f.RetryAfter = ra
	}
	f.Reason = f.Message
	for i, rs := range f.Reasons {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		f.Reason += sep + rs.Field + ": " + rs.Error
	}

	if rec.status < 400 || rec.status > 999 {
		rec.status = http.StatusInternalServerError
	}
	ws, err := s.upgrader.Upgrade(w, r, nil)
	if err != nil { // the upgrader has answered
		logger.Debug("upgrade of a refused page session failed", "error", err)
		return
	}
	defer ws.Close()
	s.metrics.SessionsRefused.WithLabelValues(refusedLabel(rec.status)).Inc()
	deadline := time.Now().Add(s.opts.WriteTimeout)
	_ = ws.SetWriteDeadline(deadline)
	if !gsoc {
		b, _ := json.Marshal(f) // cannot fail: strings and numbers
		if err := ws.WriteMessage(websocket.TextMessage, b); err != nil {
			return
		}
	}
	msg := websocket.FormatCloseMessage(closeRefusedBase+rec.status, cutReason(f.Reason))
	if err := ws.WriteControl(websocket.CloseMessage, msg, deadline); err != nil {
		return
	}
	// The closing handshake: the page answers with its close frame.
	_ = ws.SetReadDeadline(time.Now().Add(closeGrace))
	for {
		if _, _, err := ws.NextReader(); err != nil {
			return
		}
	}
}

// cutReason cuts a close reason to the maxReason bytes a close frame
// holds, on a character boundary.
func cutReason(reason string) string {
	if len(reason) <= maxReason {
		return reason
	}
	reason = reason[:maxReason]
	for !utf8.ValidString(reason) {
		reason = reason[:len(reason)-1]
	}
	return strings.TrimSpace(reason)
}
