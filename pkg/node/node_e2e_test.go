// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/devchain"
	"github.com/ethersphere/bps/pkg/node"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// echo is a test plugin: a protocol that writes back the line it reads, and
// reports every peer its connect hooks see.
type echo struct {
	streamer p2p.Streamer
	overlay  swarm.Address

	calls prometheus.Counter // echoes answered

	mu        sync.Mutex
	peers     map[string]bool
	connected chan struct{} // signalled on every connect hook
	closed    bool
}

const (
	echoProtocol = "bps-test-echo"
	echoVersion  = "1.0.0"
	echoStream   = "echo"
)

func newEcho(env node.PluginEnv) (node.Plugin, error) {
	return &echo{
		streamer: env.Streamer,
		overlay:  env.Overlay,
		calls: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "bps",
			Subsystem: "test_echo",
			Name:      "calls_total",
			Help:      "Echoes answered.",
		}),
		peers:     make(map[string]bool),
		connected: make(chan struct{}, 1),
	}, nil
}

func (e *echo) Protocol() p2p.ProtocolSpec {
	return p2p.ProtocolSpec{
		Name:        echoProtocol,
		Version:     echoVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: echoStream, Handler: e.handle}},
		ConnectIn:   e.connect,
		ConnectOut:  e.connect,
	}
}

func (e *echo) connect(_ context.Context, p p2p.Peer) error {
	e.mu.Lock()
	e.peers[p.Address.ByteString()] = true
	e.mu.Unlock()
	select {
	case e.connected <- struct{}{}:
	default:
	}
	return nil
}

// waitPeer waits until a connect hook has seen peer.
func (e *echo) waitPeer(ctx context.Context, peer swarm.Address) error {
	for {
		e.mu.Lock()
		seen := e.peers[peer.ByteString()]
		e.mu.Unlock()
		if seen {
			return nil
		}
		select {
		case <-e.connected:
		case <-ctx.Done():
			return fmt.Errorf("peer %s not connected: %w", peer, ctx.Err())
		}
	}
}

func (e *echo) handle(_ context.Context, _ p2p.Peer, s p2p.Stream) (err error) {
	defer func() {
		if err != nil {
			_ = s.Reset()
			return
		}
		err = s.FullClose()
	}()
	line, err := bufio.NewReader(s).ReadString('\n')
	if err != nil {
		return err
	}
	if _, err = io.WriteString(s, line); err == nil {
		e.calls.Inc()
	}
	return err
}

func (e *echo) Metrics() []prometheus.Collector { return []prometheus.Collector{e.calls} }

// call opens an echo stream to peer and returns what came back.
func (e *echo) call(ctx context.Context, peer swarm.Address, msg string) (string, error) {
	s, err := e.streamer.NewStream(ctx, peer, nil, echoProtocol, echoVersion, echoStream)
	if err != nil {
		return "", err
	}
	defer func() { _ = s.FullClose() }()
	if _, err := io.WriteString(s, msg+"\n"); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(s).ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

func (e *echo) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("closed twice")
	}
	e.closed = true
	return nil
}

// pubsubStub stands for the /pubsub API.
type pubsubStub struct {
	ready  bool // got a plugin and a connector
	closed atomic.Int32
}

func (p *pubsubStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "pubsub %s %v", r.URL.Path, p.ready)
}

func (p *pubsubStub) Close() error {
	p.closed.Add(1)
	return nil
}

// testConfig is a node on loopback, on a private network, with the chain,
// keys and state in memory.
func testConfig(t *testing.T, name string, chain *devchain.Chain) node.Config {
	t.Helper()

	c := node.DefaultConfig()
	c.Name = name
	c.APIAddr = "127.0.0.1:0"
	c.P2PAddr = "127.0.0.1:0"
	c.NetworkID = 0x6270 // private
	c.AllowPrivateCIDRs = true
	c.BlockchainRPCEndpoint = chain.URL()
	c.BlockTime = chain.BlockTime()
	c.SwapEnable = false
	c.ChequebookEnable = false
	c.StorageIncentivesEnable = false
	c.WarmupTime = 0
	c.Verbosity = "error"
	c.LogSink = os.Stderr
	if testing.Verbose() {
		c.Verbosity = "info"
	}
	c.Plugin = newEcho
	return c
}

