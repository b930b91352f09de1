// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/session/mock"
	"github.com/gorilla/websocket"
)

// request sends method to path on n with headers h (Host, if given, as the
// request's Host) and returns the response with its body read.
func request(t *testing.T, n *tnode, method, path string, h map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, n.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// TestCORSEveryRoute: every /pubsub route answers an allowed origin's
// preflight and its requests with CORS headers, refusals included (so that
// a page reads the reason), and refuses another origin with 403 and no
// CORS headers.
func TestCORSEveryRoute(t *testing.T) {
	const page = "http://127.0.0.1:8090"
	c := newMockCluster(t, api.Options{CORSAllowedOrigins: []string{"https://app.example", "http://127.0.0.1:*"}}, mock.New())
	n := c.clients[0]
	topic := strings.Repeat("ab", 32)
	for _, path := range []string{"/pubsub", "/pubsub/", "/pubsub/" + topic, "/pubsub/" + topic + "/service"} {
		t.Run(path, func(t *testing.T) {
			resp, _ := request(t, n, http.MethodOptions, path, map[string]string{
				"Origin": page, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type, swarm-postage-batch-id"})
			if resp.StatusCode != http.StatusNoContent {
				t.Fatalf("preflight: status %d, want 204", resp.StatusCode)
			}
			h := resp.Header
			if h.Get("Access-Control-Allow-Origin") != page || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
				!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Swarm-Postage-Batch-Id") {
				t.Fatalf("preflight headers: %v", h)
			}

			method := http.MethodGet
			if strings.HasSuffix(path, "/service") {
				method = http.MethodPost
			}
			resp, _ = request(t, n, method, path, map[string]string{"Origin": page})
			if resp.Header.Get("Access-Control-Allow-Origin") != page {
				t.Fatalf("%s: status %d without Access-Control-Allow-Origin: %v", method, resp.StatusCode, resp.Header)
			}

			resp, body := request(t, n, method, path, map[string]string{"Origin": "http://evil.example"})
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
				t.Fatalf("another origin: status %d, headers %v, want 403 without CORS", resp.StatusCode, resp.Header)
			}
			if !strings.Contains(string(body), "origin not allowed") {
				t.Fatalf("another origin: %s", body)
			}
		})
	}

	// A refusal a page reads: a session request without peer is 400, with
	// the reason, readable cross-origin.
	resp, body := request(t, n, http.MethodGet, "/pubsub/"+topic, map[string]string{"Origin": "https://app.example"})
	var sr struct{ Reasons []struct{ Field string } }
	if err := json.Unmarshal(body, &sr); err != nil || resp.StatusCode != http.StatusBadRequest ||
		resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" || len(sr.Reasons) == 0 || sr.Reasons[0].Field != "peer" {
		t.Fatalf("400 cross-origin: status %d, headers %v, body %s", resp.StatusCode, resp.Header, body)
	}
}

// TestOriginPatterns: an origin pattern with port * takes that scheme and
// host on any port, and nothing else.
func TestOriginPatterns(t *testing.T) {
	c := newMockCluster(t, api.Options{CORSAllowedOrigins: []string{"http://localhost:*"}}, mock.New())
	n := c.clients[0]
	for origin, want := range map[string]int{
		"http://localhost:8090":        http.StatusOK,
		"http://LOCALHOST:3000":        http.StatusOK,
		"http://localhost":             http.StatusOK,
		"https://localhost:8090":       http.StatusForbidden,
		"http://localhost.evil:8090":   http.StatusForbidden,
		"http://localhost:80x":         http.StatusForbidden,
		"http://localhostevil.example": http.StatusForbidden,
		"http://127.0.0.1:8090":        http.StatusForbidden,
	} {
		if resp, body := request(t, n, http.MethodGet, "/pubsub/", map[string]string{"Origin": origin}); resp.StatusCode != want {
			t.Errorf("origin %s: status %d (%s), want %d", origin, resp.StatusCode, body, want)
		}
	}
}

