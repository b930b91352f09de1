// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/session/mock"
	"github.com/gorilla/websocket"
	ma "github.com/multiformats/go-multiaddr"
)

// refusedWith dials a session that must be refused with code, the message
// containing every one of want; it returns the response's headers.
func refusedWith(t *testing.T, n *tnode, topic string, q url.Values, code int, want ...string) http.Header {
	t.Helper()
	code2, msg, h := refuse(t, n, topic, q, nil)
	if code2 != code {
		t.Fatalf("session on %s: %d %q, want %d", topic, code2, msg, code)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Fatalf("session on %s: %d %q, want the message to say %q", topic, code, msg, w)
		}
	}
	return h
}

// TestPublisherJoinFailsBeforeUpgrade: a publishing session whose stream
// takes a claim — the admin's — is joined before the upgrade, like a
// subscribing one, so a broker that cannot be joined is an HTTP status with
// the reason, never a 101 and a close.
func TestPublisherJoinFailsBeforeUpgrade(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	admin := newKey(t)

	t.Run("not connected", func(t *testing.T) {
		stranger := c.net.NewNode() // no link to a
		q := as(feedQuery(stranger.Overlay().String(), admin), admin)
		h := refusedWith(t, a, "pub-stranger", q, http.StatusServiceUnavailable, "not connected to the broker (yet)")
		if h.Get("Retry-After") != "5" {
			t.Fatalf("Retry-After %q, want 5", h.Get("Retry-After"))
		}
	})
	t.Run("not BPS", func(t *testing.T) {
		plain := c.net.NewNode() // speaks no BPS
		if err := c.net.Connect(a.Node, plain); err != nil {
			t.Fatal(err)
		}
		q := as(feedQuery(plain.Overlay().String(), admin), admin)
		refusedWith(t, a, "pub-plain", q, http.StatusBadGateway, "does not speak BPS")
	})
	t.Run("blocklisted", func(t *testing.T) {
		if err := b.Blocklist(c.broker.Overlay(), time.Hour, "test"); err != nil {
			t.Fatal(err)
		}
		q := as(feedQuery(c.broker.Overlay().String(), admin), admin)
		refusedWith(t, b, "pub-blocklisted", q, http.StatusServiceUnavailable, "blocklists the broker")
	})
	if n := len(c.broker.svc.Cohorts()); n != 0 {
		t.Fatalf("the broker holds %d cohorts", n)
	}
}

// TestFullThenBackoffSaysWhy: a broker that answers FULL is a 503 saying
// so, before the upgrade, for a subscribing and for a publishing session;
// during the node's backoff that follows, the 503 carries the reason the
// last attempt failed and a Retry-After.
func TestFullThenBackoffSaysWhy(t *testing.T) {
	t.Parallel()
	c := newClusterWith(t, 1, api.Options{}, bps.Options{Bounds: bps.Bounds{MaxCohortsPerPeer: 1}},
		bps.Options{Timing: bps.Timing{BackoffMin: time.Hour, BackoffMax: 2 * time.Hour}})
	a := c.clients[0]
	admin := newKey(t)
	peer := c.broker.addr
	dial(t, a, "first-cohort", feedQuery(peer, admin), nil)

	for _, tc := range []struct {
		name  string
		topic string
		q     url.Values
	}{
		{"subscriber", "second-cohort", feedQuery(peer, admin)},
		{"publisher", "third-cohort", as(feedQuery(peer, admin), admin)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refusedWith(t, a, tc.topic, tc.q, http.StatusServiceUnavailable, "the broker is full", bps.ErrFull.Error())
			h := refusedWith(t, a, tc.topic, tc.q, http.StatusServiceUnavailable, "backs off from joining this cohort at the broker until", "the last attempt: the broker is full", bps.ErrFull.Error())
			if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 3000 {
				t.Fatalf("Retry-After %q, want the backoff's hour", h.Get("Retry-After"))
			}
		})
	}
}

