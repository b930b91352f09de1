// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package owned_test

import (
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/internal/owned"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestGroup(t *testing.T) {
	var g owned.Group
	release := make(chan struct{})
	if !g.Go(func() { <-release }) {
		t.Fatal("Go refused on an open group")
	}
	if !g.Close() {
		t.Fatal("first Close reported closed already")
	}
	if g.Close() {
		t.Fatal("second Close reported open")
	}
	if !g.Closed() {
		t.Fatal("Closed is false after Close")
	}
	if g.Go(func() { t.Error("ran after Close") }) || g.Track() {
		t.Fatal("a closed group took a goroutine")
	}
	if g.Wait(time.Millisecond) {
		t.Fatal("Wait reported done while a goroutine runs")
	}
	close(release)
	if !g.Wait(time.Minute) {
		t.Fatal("Wait timed out after the goroutine ended")
	}
}
