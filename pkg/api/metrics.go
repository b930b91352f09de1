// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	m "github.com/ethersphere/bee/v2/pkg/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the bridge's; the shared streams' are the mux's
// (session.Mux.Metrics), under the same subsystem.
type metrics struct {
	// all fields exported: Metrics() collects them by reflection.
	Sessions       prometheus.Gauge
	Delivered      prometheus.Counter
	Published      prometheus.Counter
	InvalidFrames  prometheus.Counter
	SlowSessions   prometheus.Counter
	ClaimsFailed   prometheus.Counter
	ServiceRelayed prometheus.Counter
	Persisted      prometheus.Counter
	PersistFailed  prometheus.Counter
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
	}
}