// TestConnectFailuresSayWhy: when bee's p2p service cannot connect to the
// broker, the status and the message say why, not a generic 502.
func TestConnectFailuresSayWhy(t *testing.T) {
	t.Parallel()
	c := newMockCluster(t, api.Options{}, mock.New())
	a := c.clients[0]
	tryAfter := time.Now().Add(90 * time.Second)
	for _, tc := range []struct {
		name string
		err  error
		code int
		want string
	}{
		{"light node", p2p.ErrDialLightNode, http.StatusBadRequest, "a broker is a full node"},
		{"blocklisted", p2p.ErrPeerBlocklisted, http.StatusServiceUnavailable, "blocklists the broker"},
		{"dial backoff", p2p.NewConnectionBackoffError(errors.New("breaker open"), tryAfter), http.StatusServiceUnavailable, "backs off from dialling the broker"},
		{"kademlia refusal", fmt.Errorf("connectOut: protocol: pricing, version:1.0.0: %w", p2p.ErrPeerNotFound), http.StatusServiceUnavailable, "the broker dropped the connection"},
		{"unreachable", errors.New("libp2p connect: dial backoff"), http.StatusBadGateway, "cannot reach or join the broker: connect to the broker: libp2p connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := peerMultiaddr(t)
			a.conn.mu.Lock()
			a.conn.errs[addr] = tc.err
			a.conn.mu.Unlock()
			h := refusedWith(t, a, "connect-"+strings.ReplaceAll(tc.name, " ", "-"), url.Values{"peer": {addr}}, tc.code, tc.want)
			if tc.name == "dial backoff" {
				if s, err := strconv.Atoi(h.Get("Retry-After")); err != nil || s < 60 || s > 91 {
					t.Fatalf("Retry-After %q, want bee's dial backoff", h.Get("Retry-After"))
				}
			}
		})
	}
}

// TestBrokerByOverlayThroughAddressBook: a broker named by overlay that
// the node is not connected to is dialled at the underlays the node's
// address book holds for it (bee's addressbook, in a real node), as
// upstream's API names brokers; without a record it is a 503 (a node that
// has just started connects to its peers in a while).
func TestBrokerByOverlayThroughAddressBook(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{})
	a := c.clients[0]
	far := newNodeWith(t, c.net, nil, api.Options{}, bps.Options{}) // a broker a has no link to
	farAddr := peerMultiaddr(t)
	q := url.Values{"peer": {far.Overlay().String()}}
	refusedWith(t, a, "by-overlay", q, http.StatusServiceUnavailable, "not connected to the broker")

	under, err := ma.NewMultiaddr(farAddr)
	if err != nil {
		t.Fatal(err)
	}
	a.conn.mu.Lock()
	a.conn.book = map[string]ma.Multiaddr{far.Overlay().String(): under}
	a.conn.peers = map[string]swarm.Address{farAddr: far.Overlay(), c.broker.addr: c.broker.Overlay()}
	a.conn.dialled = func(string) error { return c.net.Connect(a.Node, far.Node) }
	a.conn.mu.Unlock()
	// Another cohort: the node backs off from the one it failed to join.
	if code, msg, _ := refuse0(t, a, "by-overlay-2", q); code != 0 {
		t.Fatalf("%d %s", code, msg)
	}
	if got := cohortOf(t, far, keccak([]byte("by-overlay-2"))); got.Subscribers == 0 {
		t.Fatalf("the broker named by overlay holds no stream: %+v", got)
	}

	// A record that reaches another peer is refused.
	other := newNodeWith(t, c.net, nil, api.Options{}, bps.Options{})
	a.conn.mu.Lock()
	a.conn.book[other.Overlay().String()] = under // far's underlay
	a.conn.seen, a.conn.dialled = make(map[string]bool), nil
	a.conn.mu.Unlock()
	refusedWith(t, a, "stale", url.Values{"peer": {other.Overlay().String()}}, http.StatusBadGateway, "stale underlay")
}

// refuse0 dials and returns the refusal's status and message, 0 if upgraded.
func refuse0(t *testing.T, n *tnode, topic string, q url.Values) (int, string, http.Header) {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(wsURL(n, topic, q), nil)
	if err == nil {
		t.Cleanup(func() { _ = ws.Close() })
		return 0, "", nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}
