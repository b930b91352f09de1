// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"errors"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// bufStream is a p2p.Stream that keeps what is written; fail makes every
// write fail.
type bufStream struct {
	bytes.Buffer
	fail bool
}

func (b *bufStream) Write(p []byte) (int, error) {
	if b.fail {
		return 0, errors.New("write failed")
	}
	return b.Buffer.Write(p)
}
func (*bufStream) Close() error                 { return nil }
func (*bufStream) FullClose() error             { return nil }
func (*bufStream) Reset() error                 { return nil }
func (*bufStream) Headers() p2p.Headers         { return nil }
func (*bufStream) ResponseHeaders() p2p.Headers { return nil }

// TestStreamPut: the writer puts a frame in the stream's codec, prepares the
// charge of a Broadcast before the write and applies it only once written; a
// claim is free.
func TestStreamPut(t *testing.T) {
	frame := encodeFrame(&pb.Broadcast{Soc: bytes.Repeat([]byte{1}, 120), Kind: pb.Kind_DATA})
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	for _, tc := range []struct {
		name     string
		cd       codec
		kind     frameKind
		fail     bool
		prepared int
		applied  []uint64
	}{
		{"envelope, a lease", codecEnvelope, kindLease, false, 0, nil},
		{"bare, a message", codecBare, kindBroadcast, false, 1, []uint64{5}},
		{"envelope, a message", codecEnvelope, kindBroadcast, false, 1, []uint64{5}},
		{"envelope, a claim", codecEnvelope, kindLease, false, 0, nil},
		{"a message, the write fails", codecBare, kindBroadcast, true, 0, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &bufStream{fail: tc.fail}
			ps := newPeerStream(st, peer, tc.cd, &Options{Bounds: Bounds{QueueLen: 1}, Timing: Timing{WriteTimeout: DefaultWriteTimeout}})
			acc := new(recAccounting)
			ps.meter.Store(meterParent(acc, peer, 5))
			tm := ps.writeTimer()
			defer tm.Stop()
			f := outFrame{b: frame, kind: tc.kind}
			last, err := ps.put(tm, f)
			if tc.fail != (err != nil) || last != tc.fail {
				t.Fatalf("put: last %v, err %v", last, err)
			}
			if !tc.fail && !bytes.Equal(st.Bytes(), tc.cd.out(f)) {
				t.Fatalf("wrote %x, want %x", st.Bytes(), tc.cd.out(f))
			}
			if tc.cd == codecEnvelope && tc.kind == kindBroadcast {
				// Charged by the child's receipt (receipt.go).
				if err := ps.receipt(&pb.Receipt{Taken: 1}); err != nil {
					t.Fatalf("receipt: %v", err)
				}
			}
			ps.meter.Load().done() // applies what the meter held
			prepared, applied, cleaned := acc.record()
			if len(prepared) != tc.prepared || len(applied) != len(tc.applied) || (len(applied) > 0 && applied[0] != tc.applied[0]) || cleaned != tc.prepared {
				t.Fatalf("prepared %v, applied %v, released %d; want %d prepared, %v applied", prepared, applied, cleaned, tc.prepared, tc.applied)
			}
		})
	}
}
