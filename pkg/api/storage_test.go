// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/gorilla/websocket"
)

// fakeStorage is a node's Swarm storage in memory: batches with bee's
// refusals, chunks uploaded (each SOC assembled and checked as bee's /soc
// checks it, its wrapped chunk as /chunks stores it).
type fakeStorage struct {
	mu       sync.Mutex
	refusals map[string]error // batch (hex) -> CheckBatch's answer
	fail     error            // Upload's answer, if set
	chunks   map[string][]byte
	uploads  []swarm.Address // SOC addresses, in upload order
	uploaded chan swarm.Address
}

func newFakeStorage() *fakeStorage {
	return &fakeStorage{refusals: make(map[string]error), chunks: make(map[string][]byte), uploaded: make(chan swarm.Address, 64)}
}

func (f *fakeStorage) CheckBatch(_ context.Context, batch []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.refusals[hex.EncodeToString(batch)]
}

func (f *fakeStorage) Upload(_ context.Context, batch []byte, owner, id, sig, data []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return f.fail
	}
	if err := f.refusals[hex.EncodeToString(batch)]; err != nil {
		return err
	}
	wrapped, err := cac.NewWithDataSpan(data)
	if err != nil {
		return err
	}
	s, err := soc.NewSigned(id, wrapped, owner, sig)
	if err != nil {
		return err
	}
	ch, err := s.Chunk()
	if err != nil || !soc.Valid(ch) {
		return errors.New("invalid chunk")
	}
	f.chunks[ch.Address().ByteString()] = ch.Data()
	f.chunks[wrapped.Address().ByteString()] = wrapped.Data()
	f.uploads = append(f.uploads, ch.Address())
	f.uploaded <- ch.Address()
	return nil
}

func (f *fakeStorage) Fetch(_ context.Context, addr swarm.Address) (swarm.Chunk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if d, ok := f.chunks[addr.ByteString()]; ok {
		return swarm.NewChunk(addr, d), nil
	}
	return nil, errors.New("not found")
}

// awaitUpload waits for the next upload and checks it is the SOC at want.
func (f *fakeStorage) awaitUpload(t *testing.T, want swarm.Address) {
	t.Helper()
	select {
	case got := <-f.uploaded:
		if !got.Equal(want) {
			t.Fatalf("uploaded %s, want %s", got, want)
		}
	case <-time.After(waitTimeout):
		t.Fatalf("no upload of %s", want)
	}
}

var (
	goodBatch      = bytes.Repeat([]byte{0xb1}, 32)
	foreignBatch   = bytes.Repeat([]byte{0xf0}, 32)
	exhaustedBatch = bytes.Repeat([]byte{0xee}, 32)
)

// TestPersistBatchRefusedBeforeUpgrade: a session naming a postage batch
// the node cannot stamp with — not its own, exhausted, malformed — or
// naming one without publishing, or on a node without storage, is an HTTP
// status with the reason (bee's, for the batch), never a 101.
func TestPersistBatchRefusedBeforeUpgrade(t *testing.T) {
	t.Parallel()
	st := newFakeStorage()
	st.refusals[hex.EncodeToString(foreignBatch)] = &bps.BatchError{Status: http.StatusNotFound, Reason: "issuer does not exist"}
	st.refusals[hex.EncodeToString(exhaustedBatch)] = &bps.BatchError{Status: http.StatusPaymentRequired, Reason: "batch exhausted"}
	c := newCluster(t, 1, api.Options{Storage: st})
	a := c.clients[0]
	alice := newKey(t)
	q := as(spec(c.broker.addr, "feed", &alice), alice)
	h := func(batch string) http.Header { return http.Header{"Swarm-Postage-Batch-Id": {batch}} }

	refuseWith(t, a, "persist", q, h(hex.EncodeToString(foreignBatch)), http.StatusNotFound, "swarm-postage-batch-id", "issuer does not exist")
	refuseWith(t, a, "persist", q, h(hex.EncodeToString(exhaustedBatch)), http.StatusPaymentRequired, "batch exhausted")
	refuseWith(t, a, "persist", q, h("00ff"), http.StatusBadRequest, "swarm-postage-batch-id")
	refuseWith(t, a, "persist", q, h("zz"+hex.EncodeToString(goodBatch)[2:]), http.StatusBadRequest, "swarm-postage-batch-id")
	refuseWith(t, a, "persist", spec(c.broker.addr, "feed", &alice), h(hex.EncodeToString(goodBatch)), http.StatusBadRequest, "only a publishing session uploads")

	live := newCluster(t, 1, api.Options{})
	refuseWith(t, live.clients[0], "persist", as(spec(live.broker.addr, "feed", &alice), alice), h(hex.EncodeToString(goodBatch)), http.StatusBadRequest, "no storage")
	if len(st.uploads) != 0 {
		t.Fatalf("%d uploads", len(st.uploads))
	}
}

