// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// gateStream is a bufStream whose writes wait for open.
type gateStream struct {
	bufStream
	open chan struct{}
}

func (g *gateStream) Write(p []byte) (int, error) {
	<-g.open
	return g.bufStream.Write(p)
}

// TestMemberWriterOnDemand: a child's stream runs no writer while it is
// idle. What is queued while its handler holds the writer role (before the
// Ack) waits; the handler's release starts one writer, which writes it
// after the Ack in one batch and returns; a later frame starts another.
// Once the handler stops the writers, it waits for the one running, and a
// frame queued after that starts none.
func TestMemberWriterOnDemand(t *testing.T) {
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	synctest.Test(t, func(t *testing.T) {
		st := &countStream{}
		ps := newPeerStream(st, peer, codecBare, &Options{Bounds: Bounds{QueueLen: 4}, Timing: Timing{WriteTimeout: DefaultWriteTimeout}})
		var wg sync.WaitGroup
		started := 0 // start runs under wmu, called from this goroutine's offers and release
		ps.heldWriter(func(f func()) bool { started++; wg.Go(f); return true })

		ack, f1, f2, f3 := rawFrame(3, 0xac), rawFrame(4, 1), rawFrame(5, 2), rawFrame(6, 3)
		for _, b := range [][]byte{f1, f2} {
			if !ps.offer(outFrame{b: b}) {
				t.Fatal("queue full")
			}
		}
		synctest.Wait()
		if started != 0 || st.writes != 0 {
			t.Fatalf("before the Ack: %d writers started, %d writes; want none", started, st.writes)
		}
		w := ps.writeTimer()
		if err := ps.write(w, ack); err != nil {
			t.Fatal(err)
		}
		w.Stop()
		if !ps.releaseWriter() {
			t.Fatal("release: no writer started")
		}
		wg.Wait() // the writer returns once the queue is empty
		if started != 1 || st.writes != 2 || !bytes.Equal(st.Bytes(), bytes.Join([][]byte{ack, f1, f2}, nil)) {
			t.Fatalf("after the release: %d writers, %d writes of %x; want 1 writer, the Ack and one batch", started, st.writes, st.Bytes())
		}

		if !ps.offer(outFrame{b: f3}) {
			t.Fatal("queue full")
		}
		wg.Wait()
		if started != 2 || st.writes != 3 || !bytes.HasSuffix(st.Bytes(), f3) {
			t.Fatalf("a later frame: %d writers, %d writes; want 2 and 3", started, st.writes)
		}

		// stopWriter waits for the writer in flight.
		gate := &gateStream{open: make(chan struct{})}
		gs := newPeerStream(gate, peer, codecBare, &Options{Bounds: Bounds{QueueLen: 4}, Timing: Timing{WriteTimeout: DefaultWriteTimeout}})
		gs.heldWriter(func(f func()) bool { wg.Go(f); return true })
		gs.releaseWriter()
		gs.offer(outFrame{b: f1})
		synctest.Wait() // the writer is blocked in its write
		stopped := make(chan error, 1)
		go func() { stopped <- gs.stopWriter() }()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stopWriter returned while a write was in flight")
		default:
		}
		close(gate.open)
		if err := <-stopped; err != nil {
			t.Fatalf("stopWriter: %v", err)
		}
		if !bytes.Equal(gate.Bytes(), f1) {
			t.Fatalf("wrote %x, want %x", gate.Bytes(), f1)
		}
		gs.offer(outFrame{b: f2})
		synctest.Wait()
		if gs.queued() != 1 {
			t.Fatalf("after stopWriter: %d frames queued, want the one offered, unwritten", gs.queued())
		}
		wg.Wait()
	})
}
