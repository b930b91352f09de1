// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// TestDevClusterStamps checks that each dev node gets its postage batch
// the way a node on a network does — bee's postage listener reads the
// batch's BatchCreated event from the development chain — and that bee's
// upload endpoints take it: on every node GET /stamps lists the node's
// batch, usable, and bee's batch store knows it owned by the node's
// Ethereum address; data POSTed to /bytes and a SOC POSTed to /soc on one
// node, stamped with its batch and pushed to the network (no deferred
// upload), are retrieved by GET /bytes and GET /soc from the other nodes;
// another node's batch is refused.
//
// The cluster runs as its own process, as make run starts it, built
// without the race detector: bee v2.8.1 races with itself there. Its
// batch service's UpdateBlockNumber changes, in place, the chain state
// that its batch store's GetChainState hands to every reader, and the
// postage service's IssuerUsable reads it on each GET /stamps and each
// stamped upload while the postage listener updates it every five blocks.
func TestDevClusterStamps(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three bee nodes")
	}
	begin := time.Now()
	cl := startDevProcess(t, "--nodes", "3", "--api-addr", "127.0.0.1:0", "--verbosity", "0")
	t.Logf("bee-bps built and the cluster up in %s", time.Since(begin).Round(time.Millisecond))
	started := time.Now()
	tctx, tcancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer tcancel()

	for _, n := range cl.Nodes {
		if len(n.Batch) != 64 {
			t.Fatalf("%s: batch %q", n.Name, n.Batch)
		}
		var addrs struct {
			Ethereum string `json:"ethereum"`
		}
		getJSON(tctx, t, n.API+"/addresses", &addrs)
		var batches struct {
			Batches []struct {
				BatchID string `json:"batchID"`
				Owner   string `json:"owner"`
				Depth   uint8  `json:"depth"`
			} `json:"batches"`
		}
		getJSON(tctx, t, n.API+"/batches", &batches)
		if len(batches.Batches) != len(cl.Nodes) {
			t.Fatalf("%s: bee's batch store has %d batches, want %d", n.Name, len(batches.Batches), len(cl.Nodes))
		}
		owned := false
		for _, b := range batches.Batches {
			if b.BatchID == n.Batch {
				owned = strings.EqualFold(b.Owner, strings.TrimPrefix(addrs.Ethereum, "0x"))
				if !owned {
					t.Fatalf("%s: batch %s owned by %s, the node is %s", n.Name, n.Batch, b.Owner, addrs.Ethereum)
				}
			}
		}
		if !owned {
			t.Fatalf("%s: batch %s not in bee's batch store", n.Name, n.Batch)
		}
		waitUsableStamp(tctx, t, n)
	}
	t.Logf("every node's batch usable %s after the cluster was up", time.Since(started).Round(time.Millisecond))
	started = time.Now()

	up, others := cl.Nodes[1], []devNode{cl.Nodes[0], cl.Nodes[2]}

	// POST /bytes on node-1, GET /bytes from the others.
	data := make([]byte, 3*swarm.ChunkSize+100) // a few chunks and an intermediate one
	for i := range data {
		data[i] = byte(i * 7)
	}
	req, _ := http.NewRequestWithContext(tctx, http.MethodPost, up.API+"/bytes", bytes.NewReader(data))
	req.Header.Set("Swarm-Postage-Batch-Id", up.Batch)
	req.Header.Set("Swarm-Deferred-Upload", "false")
	req.Header.Set("Content-Type", "application/octet-stream")
	var uploaded struct {
		Reference string `json:"reference"`
	}
	doJSON(t, req, http.StatusCreated, &uploaded)
	for _, n := range others {
		// Redundancy level 0 (none was uploaded): at bee's default level
		// the replicas getter cancels the other fetches once one returns,
		// and bee v2.8.1's retrieval then races on its attempt counter
		// (RetrieveChunk's deferred metrics read what the singleflight
		// closure still writes), which -race reports.
		got := getBody(tctx, t, n.API+"/bytes/"+uploaded.Reference, "Swarm-Redundancy-Level", "0")
		if !bytes.Equal(got, data) {
			t.Fatalf("%s: GET /bytes/%s: %d bytes, not the %d uploaded", n.Name, uploaded.Reference, len(got), len(data))
		}
	}

	t.Logf("POST /bytes of %d bytes and GET /bytes from two other nodes in %s", len(data), time.Since(started).Round(time.Millisecond))
	started = time.Now()

	// POST /soc on node-1 (a dApp's key signs it), GET /soc from the others.
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(pk)
	owner, _ := signer.EthereumAddress()
	id := make([]byte, swarm.HashSize)
	copy(id, "bps stamps e2e")
	payload := []byte("a single owner chunk stamped with the node's batch")
	ch, err := cac.New(payload)
	if err != nil {
		t.Fatal(err)
	}
	sch, err := soc.New(id, ch).Sign(signer)
	if err != nil {
		t.Fatal(err)
	}
	sig := sch.Data()[swarm.HashSize : swarm.HashSize+swarm.SocSignatureSize]
	body := make([]byte, swarm.SpanSize, swarm.SpanSize+len(payload))
	binary.LittleEndian.PutUint64(body, uint64(len(payload)))
	body = append(body, payload...)
	socPath := fmt.Sprintf("/soc/%s/%s", hex.EncodeToString(owner.Bytes()), hex.EncodeToString(id))
	req, _ = http.NewRequestWithContext(tctx, http.MethodPost, up.API+socPath+"?sig="+hex.EncodeToString(sig), bytes.NewReader(body))
	req.Header.Set("Swarm-Postage-Batch-Id", up.Batch)
	req.Header.Set("Swarm-Deferred-Upload", "false")
	var socRef struct {
		Reference string `json:"reference"`
	}
	doJSON(t, req, http.StatusCreated, &socRef)
	if socRef.Reference != sch.Address().String() {
		t.Fatalf("POST /soc: reference %s, want %s", socRef.Reference, sch.Address())
	}
	for _, n := range others {
		if got := getBody(tctx, t, n.API+socPath); !bytes.Equal(got, payload) {
			t.Fatalf("%s: GET %s: %q, want %q", n.Name, socPath, got, payload)
		}
	}

	t.Logf("POST /soc and GET /soc from two other nodes in %s", time.Since(started).Round(time.Millisecond))

	// Another node's batch is not this node's to use: bee refuses it.
	req, _ = http.NewRequestWithContext(tctx, http.MethodPost, up.API+"/bytes", strings.NewReader("not mine"))
	req.Header.Set("Swarm-Postage-Batch-Id", cl.Nodes[2].Batch)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusCreated {
		t.Fatalf("POST /bytes with another node's batch: %s %s", resp.Status, b)
	}
}

