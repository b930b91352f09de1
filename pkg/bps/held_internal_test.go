// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"fmt"
	"testing"
	"time"
)

// TestHeldFeedsFairShare: past the bound the feed dropped is the oldest of
// the admin holding the most under the peer holding the most — a victim
// with one feed keeps it against a peer flooding with many admins, and
// against an admin flooding through the victim's own relay.
func TestHeldFeedsFairShare(t *testing.T) {
	t.Parallel()
	from := func(peer, s string) heldFeed { return heldFeed{latest: []byte(s), from: peer} }

	h := newHeldFeeds(4)
	h.put("victim", "admin v", from("relay", "v"))
	for i := range 100 {
		h.put(fmt.Sprint("flood ", i), fmt.Sprint("minted ", i), from("attacker", fmt.Sprint(i)))
	}
	if got := string(h.take("victim").latest); got != "v" {
		t.Fatalf("the victim's feed against another peer's flood: %q", got)
	}
	if n := h.len(); n != 3 {
		t.Fatalf("%d held after the victim's was taken, want 3", n)
	}

	h = newHeldFeeds(4)
	h.put("victim", "admin v", from("relay", "v"))
	for i := range 100 {
		h.put(fmt.Sprint("flood ", i), "admin a", from("relay", fmt.Sprint(i)))
	}
	if got := string(h.take("victim").latest); got != "v" {
		t.Fatalf("the victim's feed against an admin flooding through the same peer: %q", got)
	}
	if got := string(h.take("flood 99").latest); got != "99" {
		t.Fatalf("the newest of the flood was not kept: %q", got)
	}
	if f := h.take("flood 0"); f.latest != nil {
		t.Fatal("the oldest of the flood was kept")
	}
}

// TestEndedSpecsFairShare: the memory of ended cohorts drops a flooding
// peer's own ends — under keys it minted or one admin's — never a victim's
// held under another peer, and stays at its bound.
func TestEndedSpecsFairShare(t *testing.T) {
	t.Parallel()
	e := newEndedSpecs(4, time.Hour)
	e.put("victim", "relay", "admin v", []byte("v"))
	for i := range 100 {
		e.put(fmt.Sprint("flood ", i), "attacker", fmt.Sprint("minted ", i), []byte(fmt.Sprint(i)))
	}
	if got := string(e.get("victim")); got != "v" {
		t.Fatalf("the victim's end against another peer's flood: %q", got)
	}
	if n := e.len(); n != 4 {
		t.Fatalf("%d ends held, bound 4", n)
	}
	if got := string(e.get("flood 99")); got != "99" {
		t.Fatalf("the flood's newest end: %q", got)
	}
	if e.get("flood 0") != nil {
		t.Fatal("the flood's oldest end was kept")
	}
}
