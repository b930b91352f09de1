// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/devchain"
	"github.com/ethersphere/bps/pkg/node"
)

// lockedBuffer is the commands' output, written by several nodes at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testBlockTime is the dev chain's block time in the in-process clusters of
// these tests, unless a test names its own. bee v2.8.1's postage listener
// changes the chain state it shares with its readers in place (a data race
// in bee: batchservice.UpdateBlockNumber writes the Block that
// status.LocalSnapshot, answering a peer, reads); it writes once per five
// blocks. With 30 s blocks it writes at start and then every 150 s, after
// these tests' clusters are gone, so -race reports bee's race only in the
// window of the first sync instead of every five seconds.
const testBlockTime = "30"

// run executes args in the background and returns the command's result.
// A dev cluster gets testBlockTime unless args set --block-time.
func run(ctx context.Context, t *testing.T, c *command, args ...string) (<-chan error, *lockedBuffer) {
	t.Helper()

	if len(args) > 0 && args[0] == "dev" && !slices.Contains(args, "--"+optionNameBlockTime) {
		args = append(slices.Clone(args), "--"+optionNameBlockTime, testBlockTime)
	}
	out := new(lockedBuffer)
	c.root.SetOut(out)
	c.root.SetErr(out)
	c.root.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- c.root.ExecuteContext(ctx) }()
	return done, out
}

