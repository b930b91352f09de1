// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/pot"
)

// TestPotNextCheck: a publishing node takes, with the pot profile on, only
// the node PotNext makes over the session's previous update: a payload
// that drops a fork, or forks to another update, is refused.
func TestPotNextCheck(t *testing.T) {
	t.Parallel()
	p0, err := bps.PotNext(nil, 1, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	p1, _ := bps.PotNext(p0, 2, []byte("b"))
	p2, _ := bps.PotNext(p1, 3, []byte("c"))
	for _, tc := range []struct {
		name          string
		prev, payload []byte
		ok            bool
	}{
		{"first", nil, p0, true},
		{"next", p0, p1, true},
		{"next again", p1, p2, true},
		{"first, unchecked predecessor", nil, p2, true},
		{"skips one", p0, p2, false},
		{"not a node", p0, []byte("hello"), false},
		{"a fresh pot mid-feed", p1, func() []byte { b, _ := bps.PotNext(nil, 3, []byte("c")); return b }(), false},
	} {
		err := bps.PotCheck(tc.prev, tc.payload)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, bps.ErrNotPotStep) {
			t.Errorf("%s: %v is not ErrNotPotStep", tc.name, err)
		}
	}
	if _, err := bps.PotNext(p1, 2, nil); !errors.Is(err, pot.ErrNotMonotone) {
		t.Errorf("a key not above the previous: %v", err)
	}
	if _, err := bps.PotNext([]byte("hello"), 2, nil); err == nil {
		t.Error("over a payload that is no node")
	}
}

// BenchmarkPotPublish is the publisher's CPU per update of the pot
// profile: PotNext and signing the update (bps.FeedUpdate), against
// signing alone, for a payload of the same size.
func BenchmarkPotPublish(b *testing.B) {
	admin := newKey(b)
	sp, err := bps.NewFeedSpec(topicOf("bench-pot-publish"), admin.addr)
	if err != nil {
		b.Fatal(err)
	}
	value := make([]byte, 1024)
	for _, profile := range []bool{false, true} {
		b.Run(fmt.Sprint("pot=", profile), func(b *testing.B) {
			var prev []byte
			payload := make([]byte, 1024+17+32*8) // the size of a node with 8 forks
			b.ReportAllocs()
			for i := range b.N {
				if profile {
					if prev, err = bps.PotNext(prev, uint64(1_780_000_000_000+1000*i), value); err != nil {
						b.Fatal(err)
					}
					payload = prev
				}
				if _, _, err := bps.StorageUpdate(admin.signer, admin.addr, sp.Topic, uint64(i), payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPotCheck is what the anchor check costs a pot-profile session
// per in-sequence update (bps.PotCheck against the update before it: one
// BMT hash, no retrieval), for a 1 KiB value.
func BenchmarkPotCheck(b *testing.B) {
	value := make([]byte, 1024)
	prev, err := bps.PotNext(nil, 1_780_000_000_000, value)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 { // a pot with forks
		if prev, err = bps.PotNext(prev, uint64(1_780_000_001_000+1000*i), value); err != nil {
			b.Fatal(err)
		}
	}
	next, err := bps.PotNext(prev, 1_780_002_000_000, value)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for range b.N {
		if err := bps.PotCheck(prev, next); err != nil {
			b.Fatal(err)
		}
	}
}
