// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/api"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// series reads the Server's metric name with the label label=value (""
// for a metric without labels): its value, and whether it exists.
func series(t *testing.T, srv *api.Server, name, label, value string) (float64, bool) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	for _, c := range srv.Metrics() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == label && l.GetValue() == value
			}
			if !match {
				continue
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue(), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

// eventually waits, at most waitTimeout, until the series reads want: a
// session is unregistered after its close frame is on the wire.
func eventually(t *testing.T, srv *api.Server, name, label, value string, want float64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		got, _ := series(t, srv, name, label, value)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s{%s=%q} = %v, want %v", name, label, value, got, want)
		}
		<-tick.C
	}
}

// The WebSocket sessions' series: open sessions by role, and closed ones
// by the close code the node ended them with — the dApp's own close
// (1000), a text frame to a GSOC session (1003) — from a bounded set.
func TestSessionMetrics(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{})
	a := c.clients[0]
	g := newGSOC(t, "session-metrics")
	peer := c.broker.addr
	const (
		open   = "bee_bps_api_sessions_open"
		closed = "bee_bps_api_sessions_closed"
	)

	sub := dial(t, a, g.topic(), url.Values{"peer": {peer}}, nil)
	_ = dial(t, a, g.topic(), url.Values{"peer": {peer}}, nil)
	pub := dial(t, a, g.topic(), g.publishQuery(peer), nil)
	eventually(t, a.api, open, "role", "subscriber", 2)
	eventually(t, a.api, open, "role", "publisher", 1)
	if v, _ := series(t, a.api, "bee_bps_api_sessions", "", ""); v != 3 {
		t.Fatalf("bee_bps_api_sessions = %v, want 3", v)
	}

	// The dApp closes: 1000.
	if err := sub.ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye")); err != nil {
		t.Fatal(err)
	}
	if ce := sub.closed(); ce.Code != websocket.CloseNormalClosure {
		t.Fatalf("closed with %d", ce.Code)
	}
	eventually(t, a.api, closed, "code", "1000", 1)
	eventually(t, a.api, open, "role", "subscriber", 1)

	// A text frame to a GSOC session: 1003.
	pub.send(websocket.TextMessage, []byte(`{"type":"hello"}`))
	if ce := pub.closed(); ce.Code != websocket.CloseUnsupportedData {
		t.Fatalf("closed with %d", ce.Code)
	}
	eventually(t, a.api, closed, "code", "1003", 1)
	eventually(t, a.api, open, "role", "publisher", 0)
	if v, ok := series(t, a.api, closed, "code", "1000"); !ok || v != 1 {
		t.Fatalf("closed{code=1000} = %v (%v) after another close", v, ok)
	}
}