func status(t *testing.T, url string) int {
	t.Helper()

	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestStartRunsANode runs start against a development chain, with and
// without bps-enable, and stops it by cancelling its context.
func TestStartRunsANode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts bee nodes")
	}

	chain, err := devchain.New(devchain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer chain.Close()

	for _, enable := range []bool{true, false} {
		ready := make(chan *node.Node, 1)
		c, err := newCommand(func(c *command) {
			c.homeDir = t.TempDir()
			c.startReady = func(n *node.Node) { ready <- n }
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		args := []string{"start",
			"--data-dir", "", // keys and state in memory
			"--api-addr", "127.0.0.1:0", "--p2p-addr", "127.0.0.1:0",
			"--mainnet=false", "--network-id", "4242",
			"--full-node", "--blockchain-rpc-endpoint", chain.URL(), "--block-time", "1",
			"--swap-enable=false", "--chequebook-enable=false", "--storage-incentives-enable=false",
			"--verbosity", "0",
		}
		if enable {
			args = append(args, "--bps-enable", "--bps-max-cohorts", "3")
		}
		done, out := run(ctx, t, c, args...)

		select {
		case n := <-ready:
			if ok := serviceOf(n.Plugin()) != nil; ok != enable {
				t.Errorf("bps-enable %v: plugin %T", enable, n.Plugin())
			}
			t.Logf("bps %v: node %s at %s, plugin %T", enable, n.Overlay(), n.APIURL(), n.Plugin())
			var health struct{ Version, APIVersion string }
			resp, err := http.Get(n.APIURL() + "/health")
			if err != nil {
				t.Fatal(err)
			}
			err = json.NewDecoder(resp.Body).Decode(&health)
			resp.Body.Close()
			// bee v2.8.1's API is 8.1.0; the version is bee's with "-bps".
			if err != nil || resp.StatusCode != http.StatusOK || health.APIVersion != "8.1.0" || !strings.HasPrefix(health.Version, "2.8.1-bps") {
				t.Errorf("/health: %d %+v (%v), want bee 2.8.1-bps…, API 8.1.0", resp.StatusCode, health, err)
			}
			resp, err = http.Get(n.APIURL() + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := strings.Contains(string(body), "\nbee_bps_"); got != enable {
				t.Errorf("bps-enable %v: bee_bps_ metrics on /metrics: %v", enable, got)
			}
			// The /pubsub handler's series too: the WebSocket sessions.
			if got := strings.Contains(string(body), "\nbee_bps_api_sessions "); got != enable {
				t.Errorf("bps-enable %v: bee_bps_api_sessions on /metrics: %v", enable, got)
			}
		case err := <-done:
			t.Fatalf("start returned %v:\n%s", err, out)
		case <-time.After(2 * time.Minute):
			t.Fatalf("no node after two minutes:\n%s", out)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("start: %v\n%s", err, out)
		}
	}
}

// joinCluster runs the start command the dev command prints for another
// node and waits until the broker lists that node among its peers.
func joinCluster(t *testing.T, cluster devCluster, brokerAPI string) {
	t.Helper()

	ready := make(chan *node.Node, 1)
	c, err := newCommand(func(c *command) {
		c.homeDir = t.TempDir()
		c.startReady = func(n *node.Node) { ready <- n }
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done, out := run(ctx, t, c, append(cluster.join("127.0.0.1:0"), "--verbosity", "0")...)
	var joined *node.Node
	select {
	case joined = <-ready:
	case err := <-done:
		t.Fatalf("start returned %v:\n%s", err, out)
	case <-time.After(2 * time.Minute):
		t.Fatalf("no node after two minutes:\n%s", out)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for connected := false; !connected; {
		var peers struct {
			Peers []struct {
				Address string `json:"address"`
			} `json:"peers"`
		}
		if resp, err := http.Get(brokerAPI + "/peers"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&peers)
			resp.Body.Close()
		}
		for _, p := range peers.Peers {
			connected = connected || p.Address == joined.Overlay().String()
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("the joined node %s never reached the broker", joined.Overlay())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
}

// freePorts returns a loopback address whose port and the n-1 ports above
// it are free, below the kernel's ephemeral range (32768 and up on Linux),
// where no outgoing connection of another test takes one of them meanwhile.
func freePorts(t *testing.T, n int) string {
	t.Helper()

	for range 100 {
		p := 20000 + mrand.IntN(12000-n)
		var ls []net.Listener
		for i := range n {
			l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+i)))
			if err != nil {
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if len(ls) == n {
			return net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
		}
	}
	t.Fatalf("no %d free ports in a row", n)
	return ""
}

// TestDevCluster runs the dev cluster twice on the same broker API port:
// the first run, which another node joins with the start command it
// prints, is stopped by SIGTERM, the second starts clean.
func TestDevCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts bee nodes")
	}

	apiAddr := freePorts(t, 2)
	infoFile := t.TempDir() + "/nodes.json"

	var dataDirs []string
	for i, nodes := range []string{"2", "1"} {
		ready := make(chan devCluster, 1)
		c, err := newCommand(func(c *command) {
			c.homeDir = t.TempDir()
			c.devReady = func(d devCluster) { ready <- d }
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done, out := run(ctx, t, c, "dev", "--nodes", nodes, "--info-file", infoFile, "--api-addr", apiAddr, "--verbosity", "0")

		var cluster devCluster
		select {
		case cluster = <-ready:
		case err := <-done:
			t.Fatalf("run %d: dev returned %v:\n%s", i, err, out)
		case <-time.After(2 * time.Minute):
			t.Fatalf("run %d: no cluster after two minutes:\n%s", i, out)
		}
		dataDirs = append(dataDirs, cluster.dataDir)

		b, err := os.ReadFile(infoFile)
		if err != nil {
			t.Fatal(err)
		}
		var info struct {
			Nodes []struct {
				Name      string   `json:"name"`
				API       string   `json:"api"`
				Overlay   string   `json:"overlay"`
				Underlays []string `json:"underlays"`
			} `json:"nodes"`
			NetworkID uint64 `json:"networkId"`
			Chain     struct {
				RPC       string `json:"rpc"`
				BlockTime uint64 `json:"blockTime"`
			} `json:"chain"`
		}
		if err := json.Unmarshal(b, &info); err != nil {
			t.Fatal(err)
		}
		if len(info.Nodes) != len(cluster.Nodes) || info.Nodes[0].Name != "broker" || info.Nodes[0].API != "http://"+apiAddr ||
			info.NetworkID != devNetworkID || !strings.HasPrefix(info.Chain.RPC, "http://127.0.0.1:") || strconv.FormatUint(info.Chain.BlockTime, 10) != testBlockTime {
			t.Fatalf("run %d: info file %s", i, b)
		}
		for _, n := range info.Nodes {
			if len(n.Overlay) != 64 || len(n.Underlays) == 0 || status(t, n.API+"/health") != http.StatusOK {
				t.Errorf("run %d: node %+v", i, n)
			}
		}
		if i == 0 {
			var peers struct {
				Peers []struct {
					Address string `json:"address"`
				} `json:"peers"`
			}
			resp, err := http.Get(info.Nodes[0].API + "/peers")
			if err != nil {
				t.Fatal(err)
			}
			err = json.NewDecoder(resp.Body).Decode(&peers)
			resp.Body.Close()
			if err != nil || len(peers.Peers) != 1 || peers.Peers[0].Address != info.Nodes[1].Overlay {
				t.Errorf("broker peers %+v (%v), want %s", peers, err, info.Nodes[1].Overlay)
			}
			joinCluster(t, cluster, info.Nodes[0].API)

			// The dev command has registered for SIGTERM before reporting
			// ready, so this reaches it, not the default handler.
			if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		} else {
			cancel()
		}

		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d: %v\n%s", i, err, out)
			}
		case <-time.After(time.Minute):
			t.Fatalf("run %d: not stopped after a minute:\n%s", i, out)
		}
		if _, err := os.Stat(cluster.dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("run %d: data dir %s left behind: %v", i, cluster.dataDir, err)
		}
		if _, err := os.Stat(infoFile); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("run %d: info file left behind: %v", i, err)
		}
	}
	if dataDirs[0] == dataDirs[1] {
		t.Errorf("both runs used %s", dataDirs[0])
	}
}
