// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bpsnet

import (
	"bytes"
	"testing"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
)

// ReceiveTimeout bounds how long AssertReceive waits: a deadline for a test
// that has already failed, never a synchronisation. Inside a synctest
// bubble it costs no real time.
const ReceiveTimeout = 20 * time.Second

// Receiver hands out deliveries: a *bps.Subscription, or a *Follower started
// with a Buffer.
type Receiver interface {
	C() <-chan bps.Delivery
}

// AssertReceive fails the test unless the next delivery on r is update index
// carrying payload (nil: any payload), within ReceiveTimeout.
func AssertReceive(t testing.TB, r Receiver, index uint64, payload []byte) bps.Delivery {
	t.Helper()
	timer := time.NewTimer(ReceiveTimeout)
	defer timer.Stop()
	select {
	case d, ok := <-r.C():
		if !ok {
			t.Fatalf("want update %d: %s", index, ended(r))
		}
		if d.Index != index {
			t.Fatalf("received update %d, want %d", d.Index, index)
		}
		if payload != nil && !bytes.Equal(d.Payload(), payload) {
			t.Fatalf("update %d carries %q, want %q", index, d.Payload(), payload)
		}
		return d
	case <-timer.C:
		t.Fatalf("no update %d within %s", index, ReceiveTimeout)
	}
	return bps.Delivery{}
}

// AssertAllReceive is AssertReceive on every receiver.
func AssertAllReceive[R Receiver](t testing.TB, rs []R, index uint64, payload []byte) {
	t.Helper()
	for _, r := range rs {
		AssertReceive(t, r, index, payload)
	}
}

// AssertNeverReceives fails the test if r delivers anything within d. A
// receiver that ends meanwhile has received nothing, which passes. Run it
// inside a synctest bubble, where d costs no real time and "never" means
// "not before every goroutine has had its chance".
func AssertNeverReceives(t testing.TB, r Receiver, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case got, ok := <-r.C():
		if ok {
			t.Fatalf("received update %d, want nothing within %s", got.Index, d)
		}
	case <-timer.C:
	}
}

// ended says why a receiver's channel closed.
func ended(r Receiver) string {
	type errer interface{ Err() error }
	if e, ok := r.(errer); ok && e.Err() != nil {
		return "subscription ended: " + e.Err().Error()
	}
	return "subscription ended"
}
