// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/wsclient"
)

// TestRestartResumes is issue 26's item 2 on real processes: a `bee-bps
// start` node (a relay, its own data directory) follows a persistent feed
// (SWIP-65) published from a dev node with a postage batch; it is SIGKILLed,
// misses updates while it is down, and is restarted with the same data
// directory. A subscription that asks to resume at the first update it
// missed recovers every one of them from storage, in order, before the
// live update that revealed the gap: not a gap (issue 26). The node joins
// without bee's warm-up, as the dev cluster's own do (devCluster.join):
// bee's retrieval waits for the storage radius that salud learns only
// after it. Skipped with the soak's other tests unless BPS_SOAK is set
// (it starts bee nodes and waits for a batch).
func TestRestartResumes(t *testing.T) {
	if os.Getenv("BPS_SOAK") == "" {
		t.Skip("runs with the soak: BPS_SOAK=short or long (make soak)")
	}
	bin := os.Getenv("BPS_SOAK_BIN")
	if bin == "" {
		bin = buildDevBinary(t)
	}
	dir := t.TempDir()
	if keep := os.Getenv("BPS_SOAK_DIR"); keep != "" {
		dir = filepath.Join(keep, "resume") // beside the soak's
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	info := filepath.Join(dir, "cluster.json")
	cl := runDevBinary(t, bin, "", info, "dev", "--"+optionNameDevInfoFile, info, "--nodes", "2", "--api-addr", "127.0.0.1:0",
		"--verbosity", "0", "--"+optionNameBPSDeliveryPrice, "0", "--"+optionNameBPSPublishPrice, "0")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	waitUsableStamp(ctx, t, cl.Nodes[1])
	batch, err := hex.DecodeString(cl.Nodes[1].Batch)
	if err != nil {
		t.Fatal(err)
	}

	n := &soakNode{id: 1, dataDir: filepath.Join(dir, "node"), logDir: dir}
	if err := os.MkdirAll(n.dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	c := soakConfig{bin: bin}
	t.Cleanup(n.kill)
	n.start(t, c, cl)
	n.up(ctx, t)

	alice := newSWIP60Key(t)
	topic := swip60Topic(fmt.Sprintf("e2e-restart-resume-%d", time.Now().UnixNano()))
	o := wsclient.Options{API: cl.Nodes[1].API, Peer: cl.Nodes[0].Underlays[0], Topic: topic, Binding: wsclient.BindingFeed, Admin: alice.addr, PostageBatch: batch}
	pub, err := wsclient.PublishFeed(ctx, o, alice.signer, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	payload := func(i uint64) []byte { return fmt.Appendf(nil, "restart update %d", i) }
	publish := func(from, to uint64) {
		t.Helper()
		for i := from; i <= to; i++ {
			if err := pub.SendFeedUpdate(alice.signer, i, payload(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	stored := func(i uint64) {
		t.Helper()
		path := fmt.Sprintf("%s/soc/%s/%s", cl.Nodes[0].API, hex.EncodeToString(alice.addr), hex.EncodeToString(bps.FeedID(topic, i)))
		if b := getBody(ctx, t, path); !bytes.Equal(b, payload(i)) {
			t.Fatalf("GET /soc of update %d: %q", i, b)
		}
	}
	so := wsclient.Options{API: "http://" + n.api, Peer: cl.Nodes[0].Underlays[0], Topic: topic, Binding: wsclient.BindingFeed, Admin: alice.addr,
		Fields: "address,identifier,signature,span,index,payload"}
	next := func(s *wsclient.Session, i uint64) {
		t.Helper()
		m, err := s.NextMessage(ctx)
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
		verifyUpdate(t, m, alice.addr, topic, i, payload(i))
	}

	// Live, before the crash.
	sub, err := wsclient.Subscribe(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	const before, missed = 5, 10
	publish(0, before-1)
	for i := range uint64(before) {
		next(sub, i)
	}
	_ = sub.Close()

	// The crash, and what the node misses while it is down.
	n.kill()
	publish(before, before+missed-1)
	stored(before + missed - 1)
	n.start(t, c, cl)
	restarted := time.Now()
	n.up(ctx, t)
	so.API = "http://" + n.api // the restart's API port
	// bee retrieves nothing until it knows its storage radius (its
	// kademlia depth below swarm.MaxPO, as node.StorageRadius reads it),
	// which salud learns from its peers seconds after the start — at a
	// load of 30 on 2 cores, more than a recovery's 10 s.
	waitFor(ctx, t, "the restarted node's storage radius", func() bool {
		var topo struct {
			Depth *uint8 `json:"depth"`
		}
		return soakGet(ctx, "http://"+n.api+"/topology", &topo) && topo.Depth != nil && *topo.Depth < swarm.MaxPO
	})

	// Back, resuming at the first update missed: the missed ones come
	// from storage before the live one that revealed them.
	resume := uint64(before)
	so.Resume = &resume
	sub, err = wsclient.Subscribe(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	live := uint64(before + missed)
	publish(live, live)
	// What the node tells: the missed updates recovered (a recovered
	// frame, then each; a run of them if some took longer), then the live
	// one. A gap frame fails the test: the broker and the publisher's node
	// hold the updates.
	var told string
	for i := uint64(before); ; {
		m, text, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("after update %d: %v", i, err)
		}
		if text != nil {
			switch text["type"] {
			case "gap":
				t.Fatalf("gap frame %v: the missed updates were not recovered", text)
			case "recovered":
				if to, ok := text["to"].(float64); text["from"] != float64(i) || !ok || to > float64(live-1) {
					t.Fatalf("recovered frame %v, want from %d to at most %d", text, i, live-1)
				}
				told = "recovered"
			case "error":
				t.Fatalf("error frame %v", text)
			}
			continue
		}
		if told == "" {
			t.Fatalf("update %d before the node told what it recovered", m.Index)
		}
		verifyUpdate(t, m, alice.addr, topic, i, payload(i))
		if i == live {
			break
		}
		i++
	}
	t.Logf("restarted node: %d missed updates %s, and the live one delivered, %s after the restart", missed, told, time.Since(restarted).Round(time.Millisecond))
}
