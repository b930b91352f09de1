// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/node"
	"github.com/gorilla/websocket"
)

func TestConfigValidate(t *testing.T) {
	t.Parallel()

	if err := node.DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for _, tc := range []struct {
		name   string
		modify func(*node.Config)
		want   string
	}{
		{"no api", func(c *node.Config) { c.APIAddr = "" }, "api-addr is required"},
		{"bad api", func(c *node.Config) { c.APIAddr = "1633" }, "api-addr"},
		{"no p2p", func(c *node.Config) { c.P2PAddr = "" }, "p2p-addr is required"},
		{"no password", func(c *node.Config) { c.DataDir = "/tmp/x" }, "password is required"},
		{"full without chain", func(c *node.Config) { c.FullNode = true }, "blockchain-rpc-endpoint"},
		{"light bootnode", func(c *node.Config) { c.BootnodeMode = true }, "full node"},
		{"static without bootnode mode", func(c *node.Config) { c.StaticNodes = []string{"00"} }, "static nodes"},
		{"no block time", func(c *node.Config) { c.BlockTime = 0 }, "block-time"},
		{"threshold not a number", func(c *node.Config) { c.PaymentThreshold = "" }, "payment-threshold"},
		{"threshold too low", func(c *node.Config) { c.PaymentThreshold = "100" }, "outside"},
		{"threshold too high", func(c *node.Config) { c.PaymentThreshold = "1000000000" }, "outside"},
		{"verbosity", func(c *node.Config) { c.Verbosity = "loud" }, "unknown verbosity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			c := node.DefaultConfig()
			tc.modify(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestParseVerbosity(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]log.Level{
		"0": log.VerbosityNone, "silent": log.VerbosityNone,
		"1": log.VerbosityError, "error": log.VerbosityError,
		"2": log.VerbosityWarning, "warn": log.VerbosityWarning,
		"3": log.VerbosityInfo, "INFO": log.VerbosityInfo,
		"4": log.VerbosityDebug, "debug": log.VerbosityDebug,
		"5": log.VerbosityDebug + 1, "trace": log.VerbosityDebug + 1,
	} {
		if got, err := node.ParseVerbosity(in); err != nil || got != want {
			t.Errorf("ParseVerbosity(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if _, err := node.ParseVerbosity("6"); err == nil {
		t.Error("ParseVerbosity(6): no error")
	}
}

func TestNewLoggerHasMetrics(t *testing.T) {
	t.Parallel()

	l, err := node.NewLogger("info", io.Discard, "metrics")
	if err != nil {
		t.Fatal(err)
	}
	if err := node.CheckLogMetrics(l); err != nil {
		t.Fatal(err)
	}
	if err := node.CheckLogMetrics(log.Noop); err != nil {
		t.Fatalf("noop logger: %v", err)
	}
}

func TestStartFailsEarly(t *testing.T) {
	t.Parallel()

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()

	c := node.DefaultConfig()
	c.APIAddr = busy.Addr().String()
	if _, err := node.Start(context.Background(), c); err == nil || !strings.Contains(err.Error(), "api listener") {
		t.Fatalf("busy API port: %v", err)
	}

	c = node.DefaultConfig()
	c.Verbosity = "loud"
	if _, err := node.Start(context.Background(), c); err == nil || !strings.HasPrefix(err.Error(), "config: ") {
		t.Fatalf("bad config: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c = node.DefaultConfig()
	c.APIAddr = "127.0.0.1:0"
	if _, err := node.Start(ctx, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled start: %v", err)
	}
}

// host is a fake libp2p service for the plugin catch-up.
type host struct {
	p2p.Streamer
	mu           sync.Mutex
	peers        []p2p.Peer
	protocols    []p2p.ProtocolSpec
	addErr       error
	disconnected []swarm.Address
}

func (h *host) AddProtocol(s p2p.ProtocolSpec) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.addErr != nil {
		return h.addErr
	}
	h.protocols = append(h.protocols, s)
	return nil
}

func (h *host) Peers() []p2p.Peer { return h.peers }

func (h *host) Disconnect(a swarm.Address, _ string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.disconnected = append(h.disconnected, a)
	return nil
}

// hookPlugin records what its ConnectOut hook sees.
type hookPlugin struct {
	spec   p2p.ProtocolSpec
	seen   []swarm.Address
	closed int
}

func (p *hookPlugin) Protocol() p2p.ProtocolSpec { return p.spec }
func (p *hookPlugin) Close() error               { p.closed++; return nil }

var _ node.ProtocolHost = (*host)(nil)

func TestAttachCatchesUp(t *testing.T) {
	t.Parallel()

	a, b, bad := swarm.RandAddress(t), swarm.RandAddress(t), swarm.RandAddress(t)
	overlay := swarm.RandAddress(t)
	factory := func(pl *hookPlugin) node.PluginFactory {
		return func(env node.PluginEnv) (node.Plugin, error) {
			if !env.Overlay.Equal(overlay) {
				t.Errorf("factory got overlay %s, want %s", env.Overlay, overlay)
			}
			return pl, nil
		}
	}

	t.Run("runs ConnectOut for earlier peers", func(t *testing.T) {
		t.Parallel()

		h := &host{peers: []p2p.Peer{{Address: a}, {Address: b, FullNode: true}, {Address: bad}}}
		pl := &hookPlugin{spec: p2p.ProtocolSpec{Name: "test", Version: "1.0.0"}}
		pl.spec.ConnectOut = func(_ context.Context, p p2p.Peer) error {
			pl.seen = append(pl.seen, p.Address)
			if p.Address.Equal(bad) {
				return errors.New("refused")
			}
			return nil
		}
		got, err := node.Attach(context.Background(), h, node.PluginEnv{Overlay: overlay, Logger: log.Noop}, factory(pl))
		if err != nil || got != pl {
			t.Fatalf("attach: %v, %v", got, err)
		}
		if len(h.protocols) != 1 || h.protocols[0].Name != "test" {
			t.Fatalf("registered %+v", h.protocols)
		}
		if len(pl.seen) != 3 || !pl.seen[0].Equal(a) || !pl.seen[1].Equal(b) || !pl.seen[2].Equal(bad) {
			t.Fatalf("ConnectOut saw %v, want %v %v %v", pl.seen, a, b, bad)
		}
		if len(h.disconnected) != 1 || !h.disconnected[0].Equal(bad) {
			t.Fatalf("disconnected %v, want only %s", h.disconnected, bad)
		}
	})

	t.Run("no hook", func(t *testing.T) {
		t.Parallel()

		h := &host{peers: []p2p.Peer{{Address: a}}}
		pl := &hookPlugin{spec: p2p.ProtocolSpec{Name: "test", Version: "1.0.0"}}
		if _, err := node.Attach(context.Background(), h, node.PluginEnv{Overlay: overlay, Logger: log.Noop}, factory(pl)); err != nil {
			t.Fatal(err)
		}
		if len(h.protocols) != 1 || len(h.disconnected) != 0 {
			t.Fatalf("protocols %v, disconnected %v", h.protocols, h.disconnected)
		}
	})

	t.Run("add protocol fails", func(t *testing.T) {
		t.Parallel()

		h := &host{addErr: errors.New("duplicate")}
		pl := &hookPlugin{spec: p2p.ProtocolSpec{Name: "test", Version: "1.0.0"}}
		if _, err := node.Attach(context.Background(), h, node.PluginEnv{Overlay: overlay, Logger: log.Noop}, factory(pl)); err == nil || !strings.Contains(err.Error(), "duplicate") {
			t.Fatalf("got %v", err)
		}
		if pl.closed != 1 {
			t.Fatalf("plugin closed %d times, want 1", pl.closed)
		}
	})

	t.Run("factory fails", func(t *testing.T) {
		t.Parallel()

		failing := func(node.PluginEnv) (node.Plugin, error) {
			return nil, errors.New("no")
		}
		if _, err := node.Attach(context.Background(), &host{}, node.PluginEnv{Overlay: overlay, Logger: log.Noop}, failing); err == nil {
			t.Fatal("no error")
		}
	})
}

// TestFrontRoutesAndClosesWebSockets checks the API front without bee: the
// /pubsub split, and that shutdown closes hijacked connections.
func TestFrontRoutesAndClosesWebSockets(t *testing.T) {
	t.Parallel()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upgraded := make(chan *websocket.Conn, 1)
	bee := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			upgraded <- c
			return
		}
		_, _ = io.WriteString(w, "bee "+r.URL.Path)
	})
	pubsub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "pubsub "+r.URL.Path)
	})
	shutdown := node.ServeFront(ln, bee, pubsub)
	base := "http://" + ln.Addr().String()

	for path, want := range map[string]string{
		"/health":      "bee /health",
		"/pubsub":      "pubsub /pubsub",
		"/pubsub/":     "pubsub /pubsub/",
		"/pubsub/a/b":  "pubsub /pubsub/a/b",
		"/pubsubs":     "bee /pubsubs",
		"/bzz/pubsub/": "bee /bzz/pubsub/",
	} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != want {
			t.Errorf("GET %s: %q, want %q", path, body, want)
		}
	}

	client, resp, err := websocket.DefaultDialer.Dial("ws://"+ln.Addr().String()+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	defer client.Close()
	server := <-upgraded
	defer server.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := client.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := client.ReadMessage(); err == nil {
		t.Fatal("websocket open after shutdown")
	} else if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("websocket open after shutdown: %v", err)
	}
	if resp, err := http.Get(base + "/health"); err == nil {
		resp.Body.Close()
		t.Fatal("front still serving after shutdown")
	}
}