func refuseWith(t *testing.T, n *tnode, topic string, q map[string][]string, h http.Header, code int, want ...string) {
	t.Helper()
	got, msg, _ := refuse(t, n, topic, q, h)
	if got != code {
		t.Fatalf("%d %q, want %d", got, msg, code)
	}
	for _, w := range want {
		if !bytes.Contains([]byte(msg), []byte(w)) {
			t.Fatalf("%d %q, want it to say %q", got, msg, w)
		}
	}
}

// TestPersistUploadsEachUpdate: a publishing session naming a usable batch
// uploads each update it publishes, under the feed id keccak256(topic ‖
// index) the dApp signed (not the bare index the frame carries), with its
// wrapped chunk, after the broker has it; the audience gets each live. An
// upload that fails closes the session with the reason — never a silent
// live-only fallback.
func TestPersistUploadsEachUpdate(t *testing.T) {
	t.Parallel()
	st := newFakeStorage()
	c := newCluster(t, 2, api.Options{Storage: st})
	a, b := c.clients[0], c.clients[1]
	alice := newKey(t)
	topic := keccak([]byte("persist"))
	q := spec(c.broker.addr, "feed", &alice)

	audience := dial(t, b, "persist", q, nil)
	audience.control("ready")
	pub := dial(t, a, "persist", as(q, alice), http.Header{"Swarm-Postage-Batch-Id": {hex.EncodeToString(goodBatch)}})
	claim(t, pub, alice.signer, c.broker.Overlay(), 0)
	pub.control("ready")
	for i := range uint64(3) {
		payload := "update " + string(rune('0'+i))
		pub.persist(i, payload)
		audience.payload(payload)
		want, err := soc.CreateAddress(bps.FeedID(topic, i), alice.addr)
		if err != nil {
			t.Fatal(err)
		}
		st.awaitUpload(t, want)
		ch, err := st.Fetch(context.Background(), want)
		if err != nil {
			t.Fatal(err)
		}
		s, err := soc.FromChunk(ch)
		if err != nil || !bytes.Equal(s.OwnerAddress(), alice.addr) || !bytes.Equal(s.WrappedChunk().Data()[swarm.SpanSize:], []byte(payload)) {
			t.Fatalf("stored update %d: %v", i, err)
		}
		if _, err := st.Fetch(context.Background(), s.WrappedChunk().Address()); err != nil {
			t.Fatalf("wrapped chunk of update %d not stored: %v", i, err)
		}
	}

	st.mu.Lock()
	st.fail = &bps.BatchError{Status: http.StatusPaymentRequired, Reason: "batch exhausted"}
	st.mu.Unlock()
	pub.persist(3, "update 3")
	pub.expectClose(websocket.CloseInternalServerErr, "persist: postage batch: batch exhausted")
}

