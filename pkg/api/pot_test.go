// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/pot"
	"github.com/gorilla/websocket"
)

// potPayloads are n pot-profile payloads whose values are "update i".
func potPayloads(t *testing.T, n int) [][]byte {
	t.Helper()
	var out [][]byte
	var prev []byte
	for i := range n {
		p, err := bps.PotNext(prev, uint64(1000+i), []byte(fmt.Sprint("update ", i)))
		if err != nil {
			t.Fatal(err)
		}
		out, prev = append(out, p), p
	}
	return out
}

// TestPotProfileSessions (SWIP-65 conformance items 2 and 3 on the bridge):
// a persistent publisher with pot=true publishes the pot; a late joiner of
// the history cohort gets the whole history recovered by descent from the
// first update it sees — its wrapped chunks only, no SOC retrieved — in
// order, before it; a frame that is not the next node of the session's pot
// closes the publishing session.
func TestPotProfileSessions(t *testing.T) {
	t.Parallel()
	st := newFakeStorage()
	accepted4 := make(chan struct{})
	var once sync.Once
	tracer := bps.TracerFunc(func(e bps.Event) {
		if e.Kind == bps.EventAccept && e.Index == 4 {
			once.Do(func() { close(accepted4) })
		}
	})
	c := newClusterWith(t, 2, api.Options{Storage: st}, bps.Options{Deps: bps.Deps{Tracer: tracer}}, bps.Options{})
	a, b := c.clients[0], c.clients[1]
	alice := newKey(t)
	topic := keccak([]byte("pot"))
	q := spec(c.broker.addr, "feed", &alice, "history", "true", "pot", "true")

	pub := dial(t, a, "pot", as(q, alice), http.Header{"Swarm-Postage-Batch-Id": {hex.EncodeToString(goodBatch)}})
	claim(t, pub, alice.signer, c.broker.Overlay(), 0)
	pub.control("ready")
	payloads := potPayloads(t, 6)
	for i := range uint64(5) {
		pub.persist(i, string(payloads[i]))
		want, _ := soc.CreateAddress(bps.FeedID(topic, i), alice.addr)
		st.awaitUpload(t, want)
	}
	// Storage loses the SOCs: descent needs only the wrapped chunks.
	st.mu.Lock()
	for _, a := range st.uploads {
		delete(st.chunks, a.ByteString())
	}
	st.mu.Unlock()

	// The late session joins after the broker took update 4: all of
	// 0…4 is history to it.
	select {
	case <-accepted4:
	case <-time.After(waitTimeout):
		t.Fatal("the broker did not accept update 4")
	}
	late := dial(t, b, "pot", q, nil)
	late.control("ready")
	pub.persist(5, string(payloads[5]))
	if r := late.control("recovered"); r["from"] != float64(0) || r["to"] != float64(4) {
		for range 8 {
			typ, b, err := late.next()
			t.Logf("next %d %q %v", typ, b[:min(len(b), 80)], err)
		}
		t.Fatalf("recovered frame %v", r)
	}
	for i := range 6 {
		n, err := pot.Decode(late.binary())
		if err != nil || string(n.Value()) != fmt.Sprint("update ", i) {
			t.Fatalf("history element %d: %v", i, err)
		}
	}

	// Not the next node: update 6 over update 4's node.
	wrong, _ := bps.PotNext(payloads[4], 2000, []byte("update 6"))
	pub.persist(6, string(wrong))
	pub.expectClose(websocket.CloseInvalidFramePayloadData, "not the next node")

	// A skipped index: followers could not count along the pot.
	// topic "pot-skip": the dApp signs under the topic its challenge frame names
	pub2 := dial(t, a, "pot-skip", as(q, alice), http.Header{"Swarm-Postage-Batch-Id": {hex.EncodeToString(goodBatch)}})
	claim(t, pub2, alice.signer, c.broker.Overlay(), 0)
	pub2.control("ready")
	pub2.persist(0, string(payloads[0]))
	pub2.persist(2, string(payloads[1]))
	pub2.expectClose(websocket.CloseInvalidFramePayloadData, "publishes every index")
}

// TestPotHistoryRefusals: history needs binding=feed with an admin, a
// publisher in a history cohort must persist, pot needs binding=feed.
func TestPotHistoryRefusals(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{Storage: newFakeStorage()})
	n := c.clients[0]
	alice := newKey(t)
	refuseWith(t, n, "h", spec(c.broker.addr, "anchor", &alice, "history", "true"), nil, http.StatusBadRequest, "history")
	refuseWith(t, n, "h", as(spec(c.broker.addr, "feed", &alice, "history", "true"), alice), nil, http.StatusBadRequest, "swarm-postage-batch-id")
	refuseWith(t, n, "h", spec(c.broker.addr, "mnemonic", &alice, "pot", "true"), nil, http.StatusBadRequest, "pot")
	noStore := newCluster(t, 1, api.Options{})
	refuseWith(t, noStore.clients[0], "h", spec(noStore.broker.addr, "feed", &alice, "history", "true"), nil, http.StatusBadRequest, "history")
}
