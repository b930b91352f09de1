// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/wsclient"
	"github.com/gorilla/websocket"
)

// TestDevClusterPubSub runs the README's flow on real bee nodes over libp2p
// on loopback: a dev cluster of a broker and three nodes; a WebSocket
// publisher on node-1 reaches WebSocket subscribers on node-2 and node-3, in
// feed mode (the client-signed claim through the session protocol) and in
// the bee-js GSOC mode; a bad claim ends its session with a reason; bee's
// own endpoints answer on the same port; and the pub and sub commands
// round-trip through the info file.
func TestDevClusterPubSub(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four bee nodes")
	}
	info := filepath.Join(t.TempDir(), "cluster.json")
	ready := make(chan devCluster, 1)
	c, err := newCommand(func(c *command) {
		c.homeDir = t.TempDir()
		c.devReady = func(d devCluster) { ready <- d }
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done, out := run(ctx, t, c, "dev", "--nodes", "4", "--info-file", info, "--api-addr", "127.0.0.1:0", "--verbosity", "0")
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Errorf("dev cluster not stopped:\n%s", out)
		}
	}()
	var cl devCluster
	select {
	case cl = <-ready:
	case err := <-done:
		t.Fatalf("dev returned %v:\n%s", err, out)
	case <-time.After(3 * time.Minute):
		t.Fatalf("no cluster after three minutes:\n%s", out)
	}
	broker := cl.Nodes[0].Underlays[0]
	tctx, tcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer tcancel()

	pk, _ := crypto.GenerateSecp256k1Key()
	signer := crypto.NewDefaultSigner(pk)
	admin, _ := signer.EthereumAddress()

	t.Run("feed", func(t *testing.T) {
		topic, _ := crypto.LegacyKeccak256([]byte("e2e-feed"))
		o := wsclient.Options{Peer: broker, Mode: wsclient.Feed, Topic: topic, Admin: admin.Bytes(), Fields: "index,payload"}
		var subs []*wsclient.Session
		for _, n := range cl.Nodes[2:] {
			o.API = n.API
			s, err := wsclient.Subscribe(tctx, o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			subs = append(subs, s)
		}
		o.API, o.Fields = cl.Nodes[1].API, ""
		pub, err := wsclient.PublishFeed(tctx, o, signer, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		for i := range uint64(3) {
			if err := pub.SendFeedUpdate(signer, i, []byte(fmt.Sprint("update ", i))); err != nil {
				t.Fatal(err)
			}
		}
		for j, s := range subs {
			for i := range uint64(3) {
				m := nextBinary(t, tctx, s)
				if m.Index != i || string(m.Payload) != fmt.Sprint("update ", i) {
					t.Fatalf("node %d: got %d %q", j+2, m.Index, m.Payload)
				}
			}
		}
	})

	t.Run("gsoc", func(t *testing.T) {
		id, _ := crypto.LegacyKeccak256([]byte("e2e-gsoc"))
		addr, err := wsclient.GSOCAddress(id, admin.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		o := wsclient.Options{Peer: broker, Mode: wsclient.GSOC, Topic: addr}
		var subs []*wsclient.Session
		for _, n := range cl.Nodes[2:] {
			o.API = n.API
			s, err := wsclient.Subscribe(tctx, o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			subs = append(subs, s)
		}
		o.API = cl.Nodes[1].API
		pub, err := wsclient.PublishGSOC(tctx, o, admin.Bytes(), id)
		if err != nil {
			t.Fatal(err)
		}
		defer pub.Close()
		if err := pub.SendGSOC(signer, id, []byte("gsoc hello")); err != nil {
			t.Fatal(err)
		}
		for j, s := range subs {
			if m := nextBinary(t, tctx, s); string(m.Payload) != "gsoc hello" || len(m.Raw) != 65+8+len("gsoc hello") {
				t.Fatalf("node %d: got %q", j+2, m.Payload)
			}
		}
	})

	t.Run("bad AUTH", func(t *testing.T) {
		topic, _ := crypto.LegacyKeccak256([]byte("e2e-bad-claim"))
		q := url.Values{"peer": {broker}, "binding": {"feed"}, "admin": {hex.EncodeToString(admin.Bytes())}, "addr": {hex.EncodeToString(admin.Bytes())}}
		u := strings.Replace(cl.Nodes[1].API, "http", "ws", 1) + "/pubsub/" + hex.EncodeToString(topic) + "?" + q.Encode()
		ws, resp, err := websocket.DefaultDialer.DialContext(tctx, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		defer ws.Close()
		var req map[string]any
		if err := ws.ReadJSON(&req); err != nil || req["type"] != "challenge" {
			t.Fatalf("first frame %v (%v)", req, err)
		}
		// An AUTH signed by another key: refused by the node (1007), never
		// sent to the broker.
		challenge, _ := hex.DecodeString(req["challenge"].(string))
		sp, err := bps.NewFeedSpec(topic, admin.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		other, _ := crypto.GenerateSecp256k1Key()
		auth, err := sp.Chunk(crypto.NewDefaultSigner(other), admin.Bytes(), pb.Kind_AUTH, challenge, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ws.WriteMessage(websocket.BinaryMessage, append([]byte{byte(pb.Kind_AUTH), 0, 0, 0, 0, 0, 0, 0, 0}, auth.Soc...)); err != nil {
			t.Fatal(err)
		}
		var reason string
		for {
			_, _, err := ws.ReadMessage()
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				if ce.Code != websocket.CloseInvalidFramePayloadData || ce.Text == "" {
					t.Fatalf("closed %d %q, want 1007 with a reason", ce.Code, ce.Text)
				}
				reason = ce.Text
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("bad AUTH closed with %q", reason)
	})

	t.Run("bee endpoints on the same port", func(t *testing.T) {
		for _, p := range []string{"/health", "/addresses", "/balances", "/pubsub/"} {
			if got := status(t, cl.Nodes[1].API+p); got != http.StatusOK {
				t.Errorf("%s: %d", p, got)
			}
		}
	})

	// The README's commands: keygen, sub, then pub twice — the second
	// continues the feed — then a pub the broker must drop (an index it has
	// passed), which fails instead of exiting 0, and one more that
	// continues after it.
	t.Run("cli", func(t *testing.T) {
		keyFile := filepath.Join(t.TempDir(), "publisher.key")
		kc, _ := newCommand(func(c *command) { c.homeDir = t.TempDir() })
		kdone, kout := run(tctx, t, kc, "keygen", "--out", keyFile)
		if err := <-kdone; err != nil {
			t.Fatal(err)
		}
		addr := strings.TrimSpace(kout.String())

		sc, _ := newCommand(func(c *command) { c.homeDir = t.TempDir() })
		sdone, sout := run(tctx, t, sc, "sub", "--cluster", info, "--node", "2", "--topic", "cli", "--admin", addr, "--json", "--count", "4")
		cliTopic, _ := crypto.LegacyKeccak256([]byte("cli"))
		waitHub(t, tctx, cl.Nodes[2].API, hex.EncodeToString(cliTopic))
		pub := func(args ...string) (error, string) {
			pc, _ := newCommand(func(c *command) { c.homeDir = t.TempDir() })
			pdone, pout := run(tctx, t, pc, append([]string{"pub", "--cluster", info, "--node", "1", "--topic", "cli", "--admin", addr, "--key-file", keyFile}, args...)...)
			err := <-pdone
			t.Logf("pub %v: %v\n%s", args, err, pout)
			return err, pout.String()
		}
		if err, out := pub("first", "second"); err != nil || !strings.Contains(out, "2 of 2 messages delivered, indexes 0 to 1") {
			t.Fatalf("pub: %v\n%s", err, out)
		}
		if err, out := pub("third"); err != nil || !strings.Contains(out, "from index 2 (continuing from "+keyFile+".feeds)") {
			t.Fatalf("second pub: %v\n%s", err, out)
		}
		if err, out := pub("--index", "0", "--timeout", "2s", "stale"); err == nil || !strings.Contains(err.Error(), "message 1 (index 0) was not delivered") {
			t.Fatalf("pub of an index the broker has passed: %v, want not delivered\n%s", err, out)
		}
		if err, out := pub("fourth"); err != nil || !strings.Contains(out, "indexes 3 to 3") {
			t.Fatalf("pub after the failed one: %v\n%s", err, out)
		}
		if err := <-sdone; err != nil {
			t.Fatalf("sub: %v\n%s", err, sout)
		}
		if !strings.Contains(sout.String(), "connected to "+cl.Nodes[2].API) || !strings.Contains(sout.String(), "feed mode") {
			t.Errorf("sub did not say it is connected, in which mode:\n%s", sout)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(sout.String()), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["payload"] != nil {
				got = append(got, fmt.Sprint(rec["index"], ":", rec["payload"], ":", rec["owner"]))
			}
		}
		if want := []string{"0:first:" + addr, "1:second:" + addr, "2:third:" + addr, "3:fourth:" + addr}; strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("sub printed %v, want %v", got, want)
		}

		// GSOC mode: confirmed the same way; a repeated message (the same
		// SOC) is dropped by the broker's dedup window and fails pub.
		gc, _ := newCommand(func(c *command) { c.homeDir = t.TempDir() })
		gdone, gout := run(tctx, t, gc, "sub", "--cluster", info, "--node", "2", "--gsoc-id", "cli-gsoc", "--gsoc-owner", addr, "--count", "2")
		gid, _ := crypto.LegacyKeccak256([]byte("cli-gsoc"))
		owner, _ := hex.DecodeString(addr)
		soc, _ := wsclient.GSOCAddress(gid, owner)
		waitHub(t, tctx, cl.Nodes[2].API, hex.EncodeToString(soc))
		gpub := func(args ...string) (error, string) {
			pc, _ := newCommand(func(c *command) { c.homeDir = t.TempDir() })
			pdone, pout := run(tctx, t, pc, append([]string{"pub", "--cluster", info, "--node", "1", "--gsoc-id", "cli-gsoc", "--key-file", keyFile}, args...)...)
			err := <-pdone
			t.Logf("pub %v: %v\n%s", args, err, pout)
			return err, pout.String()
		}
		if err, out := gpub("hello"); err != nil || !strings.Contains(out, "1 of 1 messages delivered") {
			t.Fatalf("GSOC pub: %v\n%s", err, out)
		}
		if err, out := gpub("--timeout", "2s", "hello"); err == nil || !strings.Contains(err.Error(), "was not delivered") {
			t.Fatalf("GSOC pub of a repeated message: %v, want not delivered\n%s", err, out)
		}
		if err, out := gpub("world"); err != nil {
			t.Fatalf("GSOC pub: %v\n%s", err, out)
		}
		if err := <-gdone; err != nil {
			t.Fatalf("GSOC sub: %v\n%s", err, gout)
		}
		if !strings.Contains(gout.String(), "GSOC mode") {
			t.Errorf("sub did not say it chose GSOC mode:\n%s", gout)
		}
		var payloads []string
		for _, l := range strings.Split(strings.TrimSpace(gout.String()), "\n") {
			if l == "hello" || l == "world" {
				payloads = append(payloads, l)
			}
		}
		if strings.Join(payloads, ",") != "hello,world" {
			t.Fatalf("GSOC sub printed %q, want hello then world", gout)
		}
	})
	_ = os.Remove(info)
}

func nextBinary(t *testing.T, ctx context.Context, s *wsclient.Session) wsclient.Message {
	t.Helper()
	for {
		m, text, err := s.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if text == nil {
			return m
		}
	}
}

// waitHub waits until the node's bridge lists a subscriber hub, on topic
// if it is not empty: the sub command has joined. It polls the node's
// listing against a deadline.
func waitHub(t *testing.T, ctx context.Context, api string, topic ...string) {
	t.Helper()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := http.Get(api + "/pubsub/")
		if err == nil {
			var l struct {
				Topics []struct {
					Role         string `json:"role"`
					TopicAddress string `json:"topicAddress"`
				} `json:"topics"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&l)
			resp.Body.Close()
			for _, tp := range l.Topics {
				if tp.Role == "subscriber" && (len(topic) == 0 || strings.EqualFold(strings.TrimPrefix(tp.TopicAddress, "0x"), topic[0])) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatal("the sub command never joined")
		case <-tick.C:
		}
	}
}