// TestPersistSubscriberResumes: a subscriber that comes back resumes at the
// index it had reached: the updates it missed, uploaded by the persistent
// publisher on another node, are recovered from storage and handed in index
// order — announced by a `recovered` text frame, then binary frames like
// live ones — before the first live update; one that was never stored is a
// `gap` frame. Without storage, `index` on a subscriber is a 400.
func TestPersistSubscriberResumes(t *testing.T) {
	t.Parallel()
	st := newFakeStorage()
	c := newCluster(t, 3, api.Options{Storage: st})
	a, b, w := c.clients[0], c.clients[1], c.clients[2]
	alice := newKey(t)
	topic := keccak([]byte("resume"))
	q := spec(c.broker.addr, "feed", &alice)
	// A watcher on a node of its own: once it has an update, the broker
	// sent it on, so the subscriber below joins after 0…2 went by (an
	// upload says only that the publisher's node sent it to the broker:
	// joined before the broker sent 2, the subscriber would get 2 live).
	watch := dial(t, w, "resume", q, nil)
	watch.control("ready")

	pub := dial(t, a, "resume", as(q, alice), http.Header{"Swarm-Postage-Batch-Id": {hex.EncodeToString(goodBatch)}})
	claim(t, pub, alice.signer, c.broker.Overlay(), 0)
	pub.control("ready")
	for i := range uint64(3) {
		pub.persist(i, fmt.Sprint("update ", i))
		want, _ := soc.CreateAddress(bps.FeedID(topic, i), alice.addr)
		st.awaitUpload(t, want)
		watch.payload(fmt.Sprint("update ", i))
	}

	rq := spec(c.broker.addr, "feed", &alice)
	rq.Set("index", "0")
	sub := dial(t, b, "resume", rq, nil)
	sub.control("ready")
	pub.persist(3, "update 3")
	if r := sub.control("recovered"); r["from"] != float64(0) || r["to"] != float64(2) || r["addr"] != hex.EncodeToString(alice.addr) {
		t.Fatalf("recovered frame %v", r)
	}
	for i := range 4 {
		sub.payload(fmt.Sprint("update ", i))
	}

	// An update storage no longer holds is missed by a subscriber that
	// resumes before it: a gap, between what it recovers. (It resumes on
	// the publisher's node: the sessions of a cohort on one node share
	// what their recoveries retrieved, and b's kept update 2.)
	lost, _ := soc.CreateAddress(bps.FeedID(topic, 2), alice.addr)
	st.mu.Lock()
	delete(st.chunks, lost.ByteString())
	st.mu.Unlock()
	lq := spec(c.broker.addr, "feed", &alice)
	lq.Set("index", "1")
	late := dial(t, a, "resume", lq, nil)
	late.control("ready")
	pub.persist(4, "update 4")
	sub.payload("update 4")
	if r := late.control("recovered"); r["from"] != float64(1) || r["to"] != float64(1) {
		t.Fatalf("recovered frame %v", r)
	}
	late.payload("update 1")
	if g := late.control("gap"); g["from"] != float64(2) || g["to"] != float64(2) {
		t.Fatalf("gap frame %v", g)
	}
	late.control("recovered")
	late.payload("update 3")
	late.payload("update 4")

	noStore := newCluster(t, 1, api.Options{})
	nq := spec(noStore.broker.addr, "feed", &alice)
	nq.Set("index", "0")
	refuseWith(t, noStore.clients[0], "resume", nq, nil, http.StatusBadRequest, "index", "no storage")
}

// TestPersistRecoveryBurst: a recovery hands its updates as a burst larger
// than the session's queue; the node waits for the dApp to read rather than
// closing it as a slow consumer.
func TestPersistRecoveryBurst(t *testing.T) {
	t.Parallel()
	st := newFakeStorage()
	c := newCluster(t, 3, api.Options{Storage: st, SessionQueue: 2})
	a, b, w := c.clients[0], c.clients[1], c.clients[2]
	alice := newKey(t)
	topic := keccak([]byte("burst"))
	q := spec(c.broker.addr, "feed", &alice)
	// A watcher on a node of its own: once it has an update, the broker
	// accepted it, so the late subscriber below joins after all n.
	watch := dial(t, w, "burst", q, nil)
	watch.control("ready")
	pub := dial(t, a, "burst", as(q, alice), http.Header{"Swarm-Postage-Batch-Id": {hex.EncodeToString(goodBatch)}})
	claim(t, pub, alice.signer, c.broker.Overlay(), 0)
	pub.control("ready")
	const n = 12
	for i := range uint64(n) {
		pub.persist(i, fmt.Sprint("update ", i))
		want, _ := soc.CreateAddress(bps.FeedID(topic, i), alice.addr)
		st.awaitUpload(t, want)
		watch.payload(fmt.Sprint("update ", i))
	}
	rq := spec(c.broker.addr, "feed", &alice)
	rq.Set("index", "0")
	sub := dial(t, b, "burst", rq, nil)
	sub.control("ready")
	pub.persist(n, fmt.Sprint("update ", n))
	if r := sub.control("recovered"); r["from"] != float64(0) || r["to"] != float64(n-1) {
		t.Fatalf("recovered frame %v", r)
	}
	for i := range n + 1 {
		sub.payload(fmt.Sprint("update ", i))
	}
}