// devLDFlags are the Makefile's DEV_LDFLAGS.
const devLDFlags = "-X github.com/ethersphere/bee/v2/pkg/p2p/libp2p.reachabilityOverridePublic=true -X main.devReachability=true"

// startDevProcess builds bee-bps, without the race detector, and runs
// `bee-bps dev args… --info-file …` as a child process until the test
// ends (SIGTERM, then a kill after a minute). It returns the cluster the
// info file describes once the command says it is running.
func startDevProcess(t *testing.T, args ...string) devCluster {
	t.Helper()
	info := filepath.Join(t.TempDir(), "cluster.json")
	return runDevBinary(t, buildDevBinary(t), "", info, append([]string{"dev", "--" + optionNameDevInfoFile, info}, args...)...)
}

// buildDevBinary builds bee-bps with the dev ldflags, without the race
// detector, into a directory the test removes, and returns its path.
func buildDevBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bee-bps")
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to build bee-bps: %v", err)
	}
	// As make run builds it: bee's switch for local clusters reports the
	// nodes reachable, so that pushsync stores at the closest node.
	build := exec.Command(goBin, "build", "-ldflags", devLDFlags, "-o", bin, ".")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return bin
}

// runDevBinary runs `bin args…` (a dev command writing the info file
// info) in the directory dir ("" is the test's) as startDevProcess runs
// it, and returns the cluster once the command says it is running.
func runDevBinary(t *testing.T, bin, dir, info string, args ...string) devCluster {
	t.Helper()
	out := &lineWatch{want: "dev cluster running", seen: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("bee-bps dev: %v\n%s", err, out)
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("bee-bps dev not stopped within a minute of SIGTERM:\n%s", out)
		}
	})
	select {
	case <-out.seen:
	case err := <-exited:
		exited <- err // for the cleanup
		t.Fatalf("bee-bps dev exited: %v\n%s", err, out)
	case <-time.After(3 * time.Minute):
		t.Fatalf("bee-bps dev not running after three minutes:\n%s", out)
	}
	b, err := os.ReadFile(info)
	if err != nil {
		t.Fatal(err)
	}
	var cl devCluster
	if err := json.Unmarshal(b, &cl); err != nil {
		t.Fatalf("info file: %v: %s", err, b)
	}
	return cl
}

// lineWatch collects a process's output and closes seen once a line
// contains want.
type lineWatch struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	done bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.want) {
		w.done = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitUsableStamp polls n's GET /stamps until it lists n's batch as usable,
// or fails at ctx's deadline. GET /stamps answers 503 while bee's postage
// listener has not synced.
func waitUsableStamp(ctx context.Context, t *testing.T, n devNode) {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, n.API+"/stamps", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = fmt.Sprintf("%s %s", resp.Status, b)
			var stamps struct {
				Stamps []struct {
					BatchID string `json:"batchID"`
					Usable  bool   `json:"usable"`
					Depth   uint8  `json:"depth"`
					TTL     int64  `json:"batchTTL"`
				} `json:"stamps"`
			}
			if resp.StatusCode == http.StatusOK && json.Unmarshal(b, &stamps) == nil {
				if len(stamps.Stamps) != 1 || stamps.Stamps[0].BatchID != n.Batch {
					t.Fatalf("%s: GET /stamps lists %s, want the node's batch %s only", n.Name, b, n.Batch)
				}
				if s := stamps.Stamps[0]; s.Usable {
					if s.Depth < 17 || s.TTL < int64(30*24*time.Hour/time.Second) {
						t.Fatalf("%s: batch depth %d, TTL %ds: not enough", n.Name, s.Depth, s.TTL)
					}
					return
				}
			}
		} else {
			last = err.Error()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("%s: no usable batch in GET /stamps: %v; last answer: %s", n.Name, ctx.Err(), last)
		}
	}
}

// getJSON GETs url and decodes its 200 answer into v.
func getJSON(ctx context.Context, t *testing.T, url string, v any) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	doJSON(t, req, http.StatusOK, v)
}

func doJSON(t *testing.T, req *http.Request, want int, v any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %s %s, want %d", req.Method, req.URL.Path, resp.Status, b, want)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s %s: %v: %s", req.Method, req.URL.Path, err, b)
	}
}

// getBody GETs url until it answers 200, or fails at ctx's deadline:
// retrieval may need the network to settle.
func getBody(ctx context.Context, t *testing.T, url string, header ...string) []byte {
	t.Helper()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b
			}
			last = fmt.Sprintf("%s %s", resp.Status, b)
		} else {
			last = err.Error()
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("GET %s: %v; last answer: %s", url, ctx.Err(), last)
		}
	}
}