func startNode(t *testing.T, c node.Config) *node.Node {
	t.Helper()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	started := time.Now()
	n, err := node.Start(ctx, c)
	if err != nil {
		t.Fatalf("start %s: %v", c.Name, err)
	}
	t.Logf("%s (full node %v) started in %s", c.Name, c.FullNode, time.Since(started))
	t.Cleanup(func() {
		stopped := time.Now()
		if err := n.Close(); err != nil {
			t.Errorf("shutdown %s: %v", c.Name, err)
		}
		t.Logf("%s stopped in %s", c.Name, time.Since(stopped))
	})
	return n
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()

	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %s: %s", url, resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// TestTwoNodes starts a devchain, a full-node broker and a light node that
// bootstraps from it, with the echo plugin on both. It checks the plugin's
// protocol over real libp2p both ways, bee's API on the front port, the
// /pubsub routing, a WebSocket session through the front port that shutdown
// closes, and a clean shutdown.
func TestTwoNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two bee nodes")
	}

	chain, err := devchain.New(devchain.Options{BlockTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopped := time.Now()
		if err := chain.Close(); err != nil {
			t.Error(err)
		}
		t.Logf("chain stopped in %s", time.Since(stopped))
	})

	bc := testConfig(t, "broker", chain)
	bc.FullNode = true
	// One node on disk: encrypted keys (scrypt, most of the start-up time
	// under the race detector) and leveldb stores.
	bc.DataDir = t.TempDir()
	bc.Password = "test"
	ps := new(pubsubStub)
	t.Cleanup(func() { // runs after the broker's shutdown, registered later
		if n := ps.closed.Load(); n != 1 {
			t.Errorf("pubsub handler closed %d times, want once", n)
		}
	})
	bc.PubSubHandler = func(p node.Plugin, conn node.Connector, _ log.Logger) (http.Handler, error) {
		ps.ready = p != nil && conn != nil
		return ps, nil
	}
	broker := startNode(t, bc)

	underlays, err := broker.Underlays()
	if err != nil || len(underlays) == 0 {
		t.Fatalf("broker underlays %v: %v", underlays, err)
	}
	lc := testConfig(t, "light", chain)
	for _, u := range underlays {
		lc.Bootnodes = append(lc.Bootnodes, u.String())
	}
	light := startNode(t, lc)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	be, le := broker.Plugin().(*echo), light.Plugin().(*echo)
	if err := le.waitPeer(ctx, broker.Overlay()); err != nil {
		t.Fatalf("light: %v", err)
	}
	if err := be.waitPeer(ctx, light.Overlay()); err != nil {
		t.Fatalf("broker: %v", err)
	}
	if !be.overlay.Equal(broker.Overlay()) || !le.overlay.Equal(light.Overlay()) {
		t.Fatal("plugins got the wrong overlays")
	}

	t.Run("echo over libp2p", func(t *testing.T) {
		if got, err := le.call(ctx, broker.Overlay(), "to the broker"); err != nil || got != "to the broker" {
			t.Fatalf("light to broker: %q, %v", got, err)
		}
		if got, err := be.call(ctx, light.Overlay(), "to the light node"); err != nil || got != "to the light node" {
			t.Fatalf("broker to light node: %q, %v", got, err)
		}
	})

	t.Run("bee API on the front port", func(t *testing.T) {
		for _, n := range []*node.Node{broker, light} {
			var health struct {
				Status string `json:"status"`
			}
			getJSON(t, n.APIURL()+"/health", &health)
			if health.Status != "ok" {
				t.Errorf("%s/health: %+v", n.APIURL(), health)
			}
			var addrs struct {
				Overlay  swarm.Address `json:"overlay"`
				Underlay []string      `json:"underlay"`
			}
			getJSON(t, n.APIURL()+"/addresses", &addrs)
			if !addrs.Overlay.Equal(n.Overlay()) || len(addrs.Underlay) == 0 {
				t.Errorf("%s/addresses: %+v, want overlay %s", n.APIURL(), addrs, n.Overlay())
			}
		}
		var peers struct {
			Peers []struct {
				Address swarm.Address `json:"address"`
			} `json:"peers"`
		}
		getJSON(t, broker.APIURL()+"/peers", &peers)
		if len(peers.Peers) != 1 || !peers.Peers[0].Address.Equal(light.Overlay()) {
			t.Errorf("broker /peers: %+v", peers)
		}

		// The plugin's metrics on bee's /metrics: the broker answered one echo.
		resp, err := http.Get(broker.APIURL() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "\nbps_test_echo_calls_total 1\n") {
			t.Errorf("broker /metrics has no bps_test_echo_calls_total 1")
		}
	})

	t.Run("pubsub routing", func(t *testing.T) {
		for _, tc := range []struct {
			url, want string
			status    int
		}{
			{broker.APIURL() + "/pubsub", "pubsub /pubsub true", http.StatusOK},
			{broker.APIURL() + "/pubsub/abc?x=1", "pubsub /pubsub/abc true", http.StatusOK},
			{light.APIURL() + "/pubsub/", "404 page not found\n", http.StatusNotFound},
			{broker.APIURL() + "/pubsubx", "", http.StatusNotFound}, // bee's 404
		} {
			resp, err := http.Get(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.status || (tc.want != "" && string(body) != tc.want) {
				t.Errorf("GET %s: %d %q, want %d %q", tc.url, resp.StatusCode, body, tc.status, tc.want)
			}
		}
	})

	// Last, as it shuts the light node down: a WebSocket session with bee
	// through the front port, which Shutdown must close.
	url := "ws" + strings.TrimPrefix(light.APIURL(), "http") + "/chunks/stream"
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	resp.Body.Close()
	defer conn.Close()
	if err := light.Close(); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := conn.ReadMessage(); err == nil {
		t.Fatal("websocket still open after shutdown")
	} else if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
		t.Fatalf("websocket still open after shutdown: %v", err)
	}
}
