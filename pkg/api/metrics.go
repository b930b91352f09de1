// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"strconv"

	m "github.com/ethersphere/bee/v2/pkg/metrics"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the bridge's; the shared streams' are the mux's
// (session.Mux.Metrics), under the same subsystem.
type metrics struct {
	// all fields exported: Metrics() collects them by reflection.
	Sessions       prometheus.Gauge
	SessionsOpen   *prometheus.GaugeVec   // by role
	SessionsClosed *prometheus.CounterVec // by close code
	// SessionsRefused counts page sessions refused after the upgrade, by
	// close code (closeRefusedBase + the HTTP status).
	SessionsRefused *prometheus.CounterVec
	Delivered       prometheus.Counter
	Published       prometheus.Counter
	InvalidFrames   prometheus.Counter
	SlowSessions    prometheus.Counter
	ClaimsFailed    prometheus.Counter
	ServiceRelayed  prometheus.Counter
	Persisted       prometheus.Counter
	PersistFailed   prometheus.Counter
}

func newMetrics() metrics {
	const subsystem = "bps_api"
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem, Name: name, Help: help})
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Namespace: m.Namespace, Subsystem: subsystem, Name: name, Help: help})
	}
	return metrics{
		Sessions:       gauge("sessions", "Open WebSocket sessions."),
		Delivered:      counter("delivered", "Frames queued to sessions."),
		Published:      counter("published", "Frames published by sessions."),
		InvalidFrames:  counter("invalid_frames", "Session frames refused before publishing."),
		SlowSessions:   counter("slow_sessions", "Sessions closed for a full queue."),
		ClaimsFailed:   counter("claims_failed", "Claims a dApp did not sign, or signed wrongly, in time."),
		ServiceRelayed: counter("service_relayed", "Service SOCs relayed for an admin's dApp."),
		Persisted:      counter("persisted", "Published updates uploaded with the session's postage batch (SWIP-65)."),
		PersistFailed:  counter("persist_failed", "Published updates whose upload failed; the session is closed."),
		SessionsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: m.Namespace, Subsystem: subsystem, Name: "sessions_open",
			Help: "Open WebSocket sessions by role: publisher (the session publishes) or subscriber."}, []string{"role"}),
		SessionsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem, Name: "sessions_closed",
			Help: "WebSocket sessions ended, by the close code the node ended them with (docs/api.md, Errors and close codes); other: any code not listed there."}, []string{"code"}),
		SessionsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: m.Namespace, Subsystem: subsystem, Name: "sessions_refused",
			Help: "Session requests from a page refused after the upgrade, by close code: 4000 + the HTTP status a program would get (docs/api.md)."}, []string{"code"}),
	}
}

// Session roles, the sessions_open label.
const (
	roleLabelPublisher  = "publisher"
	roleLabelSubscriber = "subscriber"
)

// closeCodes are the close codes a session ends with (docs/api.md, "Errors
// and close codes", and 1006 for a connection that dropped): the
// sessions_closed label's values, and "other".
var closeCodes = []int{
	websocket.CloseNormalClosure,           // 1000: the dApp closed; the admin ended the cohort
	websocket.CloseGoingAway,               // 1001: node shutting down, the broker ended the stream, no pong
	websocket.CloseUnsupportedData,         // 1003
	websocket.CloseAbnormalClosure,         // 1006: the connection dropped
	websocket.CloseInvalidFramePayloadData, // 1007
	websocket.ClosePolicyViolation,         // 1008: slow consumer, claim, roster
	websocket.CloseMessageTooBig,           // 1009
	websocket.CloseInternalServerErr,       // 1011: the stream to the broker lost, a publish or upload failed
	websocket.CloseTryAgainLater,           // 1013: the broker is full, back off
}

// closeCodeLabel is code's sessions_closed label: the code, if listed, else
// "other" — a bounded set.
func closeCodeLabel(code int) string {
	for _, c := range closeCodes {
		if c == code {
			return strconv.Itoa(code)
		}
	}
	return "other"
}

// sessionRole is a session's sessions_open label.
func sessionRole(p *plan) string {
	if p.publish {
		return roleLabelPublisher
	}
	return roleLabelSubscriber
}
