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

// TestStreamPut: the writer puts a frame in the stream's codec, and tells
// the charge hook a priced frame's price only once it is written.
func TestStreamPut(t *testing.T) {
	frame := encodeFrame(&pb.Message{Address: bytes.Repeat([]byte{1}, 32), Data: []byte("data")})
	peer := swarm.MustParseHexAddress("ca1e9f3938cc1425c6061b96ad9eb93e134dfe8734ad490164ef20af9d1cf59c")
	for _, tc := range []struct {
		name    string
		cd      codec
		price   price
		fail    bool
		charged []price
	}{
		{"bare, unpriced", codecBare, 0, false, nil},
		{"bare, priced", codecBare, 3, false, []price{3}},
		{"envelope, priced", codecEnvelope, 5, false, []price{5}},
		{"priced, the write fails", codecBare, 7, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := &bufStream{fail: tc.fail}
			ps := newPeerStream(st, peer, tc.cd, &Options{QueueLen: 1, WriteTimeout: DefaultWriteTimeout})
			var charged []price
			ps.charge = func(p swarm.Address, pr price) {
				if !p.Equal(peer) {
					t.Errorf("charged %s, want %s", p, peer)
				}
				charged = append(charged, pr)
			}
			tm := ps.writeTimer()
			defer tm.Stop()
			f := outFrame{b: frame, kind: kindMessage, price: tc.price}
			last, err := ps.put(tm, f)
			if tc.fail != (err != nil) || last != tc.fail {
				t.Fatalf("put: last %v, err %v", last, err)
			}
			if !tc.fail && !bytes.Equal(st.Bytes(), tc.cd.out(f)) {
				t.Fatalf("wrote %x, want %x", st.Bytes(), tc.cd.out(f))
			}
			if len(charged) != len(tc.charged) || (len(charged) > 0 && charged[0] != tc.charged[0]) {
				t.Fatalf("charged %v, want %v", charged, tc.charged)
			}
		})
	}
}
