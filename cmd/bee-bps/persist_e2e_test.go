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
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/wsclient"
)

// TestDevClusterPersistence is SWIP-65 persistence and gap recovery on real
// bee nodes (conformance items 1, 3 and 5, without the pot profile): on a
// dev cluster (node-0 the broker), the admin's dApp publishes a feed from
// node-1 in a session naming node-1's postage batch, so node-1 uploads each
// update through bee (stamped, pushed). A subscriber on node-2 that resumes
// at index 0 after a run of publications, and again after it was closed
// and missed more, recovers every missed update from storage — bee's
// retrieval — in index order before the live one that revealed the gap,
// each verified here as a SOC of the admin under the feed id. Node-0's
// stock bee endpoints read the same updates: GET /feeds (the latest, with
// its index), GET /soc and GET /chunks. An index that was never published
// is a gap frame, and the update after it follows. A session naming another
// node's batch gets bee's 404 before the upgrade; the README's pub and sub
// walk-through runs last.
func TestDevClusterPersistence(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three bee nodes")
	}
	cl, ctx, batch := startStampedCluster(t)
	pubNode, subNode, reader := cl.Nodes[1], cl.Nodes[2], cl.Nodes[0]

	alice := newSWIP60Key(t)
	topic := swip60Topic(fmt.Sprintf("e2e-persist-%d", time.Now().UnixNano()))
	// Another node's batch is not node-1's to stamp with: bee's answer,
	// before the upgrade.
	foreign, _ := hex.DecodeString(subNode.Batch)
	o := wsclient.Options{API: pubNode.API, Peer: cl.Nodes[0].Underlays[0], Topic: topic, Binding: wsclient.BindingFeed, Admin: alice.addr, PostageBatch: foreign}
	var he *wsclient.HTTPError
	if _, err := wsclient.PublishFeed(ctx, o, alice.signer, 0); !errors.As(err, &he) || he.StatusCode != http.StatusNotFound || len(he.Reasons) != 1 || !strings.Contains(he.Reasons[0].Error, "issuer does not exist") {
		t.Fatalf("a session naming another node's batch: %v, want bee's 404", err)
	}

	o.PostageBatch = batch
	pub, err := wsclient.PublishFeed(ctx, o, alice.signer, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	payload := func(i uint64) []byte { return fmt.Appendf(nil, "persistent update %d", i) }
	publish := func(from, to uint64) {
		t.Helper()
		for i := from; i <= to; i++ {
			if err := pub.SendFeedUpdate(alice.signer, i, payload(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	so := wsclient.Options{API: subNode.API, Peer: cl.Nodes[0].Underlays[0], Topic: topic, Binding: wsclient.BindingFeed, Admin: alice.addr,
		Fields: "address,identifier,signature,span,index,payload"}
	// expect reads updates from … to on s: those before live announced as
	// recovered first, then live, each verified.
	expect := func(s *wsclient.Session, from, live uint64) {
		t.Helper()
		if from < live {
			f, err := s.Await(ctx, "recovered")
			if err != nil {
				t.Fatal(err)
			}
			if f["from"] != float64(from) || f["to"] != float64(live-1) || f["addr"] != hex.EncodeToString(alice.addr) {
				t.Fatalf("recovered frame %v, want %d-%d", f, from, live-1)
			}
		}
		for i := from; i <= live; i++ {
			m, err := s.NextMessage(ctx)
			if err != nil {
				t.Fatalf("update %d: %v", i, err)
			}
			verifyUpdate(t, m, alice.addr, topic, i, payload(i))
		}
	}

	// stored waits until another node retrieves update i by bee's GET
	// /soc: node-1 uploads in publication order, each after the broker has
	// it, so every update up to i has been broadcast and stored.
	stored := func(i uint64) {
		t.Helper()
		path := fmt.Sprintf("%s/soc/%s/%s", reader.API, hex.EncodeToString(alice.addr), hex.EncodeToString(bps.FeedID(topic, i)))
		if b := getBody(ctx, t, path); !bytes.Equal(b, payload(i)) {
			t.Fatalf("GET /soc of update %d: %q", i, b)
		}
	}

	// A run of persistent publications that only a live watcher on node-2 (a session of its own)
	// follows: the node publishes an update before it uploads it, and
	// reads the dApp's next frame after, so the watcher's arrivals are one
	// upload apart.
	const missed = 20
	watch, err := wsclient.Subscribe(ctx, wsclient.Options{API: cl.Nodes[2].API, Peer: cl.Nodes[0].Underlays[0], Topic: topic, Binding: wsclient.BindingFeed, Admin: alice.addr})
	if err != nil {
		t.Fatal(err)
	}
	publish(0, missed-1)
	arrivals := make([]time.Time, missed)
	for i := range missed {
		if _, err := watch.NextMessage(ctx); err != nil {
			t.Fatal(err)
		}
		arrivals[i] = time.Now()
	}
	gaps := make([]string, 0, missed-1)
	for i := 1; i < missed; i++ {
		gaps = append(gaps, arrivals[i].Sub(arrivals[i-1]).Round(time.Millisecond).String())
	}
	t.Logf("persistent publication (two stamped uploads per update, pushed at once): the first upload on the fresh cluster took %s, then %s per update; arrivals %v apart",
		arrivals[1].Sub(arrivals[0]).Round(time.Millisecond), (arrivals[missed-1].Sub(arrivals[1]) / (missed - 2)).Round(100*time.Microsecond), gaps)
	_ = watch.Close()
	stored(missed - 1)
	resume := uint64(0)
	so.Resume = &resume
	sub, err := wsclient.Subscribe(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	publish(missed, missed)
	expect(sub, 0, missed)
	took := time.Since(began)
	t.Logf("recovered %d updates and the live one in %s: %.0f updates/s", missed, took.Round(time.Millisecond), float64(missed)/took.Seconds())

	// The subscriber goes away, misses three, and comes back at the index
	// it had reached.
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	publish(missed+1, missed+3)
	stored(missed + 3)
	resume = missed + 1
	sub, err = wsclient.Subscribe(ctx, so)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	publish(missed+4, missed+4)
	expect(sub, missed+1, missed+4)

	last := uint64(missed + 4)

	// A stock bee reader on another node: the feed's latest update, one
	// update by its SOC, and that SOC as a chunk.
	owner := hex.EncodeToString(alice.addr)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/feeds/%s/%s", reader.API, owner, hex.EncodeToString(topic)), nil)
	var got []byte
	for {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b := new(bytes.Buffer)
		_, _ = b.ReadFrom(resp.Body)
		resp.Body.Close()
		idx := resp.Header.Get("Swarm-Feed-Index")
		if resp.StatusCode == http.StatusOK && idx == hex.EncodeToString(binary.BigEndian.AppendUint64(nil, last)) {
			got = b.Bytes()
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("GET /feeds: %s, index %q, %q; want index %d", resp.Status, idx, b, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !bytes.Equal(got, payload(last)) {
		t.Fatalf("GET /feeds: %q, want %q", got, payload(last))
	}
	id := bps.FeedID(topic, 7)
	if b := getBody(ctx, t, fmt.Sprintf("%s/soc/%s/%s", reader.API, owner, hex.EncodeToString(id))); !bytes.Equal(b, payload(7)) {
		t.Fatalf("GET /soc of update 7: %q", b)
	}
	addr, err := soc.CreateAddress(id, alice.addr)
	if err != nil {
		t.Fatal(err)
	}
	raw := getBody(ctx, t, reader.API+"/chunks/"+addr.String())
	if s, err := soc.FromChunk(swarm.NewChunk(addr, raw)); err != nil || !bytes.Equal(s.OwnerAddress(), alice.addr) || !bytes.Equal(s.WrappedChunk().Data()[8:], payload(7)) {
		t.Fatalf("GET /chunks of update 7: %v", err)
	}

	// An update that was never published cannot be recovered: the
	// subscriber is told of the gap, then gets the update after it. (After
	// the feed reads: bee's sequence lookup assumes a feed has no holes.)
	skipped := uint64(missed + 5)
	began = time.Now()
	publish(skipped+1, skipped+1)
	g, err := sub.Await(ctx, "gap")
	if err != nil {
		t.Fatal(err)
	}
	if g["from"] != float64(skipped) || g["to"] != float64(skipped) {
		t.Fatalf("gap frame %v, want %d-%d", g, skipped, skipped)
	}
	m, err := sub.NextMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	verifyUpdate(t, m, alice.addr, topic, skipped+1, payload(skipped+1))
	t.Logf("a gap storage cannot fill reported, and the next update handed, %s after it was published", time.Since(began).Round(time.Millisecond))

	t.Run("cli", func(t *testing.T) { persistCLI(t, ctx, cl) })
}

// persistCLI is the README's walk-through on the cluster cl: pub
// --postage-batch-id publishes three messages persistently from node-1;
// sub --from 0 on node-2, started after them, prints them, recovered,
// before the fourth, live.
func persistCLI(t *testing.T, ctx context.Context, cl devCluster) {
	info := filepath.Join(t.TempDir(), "cluster.json")
	b, err := json.Marshal(cl)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(info, b, 0o600); err != nil {
		t.Fatal(err)
	}
	keyHex, admin := cliKey(t)
	topic := fmt.Sprintf("e2e-persist-cli-%d", time.Now().UnixNano())
	common := []string{"--cluster", info, "--admin", admin, "--topic", topic}
	cmd := func(args ...string) (<-chan error, *lockedBuffer) {
		c, err := newCommand(func(c *command) { c.homeDir = t.TempDir() })
		if err != nil {
			t.Fatal(err)
		}
		return run(ctx, t, c, append(args, common...)...)
	}
	wait := func(done <-chan error, out *lockedBuffer, what string) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v\n%s", what, err, out)
			}
		case <-ctx.Done():
			t.Fatalf("%s: %v\n%s", what, ctx.Err(), out)
		}
	}
	done, out := cmd("pub", "--node", "1", "--key", keyHex, "--postage-batch-id", cl.Nodes[1].Batch, "m0", "m1", "m2")
	wait(done, out, "pub m0 m1 m2")

	subDone, subOut := cmd("sub", "--node", "2", "--from", "0", "--count", "4")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !strings.Contains(subOut.String(), "waiting for messages") {
		select {
		case err := <-subDone:
			t.Fatalf("sub ended: %v\n%s", err, subOut)
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("sub never connected:\n%s", subOut)
		}
	}
	done, out = cmd("pub", "--node", "1", "--key", keyHex, "--postage-batch-id", cl.Nodes[1].Batch, "--index", "3", "m3")
	wait(done, out, "pub m3")
	wait(subDone, subOut, "sub")
	got := subOut.String()
	at := strings.Index(got, "updates 0 to 2 of "+strings.TrimPrefix(admin, "0x")+": recovered from storage")
	prev := at
	for _, m := range []string{"m0\n", "m1\n", "m2\n", "m3\n"} {
		i := strings.Index(got, m)
		if at < 0 || i < prev {
			t.Fatalf("sub --from 0 printed, out of order or without the recovery:\n%s", got)
		}
		prev = i
	}
}

// cliKey is a fresh publisher key as pub takes it (hex) and its address.
func cliKey(t *testing.T) (keyHex, addr string) {
	t.Helper()
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	a, err := crypto.NewDefaultSigner(pk).EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := crypto.EncodeSecp256k1PrivateKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(raw), hex.EncodeToString(a.Bytes())
}

// verifyUpdate checks m is update index of owner's feed on topic carrying
// want: bee's soc package rebuilds the SOC from the frame's identifier,
// signature, span and payload, and it must recover owner at m's address
// under the feed id.
func verifyUpdate(t *testing.T, m wsclient.Message, owner, topic []byte, index uint64, want []byte) {
	t.Helper()
	if m.Index != index || !bytes.Equal(m.Payload, want) {
		t.Fatalf("update %d %q, want %d %q", m.Index, m.Payload, index, want)
	}
	// The identifier is the chunk's own (SWIP-74 Rev 8): a recovered
	// update's the channel's id keccak256(topic ‖ index), a live one's its
	// session-feed id under its stream's challenge. Either way it is a
	// valid SOC of owner at its address (below).
	_ = topic
	wrapped, err := cac.NewWithDataSpan(append(bytes.Clone(m.Span), m.Payload...))
	if err != nil {
		t.Fatal(err)
	}
	s, err := soc.NewSigned(m.ID, wrapped, owner, m.Signature)
	if err != nil {
		t.Fatalf("update %d: %v", index, err)
	}
	ch, err := s.Chunk()
	if err != nil || !soc.Valid(ch) || !bytes.Equal(ch.Address().Bytes(), m.Address) {
		t.Fatalf("update %d: not a valid SOC of %x at %x: %v", index, owner, m.Address, err)
	}
}

// startStampedCluster starts a dev cluster of three in a child process
// (stamped uploads race under -race in process, see startDevProcess) and
// waits until node-1's postage batch is usable; it returns the cluster, a
// context bounding the test to three minutes, and node-1's batch.
func startStampedCluster(t *testing.T) (devCluster, context.Context, []byte) {
	t.Helper()
	cl := startDevProcess(t, "--nodes", "3", "--api-addr", "127.0.0.1:0", "--verbosity", "0")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	waitUsableStamp(ctx, t, cl.Nodes[1])
	batch, err := hex.DecodeString(cl.Nodes[1].Batch)
	if err != nil {
		t.Fatal(err)
	}
	return cl, ctx, batch
}