// TestHostAllowlist: the bridge answers only to loopback names, IP
// addresses and the configured names; a page on a rebound name, whose
// Origin equals the Host it sends, is refused on every route, the
// WebSocket upgrade included.
func TestHostAllowlist(t *testing.T) {
	c := newMockCluster(t, api.Options{AllowedHosts: []string{"node.example", ".dapps.example"}}, mock.New())
	n := c.clients[0]
	for host, want := range map[string]int{
		"127.0.0.1:1633":            http.StatusOK,
		"[::1]:1633":                http.StatusOK,
		"192.168.1.5:1633":          http.StatusOK,
		"localhost:1633":            http.StatusOK,
		"LocalHost.:1633":           http.StatusOK,
		"app.localhost:1633":        http.StatusOK,
		"node.example:1633":         http.StatusOK,
		"node.example":              http.StatusOK,
		"a.dapps.example":           http.StatusOK,
		"rebind.attacker.test:1633": http.StatusForbidden,
		"dapps.example":             http.StatusForbidden,
		"node.example.evil:1633":    http.StatusForbidden,
		"localhost.evil:1633":       http.StatusForbidden,
	} {
		resp, body := request(t, n, http.MethodGet, "/pubsub/", map[string]string{"Host": host, "Origin": "http://" + host})
		if resp.StatusCode != want {
			t.Errorf("host %s: status %d (%s), want %d", host, resp.StatusCode, body, want)
		}
		if want == http.StatusForbidden && !strings.Contains(string(body), "host not allowed") {
			t.Errorf("host %s: %s", host, body)
		}
	}

	// The upgrade itself: a rebound page opening a session is refused
	// before anything is joined.
	q := url.Values{"peer": {c.broker.addr}}
	h := http.Header{"Host": {"rebind.attacker.test"}, "Origin": {"http://rebind.attacker.test"}}
	d := websocket.Dialer{}
	u := wsURL(n, strings.Repeat("ab", 32), q)
	ws, resp, err := d.Dial(u, h)
	if err == nil {
		_ = ws.Close()
		t.Fatal("a session on a rebound name was upgraded")
	}
	if resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("rebound upgrade: %v, %v", resp, err)
	}
	_ = resp.Body.Close()

	// "*" answers any name.
	all := newMockCluster(t, api.Options{AllowedHosts: []string{"*"}}, mock.New()).clients[0]
	if resp, body := request(t, all, http.MethodGet, "/pubsub/", map[string]string{"Host": "whatever.test"}); resp.StatusCode != http.StatusOK {
		t.Fatalf("AllowedHosts *: status %d (%s)", resp.StatusCode, body)
	}
}

// TestHeaderParamsAsQuery: every parameter a header carries is also a
// query parameter of the same name, as a browser's WebSocket sends no
// headers: a page persists (swarm-postage-batch-id), names its fields
// (swarm-soc-fields) and its keep-alive (swarm-keep-alive). A parameter
// given both ways with different values, twice with different values, or
// unknown to the route is a 400 naming it, never ignored.
func TestHeaderParamsAsQuery(t *testing.T) {
	t.Parallel()
	st := newFakeStorage()
	c := newCluster(t, 2, api.Options{Storage: st})
	a, b := c.clients[0], c.clients[1]
	alice := newKey(t)
	topic := keccak([]byte("query"))
	q := spec(c.broker.addr, "feed", &alice)

	sub := url.Values{}
	for k, v := range q {
		sub[k] = v
	}
	sub.Set("swarm-soc-fields", "index,payload")
	sub.Set("swarm-keep-alive", "30")
	audience := dial(t, b, "query", sub, nil)
	if r := audience.control("ready"); r["fields"] != "index,payload" {
		t.Fatalf("ready %v: swarm-soc-fields as a query parameter was not read", r)
	}

	pq := as(q, alice)
	pq.Set("swarm-postage-batch-id", hex.EncodeToString(goodBatch))
	pub := dial(t, a, "query", pq, nil)
	claim(t, pub, alice.signer, c.broker.Overlay(), 0)
	pub.control("ready")
	pub.persist(0, "persisted")
	got := audience.binary()
	if len(got) != 8+len("persisted") || string(got[8:]) != "persisted" {
		t.Fatalf("audience got %x", got)
	}
	want, _ := soc.CreateAddress(bps.FeedID(topic, 0), alice.addr)
	st.awaitUpload(t, want)

	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, vs := range as(q, alice) {
			v[k] = vs
		}
		for i := 0; i < len(kv); i += 2 {
			v.Add(kv[i], kv[i+1])
		}
		return v
	}
	batch := hex.EncodeToString(goodBatch)
	for _, tc := range []struct {
		name string
		q    url.Values
		h    http.Header
		want string
	}{
		{"unknown parameter", with("swarm-postage-batch", batch), nil, "swarm-postage-batch: unknown parameter"},
		{"header name misspelt", with("postage-batch-id", batch), nil, "postage-batch-id: unknown parameter"},
		{"header and query differ", with("swarm-postage-batch-id", batch), http.Header{"Swarm-Postage-Batch-Id": {hex.EncodeToString(foreignBatch)}}, "swarm-postage-batch-id: given as header"},
		{"twice, different", with("swarm-keep-alive", "30", "swarm-keep-alive", "40"), nil, "swarm-keep-alive: given 2 times"},
		{"peer twice, different", with("peer", strings.Repeat("ab", 32)), nil, "peer: given 2 times"},
		{"query value refused", with("swarm-keep-alive", "0"), nil, "swarm-keep-alive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refuseWith(t, a, "query", tc.q, tc.h, http.StatusBadRequest, tc.want)
		})
	}
	// The same value both ways, or twice, is no conflict.
	same := url.Values{"swarm-keep-alive": {"30", "30"}}
	for k, v := range q {
		same[k] = v
	}
	dial(t, a, "query", same, http.Header{"Swarm-Keep-Alive": {"30"}}).control("ready")

	// POST /pubsub/{topic}/service refuses what it does not read too.
	sq := url.Values{}
	for k, v := range q {
		sq[k] = v
	}
	sq.Set("swarm-postage-batch-id", batch)
	if code, body := postService(t, a, "query", sq, nil); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body), "unknown parameter") {
		t.Fatalf("service with an unknown parameter: %d %v", code, body)
	}
}

