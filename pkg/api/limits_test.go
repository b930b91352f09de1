// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/session/mock"
	"github.com/gorilla/websocket"
)

// refusal dials a session that must be refused, and returns the status and
// the message of bee's error body.
func refusal(t *testing.T, n *tnode, topic string, q url.Values, h http.Header) (int, string) {
	t.Helper()
	code, msg, _ := refuse(t, n, topic, q, h)
	return code, msg
}

// refuse is refusal, with the response's headers.
func refuse(t *testing.T, n *tnode, topic string, q url.Values, h http.Header) (int, string, http.Header) {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(wsURL(n, topic, q), h)
	if err == nil {
		_ = ws.Close()
		t.Fatalf("session on %s upgraded, want a refusal", topic)
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", topic, err)
	}
	defer resp.Body.Close()
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Reasons []struct {
			Field string `json:"field"`
			Error string `json:"error"`
		} `json:"reasons"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	msg := body.Message
	for _, r := range body.Reasons {
		msg += "; " + r.Field + ": " + r.Error
	}
	return resp.StatusCode, msg, resp.Header
}

// from is the header that makes the request come from client behind a
// proxy on the node's host (Options.ClientHeader).
func from(client string) http.Header {
	return http.Header{"X-Forwarded-For": {"203.0.113.99, " + client}}
}

// TestClientSessionLimit: a client past MaxSessionsPerClient is answered
// 429 naming the limit, and another client still gets a session.
func TestClientSessionLimit(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{MaxSessionsPerClient: 2, ClientHeader: "X-Forwarded-For"})
	a := c.clients[0]
	q := url.Values{"peer": {c.broker.addr}}
	dial(t, a, "client-sessions", q, from("192.0.2.1"))
	dial(t, a, "client-sessions", q, from("192.0.2.1"))
	code, msg := refusal(t, a, "client-sessions", q, from("192.0.2.1"))
	if code != http.StatusTooManyRequests || !strings.Contains(msg, "client session limit") || !strings.Contains(msg, "at most 2 per client") {
		t.Fatalf("third session: %d %q, want 429 naming the client session limit", code, msg)
	}
	dial(t, a, "client-sessions", q, from("192.0.2.2"))
}

// TestClientCohortLimit: a client with sessions in MaxCohortsPerClient
// cohorts at a broker may open more sessions in those, but none in another
// cohort there (429 naming the limit); another client may.
func TestClientCohortLimit(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{MaxCohortsPerClient: 2, ClientHeader: "X-Forwarded-For"})
	a := c.clients[0]
	q := url.Values{"peer": {c.broker.addr}}
	hostile := from("192.0.2.1")
	dial(t, a, "junk-1", q, hostile)
	dial(t, a, "junk-2", q, hostile)
	dial(t, a, "junk-2", q, hostile) // a cohort it holds already
	code, msg := refusal(t, a, "junk-3", q, hostile)
	if code != http.StatusTooManyRequests || !strings.Contains(msg, "client cohort limit") || !strings.Contains(msg, "at most 2 per client") {
		t.Fatalf("a third cohort: %d %q, want 429 naming the client cohort limit", code, msg)
	}
	dial(t, a, "junk-3", q, from("192.0.2.2"))
	if n := len(c.broker.svc.Cohorts()); n != 3 {
		t.Fatalf("the broker holds %d cohorts, want 3", n)
	}
}

// TestNodeSessionLimit: past MaxSessions every client is answered 503
// naming the node's limit.
func TestNodeSessionLimit(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{MaxSessions: 1, ClientHeader: "X-Forwarded-For"})
	a := c.clients[0]
	q := url.Values{"peer": {c.broker.addr}}
	dial(t, a, "node-sessions", q, from("192.0.2.1"))
	code, msg := refusal(t, a, "node-sessions", q, from("192.0.2.2"))
	if code != http.StatusServiceUnavailable || !strings.Contains(msg, "node session limit") {
		t.Fatalf("second session: %d %q, want 503 naming the node session limit", code, msg)
	}
}

// TestClientOf: a client is the connection's remote address, an IPv6
// address by its /64; the proxy header counts only from loopback.
func TestClientOf(t *testing.T) {
	t.Parallel()
	proxied := api.Options{ClientHeader: "X-Real-IP"}
	for _, tc := range []struct {
		name   string
		o      api.Options
		remote string
		h      http.Header
		want   string
	}{
		{"ipv4", api.Options{}, "192.0.2.7:4711", nil, "192.0.2.7"},
		{"ipv6 by its /64", api.Options{}, "[2001:db8:1:2:3:4:5:6]:4711", nil, "2001:db8:1:2::/64"},
		{"header ignored without the option", api.Options{}, "127.0.0.1:1", http.Header{"X-Real-Ip": {"192.0.2.8"}}, "127.0.0.1"},
		{"header from loopback", proxied, "127.0.0.1:1", http.Header{"X-Real-Ip": {"192.0.2.8"}}, "192.0.2.8"},
		{"header from another host", proxied, "192.0.2.9:1", http.Header{"X-Real-Ip": {"192.0.2.8"}}, "192.0.2.9"},
		{"loopback without the header", proxied, "[::1]:1", nil, "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := api.ClientOf(tc.o, tc.remote, tc.h); got != tc.want {
				t.Fatalf("client %q, want %q", got, tc.want)
			}
		})
	}
}

// TestKeepAliveBound: swarm-keep-alive past MaxKeepAlive is a 400 naming
// the bound; at the bound it is taken.
func TestKeepAliveBound(t *testing.T) {
	t.Parallel()
	c := newMockCluster(t, api.Options{MaxKeepAlive: time.Minute}, mock.New())
	a := c.clients[0]
	q := url.Values{"peer": {c.broker.addr}}
	code, msg := refusal(t, a, "keep-alive-bound", q, http.Header{"Swarm-Keep-Alive": {"61"}})
	if code != http.StatusBadRequest || !strings.Contains(msg, "swarm-keep-alive: want at most 60 seconds") {
		t.Fatalf("keep-alive 61: %d %q, want 400 naming the bound", code, msg)
	}
	dial(t, a, "keep-alive-bound", q, http.Header{"Swarm-Keep-Alive": {"60"}})

	d := newMockCluster(t, api.Options{}, mock.New())
	code, msg = refusal(t, d.clients[0], "keep-alive-bound", url.Values{"peer": {d.broker.addr}}, http.Header{"Swarm-Keep-Alive": {"86400"}})
	if code != http.StatusBadRequest || !strings.Contains(msg, "at most 300 seconds") {
		t.Fatalf("keep-alive 86400 by default: %d %q, want 400", code, msg)
	}
}

// TestHexLookingTopics: a 0x-prefixed path, or 40 or more hex digits,
// is a topic address and must be 64 hex characters: otherwise a 400 on
// both routes, never hashed as a name. Shorter hex digits are a name.
func TestHexLookingTopics(t *testing.T) {
	t.Parallel()
	// One client holds a session on each of the 11 topics accepted below.
	c := newMockCluster(t, api.Options{MaxCohortsPerClient: 16}, mock.New())
	a := c.clients[0]
	q := url.Values{"peer": {c.broker.addr}}
	for name, tc := range map[string]struct{ topic, why string }{
		"0x and 64 non-hex": {"0x" + strings.Repeat("zz", 32), "0x-prefixed: a topic address is 64 hex characters, got U+007A 'z'"},
		"0x, 0x and 62 hex": {"0x0x" + strings.Repeat("a", 62), "0x-prefixed: a topic address is 64 hex characters, got U+0078 'x'"},
		"0x and 63 hex":     {"0x" + strings.Repeat("a", 63), "0x-prefixed: a topic address is 64 hex characters, got 63"},
		"0x and 65 hex":     {"0x" + strings.Repeat("a", 65), "0x-prefixed: a topic address is 64 hex characters, got 65"},
		"0x alone":          {"0x", "0x-prefixed: a topic address is 64 hex characters, got 0"},
		"0x and a name":     {"0xcafe", "0x-prefixed: a topic address is 64 hex characters, got 4"},
		"63 hex":            {strings.Repeat("a", 63), "looks like a hex address but is 63 characters; a topic address is 64 hex characters"},
		"65 hex":            {strings.Repeat("a", 65), "looks like a hex address but is 65 characters"},
		"40 hex":            {strings.Repeat("ab", 20), "looks like a hex address but is 40 characters"},
	} {
		t.Run(name, func(t *testing.T) {
			code, msg := refusal(t, a, tc.topic, q, nil)
			if code != http.StatusBadRequest || !strings.Contains(msg, "topic: "+tc.why) {
				t.Fatalf("GET %s: %d %q, want 400 saying %q", tc.topic, code, msg, tc.why)
			}
			sq := url.Values{"peer": {c.broker.addr}, "binding": {"feed"}, "admin": {strings.Repeat("ab", 20)}}
			code, body := postService(t, a, tc.topic, sq, []byte("x"))
			reasons, _ := body["reasons"].([]any)
			var reason map[string]any
			if len(reasons) == 1 {
				reason, _ = reasons[0].(map[string]any)
			}
			if why, _ := reason["error"].(string); code != http.StatusBadRequest || reason["field"] != "topic" || !strings.HasPrefix(why, tc.why) {
				t.Fatalf("POST %s/service: %d %v, want 400 saying %q", tc.topic, code, body, tc.why)
			}
		})
	}

	// Topic addresses, with or without 0x, either case.
	for _, topic := range []string{"0x" + strings.Repeat("aB", 32), strings.Repeat("Cd", 32), "0X" + strings.Repeat("01", 32)} {
		want, _ := hex.DecodeString(strings.TrimPrefix(strings.TrimPrefix(topic, "0x"), "0X"))
		dial(t, a, topic, q, nil)
		topicEntry(t, a, want, "subscriber")
	}
	// Names, hashed: hex digits shorter than an Ethereum address included.
	for _, name := range []string{"demo", "cafe", "beef", "add", "0", "2024", strings.Repeat("a", 39), "x" + strings.Repeat("a", 64)} {
		dial(t, a, name, q, nil)
		topicEntry(t, a, keccak([]byte(name)), "subscriber")
	}
}
