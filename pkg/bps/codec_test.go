// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// TestCodecNegotiated: the envelope only when both the Join and the Ack set
// multihop; a SWIP-74 or SWIP-60 peer never sees one.
func TestCodecNegotiated(t *testing.T) {
	for _, tc := range []struct {
		join, ack bool
		want      codec
	}{
		{false, false, codecBare},
		{true, false, codecBare},
		{false, true, codecBare},
		{true, true, codecEnvelope},
	} {
		if got := negotiated(&pb.Join{Multihop: tc.join}, &pb.Ack{Multihop: tc.ack}); got != tc.want {
			t.Errorf("join multihop %v, ack multihop %v: codec %d, want %d", tc.join, tc.ack, got, tc.want)
		}
	}
}

// TestCodecOut: a bare frame goes out as it was encoded; in the envelope it
// is exactly the delimited marshal of the pb.Frame holding it, and decodes
// back to it.
func TestCodecOut(t *testing.T) {
	msg := &pb.Broadcast{Challenge: bytes.Repeat([]byte{1}, 32), Soc: bytes.Repeat([]byte{2}, 4200), Kind: pb.Kind_DATA, Index: 7}
	lease := &pb.Lease{Nonce: 7, Addr: bytes.Repeat([]byte{3}, 20)}
	for _, tc := range []struct {
		name  string
		f     outFrame
		frame *pb.Frame
	}{
		{"broadcast", outFrame{b: encodeFrame(msg), kind: kindBroadcast}, &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: msg}}},
		{"broadcast, kind unset", outFrame{b: encodeFrame(msg)}, &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: msg}}},
		{"lease", outFrame{b: encodeFrame(lease), kind: kindLease}, &pb.Frame{Kind: &pb.Frame_Lease{Lease: lease}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := codecBare.out(tc.f); !bytes.Equal(got, tc.f.b) {
				t.Fatal("bare: the frame was re-encoded")
			}
			got := codecEnvelope.out(tc.f)
			if want := encodeFrame(tc.frame); !bytes.Equal(got, want) {
				t.Fatalf("envelope: %x\nwant %x", got, want)
			}
			fr := newFrameReader(bytes.NewReader(got))
			b, err := fr.readRaw()
			if err != nil {
				t.Fatal(err)
			}
			f, err := codecEnvelope.decodeUp(b)
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(f, tc.frame) {
				t.Fatalf("decoded %v, want %v", f, tc.frame)
			}
		})
	}
}

// TestCodecDecodeUp: after the handshake a bare stream carries nothing but
// Broadcasts (Rev 8); bytes that are not one, and an envelope that holds
// nothing, are violations.
func TestCodecDecodeUp(t *testing.T) {
	msg, err := proto.Marshal(&pb.Broadcast{Soc: []byte("data"), Kind: pb.Kind_DATA})
	if err != nil {
		t.Fatal(err)
	}
	if f, err := codecBare.decodeUp(msg); err != nil || f.GetBroadcast() == nil {
		t.Fatalf("bare broadcast: %v, %v", f, err)
	}
	for name, tc := range map[string]struct {
		cd codec
		b  []byte
	}{
		"bare garbage":   {codecBare, []byte{0xff, 0xff}},
		"empty envelope": {codecEnvelope, nil},
	} {
		var v *violation
		if _, err := tc.cd.decodeUp(tc.b); !errors.As(err, &v) {
			t.Errorf("%s: %v, want a violation", name, err)
		}
	}
}

