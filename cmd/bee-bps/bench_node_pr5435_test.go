// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/gorilla/websocket"
)

// fake5435 plays a cluster of bee #5435 nodes as bench-node's pr5435 mode
// sees them: /addresses, /metrics, and /pubsub/<topic> sessions whose peer
// must be a multiaddr, a publisher's frames (signature ‖ span ‖ payload)
// checked as #5435 checks them (the SOC of gsoc-topic and gsoc-eth-address
// at the topic's address) and relayed unchanged to every session on the
// topic, whatever swarm-soc-fields says.
type fake5435 struct {
	t        *testing.T
	mu       sync.Mutex
	sessions map[string][]*websocket.Conn // by topic
	conns    []*websocket.Conn
	rejected []string
	wg       sync.WaitGroup
}

func (h *fake5435) reject(format string, a ...any) {
	h.mu.Lock()
	h.rejected = append(h.rejected, fmt.Sprintf(format, a...))
	h.mu.Unlock()
}

func (h *fake5435) node(start int) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /addresses", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, `{"overlay":"00","underlay":["/ip6/::1/tcp/1634/p2p/QmBroker","/ip4/127.0.0.1/tcp/1634/p2p/QmBroker"]}`)
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprintf(w, "bee_process_cpu_seconds_total 1\nbee_process_start_time_seconds %d\n", start)
	})
	mux.HandleFunc("/pubsub/{topic}", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("peer") != "/ip4/127.0.0.1/tcp/1634/p2p/QmBroker" {
			h.reject("peer %q, want the broker's loopback underlay", q.Get("peer"))
			http.Error(w, "invalid peer query param", http.StatusBadRequest)
			return
		}
		topic, _ := hex.DecodeString(r.PathValue("topic"))
		var id, owner []byte
		if q.Has("gsoc-eth-address") {
			owner, _ = hex.DecodeString(q.Get("gsoc-eth-address"))
			id, _ = hex.DecodeString(q.Get("gsoc-topic"))
			if a, err := soc.CreateAddress(id, owner); err != nil || !a.Equal(swarm.NewAddress(topic)) {
				h.reject("publisher's SOC is not at the topic's address")
				http.Error(w, "bad gsoc", http.StatusBadRequest)
				return
			}
		}
		c, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		key := string(topic)
		h.mu.Lock()
		h.sessions[key] = append(h.sessions[key], c)
		h.conns = append(h.conns, c)
		h.mu.Unlock()
		h.wg.Go(func() {
			for {
				_, b, err := c.ReadMessage()
				if err != nil {
					return
				}
				if owner == nil {
					continue
				}
				ch := swarm.NewChunk(swarm.NewAddress(topic), append(append([]byte{}, id...), b...))
				if !soc.Valid(ch) {
					h.reject("a frame #5435 finds invalid")
					continue
				}
				h.mu.Lock()
				for _, s := range h.sessions[key] {
					_ = s.WriteMessage(websocket.BinaryMessage, b)
				}
				h.mu.Unlock()
			}
		})
	})
	return httptest.NewServer(mux)
}

// TestBenchNodePR5435 runs bench-node's pr5435 mode against two fake #5435
// clusters of three processes, interleaved, and checks that every message
// arrived and the ratios were printed.
func TestBenchNodePR5435(t *testing.T) {
	h := &fake5435{t: t, sessions: map[string][]*websocket.Conn{}}
	var a, b []string
	for i := range 6 {
		s := h.node(100 + i)
		defer s.Close()
		if i < 3 {
			a = append(a, s.URL)
		} else {
			b = append(b, s.URL)
		}
	}
	defer func() {
		h.mu.Lock()
		for _, c := range h.conns {
			_ = c.Close()
		}
		h.mu.Unlock()
		h.wg.Wait()
	}()

	c, err := newCommand(func(c *command) { c.homeDir = t.TempDir() })
	if err != nil {
		t.Fatal(err)
	}
	out := new(lockedBuffer)
	c.root.SetOut(out)
	c.root.SetErr(out)
	c.root.SetArgs([]string{"bench-node", "--server", "pr5435", "--api", strings.Join(a, ","), "--pr5435", strings.Join(b, ","),
		"--subscribers", "1,2", "--messages", "10", "--rate", "500", "--rounds", "1", "--idle", "0", "--warmup", "2"})
	if err := c.root.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("bench-node: %v\n%s", err, out)
	}
	h.mu.Lock()
	rejected := h.rejected
	h.mu.Unlock()
	if len(rejected) > 0 {
		t.Fatalf("the fake #5435 rejected: %v\n%s", rejected, out)
	}
	for _, want := range []string{
		"#5435: broker api-0 (/ip4/127.0.0.1/tcp/1634/p2p/QmBroker)",
		"| #5435 (--api) | 1 | 1 | 10/10 |", "| #5435 (--api) | 1 | 2 | 20/20 |",
		"| #5435 | 1 | 1 | 10/10 |", "| #5435 | 1 | 2 | 20/20 |",
		"#5435 (--api) ÷ #5435, same run",
	} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out.String(), "| 1 | 10/10 |") + strings.Count(out.String(), "| 2 | 20/20 |"); n != 4 {
		t.Fatalf("%d runs, want 4 (two systems, two subscriber counts)\n%s", n, out)
	}
}
