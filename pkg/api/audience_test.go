// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
)

// TestTopicsAudience: GET /pubsub/ says what bounds the node's audience as
// a broker — its own BPS bounds and bee's.
func TestTopicsAudience(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{})
	resp, err := http.Get(c.clients[0].srv.URL + "/pubsub/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Audience map[string]int `json:"audience"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"streamsPerCohort":    bps.DefaultMaxStreamsPerCohort,
		"publishersPerCohort": bps.DefaultMaxPublisherStreams,
		"cohorts":             bps.DefaultMaxCohorts,
		"cohortsPerPeer":      bps.DefaultMaxCohortsPerPeer,
		"lightNodes":          100,
		"fullNodesPerBin":     18,
	}
	if len(body.Audience) != len(want) {
		t.Fatalf("audience %v: want %v", body.Audience, want)
	}
	for k, v := range want {
		if got, ok := body.Audience[k]; !ok || got != v {
			t.Errorf("audience.%s = %d (present %t), want %d", k, got, ok, v)
		}
	}
}