// TestIngestDirection: a frame that may only travel down (a probe, a
// reparent) or answer a probe this node never sent (candidates) ends the
// stream it came up on as a violation, counted wrong_stream.
func TestIngestDirection(t *testing.T) {
	s, err := New(nil, swarm.ZeroAddress, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sp, err := NewFeedSpec(bytes.Repeat([]byte{9}, 32), bytes.Repeat([]byte{8}, 20))
	if err != nil {
		t.Fatal(err)
	}
	c := &cohort{r: s.reg, spec: sp}
	m := &member{c: c}
	for i, f := range []*pb.Frame{
		{Kind: &pb.Frame_Probe{Probe: &pb.Probe{Depth: 1, Nonce: 2}}},
		{Kind: &pb.Frame_Reparent{Reparent: &pb.Reparent{To: bytes.Repeat([]byte{1}, 32)}}},
		{Kind: &pb.Frame_Candidates{Candidates: &pb.Candidates{Nonce: 2}}},
	} {
		var v *violation
		if err := c.ingest(f, m); !errors.As(err, &v) {
			t.Fatalf("%T up: %v, want a violation", f.Kind, err)
		}
		if n := c.counters.snapshot()[CounterWrongStream.String()]; n != uint64(i+1) {
			t.Fatalf("%T up: wrong_stream %d, want %d", f.Kind, n, i+1)
		}
	}
}

// TestCodecDecodeDown: what a parent sends is a delivery on a bare stream;
// the envelope says what it is; bytes that are neither are malformed.
func TestCodecDecodeDown(t *testing.T) {
	msg := &pb.Broadcast{Challenge: bytes.Repeat([]byte{1}, 32), Soc: []byte("data"), Kind: pb.Kind_DATA}
	bare, err := proto.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	probe := &pb.Frame{Kind: &pb.Frame_Probe{Probe: &pb.Probe{Depth: 2, Nonce: 3}}}
	env, err := proto.Marshal(probe)
	if err != nil {
		t.Fatal(err)
	}
	if f, err := codecBare.decodeDown(bare); err != nil || !proto.Equal(f.GetBroadcast(), msg) {
		t.Fatalf("bare: %v, %v; want the message", f, err)
	}
	if f, err := codecEnvelope.decodeDown(env); err != nil || !proto.Equal(f, probe) {
		t.Fatalf("envelope: %v, %v; want the probe", f, err)
	}
	for name, tc := range map[string]struct {
		cd codec
		b  []byte
	}{
		"bare garbage":   {codecBare, []byte{0xff, 0xff}},
		"empty envelope": {codecEnvelope, nil},
	} {
		if _, err := tc.cd.decodeDown(tc.b); !errors.Is(err, errMalformed) {
			t.Errorf("%s: %v, want malformed", name, err)
		}
	}
}

// TestFrameReaderSizes: the small read buffer reads frames of every size up
// to MaxFrameSize whole, back to back, however the stream splits them, and
// a frame past MaxFrameSize is malformed.
func TestFrameReaderSizes(t *testing.T) {
	sizes := []int{0, 1, readBufferSize - 2, readBufferSize - 1, readBufferSize, readBufferSize + 1, 511, 1129, MaxFrameSize - 40, MaxFrameSize}
	var wire []byte
	var want []*pb.Broadcast
	for i, n := range sizes {
		m := &pb.Broadcast{Challenge: bytes.Repeat([]byte{byte(i)}, 32)}
		m.Soc = bytes.Repeat([]byte{byte(i + 1)}, max(0, n-proto.Size(m)-4))
		for proto.Size(m) < n {
			m.Soc = append(m.Soc, byte(i+1))
		}
		if n < proto.Size(m) {
			m = &pb.Broadcast{Soc: bytes.Repeat([]byte{byte(i + 1)}, max(0, n-2))}
		}
		if proto.Size(m) > MaxFrameSize {
			t.Fatalf("frame %d: %d bytes", i, proto.Size(m))
		}
		want = append(want, m)
		wire = append(wire, encodeFrame(m)...)
	}
	for _, split := range []struct {
		name string
		r    func([]byte) io.Reader
	}{
		{"whole", func(b []byte) io.Reader { return bytes.NewReader(b) }},
		{"one byte a read", func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
		{"half a read", func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }},
	} {
		t.Run(split.name+"/raw", func(t *testing.T) {
			fr := newFrameReader(split.r(wire))
			for i, m := range want {
				b, err := fr.readRaw()
				if err != nil {
					t.Fatalf("frame %d (%d bytes): %v", i, proto.Size(m), err)
				}
				got := new(pb.Broadcast)
				if err := decodeFrame(b, got); err != nil || !proto.Equal(got, m) {
					t.Fatalf("frame %d (%d bytes): got %d bytes, %v", i, proto.Size(m), len(b), err)
				}
			}
			if _, err := fr.readRaw(); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last frame: %v, want EOF", err)
			}
		})
		t.Run(split.name+"/decoded", func(t *testing.T) {
			fr := newFrameReader(split.r(wire))
			for i, m := range want {
				got := new(pb.Broadcast)
				if err := fr.read(got); err != nil || !proto.Equal(got, m) {
					t.Fatalf("frame %d (%d bytes): %v", i, proto.Size(m), err)
				}
			}
			if err := fr.read(new(pb.Broadcast)); !errors.Is(err, io.EOF) {
				t.Fatalf("after the last frame: %v, want EOF", err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		wire []byte
		want error
	}{
		{"nothing", nil, io.EOF},
		{"a prefix cut short", []byte{0x80}, errMalformed},
		{"a frame cut short", []byte{3, 1}, errMalformed},
		{"a prefix past 64 bits", bytes.Repeat([]byte{0xff}, 11), errMalformed},
	} {
		if _, err := newFrameReader(bytes.NewReader(tc.wire)).readRaw(); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	big := &pb.Broadcast{Soc: bytes.Repeat([]byte{9}, MaxFrameSize)}
	if _, err := newFrameReader(bytes.NewReader(encodeFrame(big))).readRaw(); !errors.Is(err, errMalformed) {
		t.Fatalf("a frame of %d bytes: %v, want malformed", proto.Size(big), err)
	}
	if err := newFrameReader(bytes.NewReader(encodeFrame(big))).read(new(pb.Broadcast)); !errors.Is(err, errMalformed) {
		t.Fatalf("a frame of %d bytes, decoded: %v, want malformed", proto.Size(big), err)
	}
}
