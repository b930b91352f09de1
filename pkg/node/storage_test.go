// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// beeAnswers is a stand-in for bee's API handler that records the requests
// Storage makes and answers each path as configured.
type beeAnswers struct {
	mu       sync.Mutex
	requests []string // "METHOD path batch deferred body"
	stamp    any      // GET /stamps/{id}: a JSON body (200), or an int status (bee's refusal)
	post     int      // POST status
	chunk    []byte   // GET /chunks body; nil: 404
}

func (b *beeAnswers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.requests = append(b.requests, strings.Join([]string{r.Method, r.URL.RequestURI(), r.Header.Get("Swarm-Postage-Batch-Id"), r.Header.Get("Swarm-Deferred-Upload"), string(body)}, " "))
	b.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/stamps/"):
		if code, ok := b.stamp.(int); ok {
			jsonhttp.Respond(w, code, "issuer does not exist")
			return
		}
		jsonhttp.OK(w, b.stamp)
	case r.Method == http.MethodPost:
		if b.post != http.StatusCreated {
			jsonhttp.Respond(w, b.post, "batch not usable yet or does not exist")
			return
		}
		jsonhttp.Created(w, map[string]string{"reference": swarm.ZeroAddress.String()})
	case strings.HasPrefix(r.URL.Path, "/chunks/"):
		if b.chunk == nil {
			jsonhttp.NotFound(w, "chunk not found")
			return
		}
		_, _ = w.Write(b.chunk)
	}
}

// TestStorageThroughBeesHandler: Storage asks bee's own handler — GET
// /stamps/{id} to judge a batch (bee's refusal passed on, an unusable
// batch a 400, an exhausted immutable one a 402), POST /chunks and POST
// /soc/{owner}/{id}?sig= stamped with the batch and pushed at once to
// upload, GET /chunks/{address} to retrieve (404: ErrNotStored).
func TestStorageThroughBeesHandler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	batch := bytes.Repeat([]byte{0xba}, 32)
	status := func(err error) int {
		var se *StorageError
		if !errors.As(err, &se) {
			t.Fatalf("%v: not a *StorageError", err)
		}
		return se.StatusCode()
	}

	for _, tc := range []struct {
		name  string
		stamp any
		want  int
	}{
		{"usable", map[string]any{"usable": true, "exists": true, "depth": 20, "bucketDepth": 16, "utilization": 3}, 0},
		{"not the node's", http.StatusNotFound, http.StatusNotFound},
		{"not usable", map[string]any{"usable": false, "exists": true}, http.StatusBadRequest},
		{"exhausted", map[string]any{"usable": true, "exists": true, "immutableFlag": true, "depth": 17, "bucketDepth": 16, "utilization": 2}, http.StatusPaymentRequired},
		{"full but mutable", map[string]any{"usable": true, "exists": true, "depth": 17, "bucketDepth": 16, "utilization": 2}, 0},
	} {
		b := &beeAnswers{stamp: tc.stamp}
		err := (&Storage{bee: b}).CheckBatch(ctx, batch)
		if (tc.want == 0) != (err == nil) || (err != nil && status(err) != tc.want) {
			t.Fatalf("%s: %v, want status %d", tc.name, err, tc.want)
		}
		if want := "GET /stamps/" + hex.EncodeToString(batch); !strings.HasPrefix(b.requests[0], want) {
			t.Fatalf("%s: asked %q", tc.name, b.requests[0])
		}
	}

	b := &beeAnswers{post: http.StatusCreated}
	st := &Storage{bee: b}
	owner, id, sig := bytes.Repeat([]byte{1}, 20), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 65)
	if err := st.Upload(ctx, batch, owner, id, sig, []byte("span+payload")); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(b.requests, "\n")
	for _, want := range []string{
		"POST /chunks " + hex.EncodeToString(batch) + "  span+payload",
		"POST /soc/" + hex.EncodeToString(owner) + "/" + hex.EncodeToString(id) + "?sig=" + hex.EncodeToString(sig) + " " + hex.EncodeToString(batch) + " false span+payload",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("requests\n%s\nwant %q", got, want)
		}
	}
	b.post = http.StatusUnprocessableEntity
	if err := st.Upload(ctx, batch, owner, id, sig, nil); err == nil || status(err) != http.StatusUnprocessableEntity || !strings.Contains(err.Error(), "batch not usable") {
		t.Fatalf("upload refused by bee: %v", err)
	}

	addr := swarm.RandAddress(t)
	if _, err := st.Fetch(ctx, addr); !errors.Is(err, ErrNotStored) {
		t.Fatalf("fetch of a missing chunk: %v", err)
	}
	b.chunk = []byte("chunk data")
	if ch, err := st.Fetch(ctx, addr); err != nil || !ch.Address().Equal(addr) || string(ch.Data()) != "chunk data" {
		t.Fatalf("fetch: %v %v", ch, err)
	}
}