// pageDial opens a session as a page does: with an Origin (here the node's
// own), and no headers else.
func pageDial(t *testing.T, n *tnode, topic string, q url.Values) *client {
	t.Helper()
	return dial(t, n, topic, q, http.Header{"Origin": {n.srv.URL}})
}

// TestPageRefusalsAreCloseCodes: a page cannot read a refused upgrade's
// status, so the node upgrades a page's refused session request and closes
// it with 4000 + the status and the reason, after an error frame with the
// whole answer (status, message, reasons, Retry-After); a program gets the
// HTTP status.
func TestPageRefusalsAreCloseCodes(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{MaxSessions: 2})
	a := c.clients[0]
	alice := newKey(t)

	for _, tc := range []struct {
		name   string
		q      url.Values
		code   int
		field  string
		reason string
	}{
		{"malformed peer", url.Values{"peer": {"nowhere"}, "binding": {"feed"}}, 4400, "peer", "invalid query params: peer"},
		{"the node itself as broker", spec(a.svc.Overlay().String(), "feed", &alice), 4400, "peer", "is this node"},
		{"a closed cohort without addr", spec(c.broker.addr, "anchor", &alice, "closed", "true"), 4400, "addr", "closed cohort"},
		{"unknown parameter", url.Values{"peer": {c.broker.addr}, "binding": {"feed"}, "swarm-postage-batch": {"00"}}, 4400, "swarm-postage-batch", "unknown parameter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pageDial(t, a, "refused", tc.q)
			f := p.control("error")
			reasons, _ := f["reasons"].([]any)
			if f["status"] != float64(tc.code-4000) || len(reasons) == 0 || reasons[0].(map[string]any)["field"] != tc.field {
				t.Fatalf("error frame %v: want status %d naming %s", f, tc.code-4000, tc.field)
			}
			p.expectClose(tc.code, tc.reason)

			// A program gets the HTTP status.
			refuseWith(t, a, "refused", tc.q, nil, tc.code-4000)
		})
	}

	t.Run("GSOC session: no text frame", func(t *testing.T) {
		p := pageDial(t, a, "refused", url.Values{"peer": {c.broker.addr}, "gsoc-topic": {strings.Repeat("ab", 32)}})
		p.expectClose(4400, "gsoc-eth-address")
	})

	t.Run("transient: the node's session limit", func(t *testing.T) {
		pageDial(t, a, "limit", url.Values{"peer": {c.broker.addr}})
		pageDial(t, a, "limit", url.Values{"peer": {c.broker.addr}})
		p := pageDial(t, a, "limit", spec(c.broker.addr, "feed", &alice))
		if f := p.control("error"); f["status"] != float64(http.StatusServiceUnavailable) {
			t.Fatalf("error frame %v, want status 503", f)
		}
		p.expectClose(4503, "node session limit")
	})
}
