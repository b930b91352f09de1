// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// MaxFrameSize bounds one frame on the wire (the uvarint length prefix not
// counted); a larger frame is a violation. A whole chunk with its address and
// framing fits well inside.
const MaxFrameSize = 8 << 10

// readBufferSize is the read buffer per stream. A stream's reader waits in
// a read for as long as the stream lives, with its buffer, and most of its
// frames are read by the other side; so it is small — a length prefix and a
// small frame (an announcement, an ask) or the start of a larger one, whose
// rest bufio reads straight into the frame (readRaw, protodelim), however
// large (up to MaxFrameSize).
const readBufferSize = 64

// errMalformed marks a frame that was read whole but is not what the stream
// may carry — a protocol violation, unlike an I/O error or a clean EOF.
var errMalformed = errors.New("malformed frame")

// frameReader reads uvarint-delimited protobuf frames from a stream with
// protodelim, and tells transport failures apart from malformed frames.
type frameReader struct {
	src ioErrRecorder
	r   *bufio.Reader
	// onFrame, if set, is told every frame readRaw reads whole; its error
	// is readRaw's (charging for depth: pricing.go). Set before the
	// stream's reader starts.
	onFrame func(b []byte) error
}

// ioErrRecorder remembers the first error of the underlying stream, so that a
// decode failure can be told apart from the stream failing under it.
type ioErrRecorder struct {
	r   io.Reader
	err error
}

func (e *ioErrRecorder) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

func newFrameReader(r io.Reader) *frameReader {
	fr := &frameReader{src: ioErrRecorder{r: r}}
	fr.r = bufio.NewReaderSize(&fr.src, readBufferSize)
	return fr
}

// read decodes the next frame into m. It returns io.EOF at a clean end
// between frames, the stream's error if the transport failed, and an error
// wrapping errMalformed if the bytes are not a frame of m's type (too large,
// truncated by the sender's own close, or not decodable).
func (fr *frameReader) read(m proto.Message) error {
	err := protodelim.UnmarshalOptions{MaxSize: MaxFrameSize}.UnmarshalFrom(fr.r, m)
	if err == nil {
		return nil
	}
	if fr.src.err != nil {
		if errors.Is(fr.src.err, io.EOF) {
			if errors.Is(err, io.EOF) {
				return io.EOF // clean end between frames
			}
			return fmt.Errorf("%w: truncated: %w", errMalformed, err)
		}
		return fr.src.err
	}
	return fmt.Errorf("%w: %w", errMalformed, err)
}

// readRaw returns the next frame's bytes, its length prefix stripped, for a
// reader that decides what the frame is only once it has it. Errors are
// classified as read classifies them.
//
// A stream's reader waits here, in the prefix's first ReadByte, for as
// long as the stream lives, so its frame is kept small: the prefix is read
// inline, and the frame and every error are left to functions that are
// not on the stack while it waits. A reader's goroutine whose stack grew
// to 8 KiB (a delivery's check and fan-out) is shrunk back to 4 KiB by the
// GC only if less than 2 KiB of it, Go's 800-byte guard included, is in
// use where it waits.
func (fr *frameReader) readRaw() ([]byte, error) {
	var size uint64
	for i := 0; ; i++ {
		c, err := fr.r.ReadByte()
		if err != nil {
			return nil, fr.prefixFailed(i, err)
		}
		if i == binary.MaxVarintLen64-1 && c > 1 {
			return nil, fr.failed(errVarintOverflow)
		}
		size |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return fr.frame(size)
		}
	}
}

// errVarintOverflow: a length prefix past 64 bits (binary.ReadUvarint's
// error).
var errVarintOverflow = errors.New("varint overflows a 64-bit integer")

// prefixFailed classifies err, met reading byte i of a length prefix: EOF
// before the first byte is a clean end, after it a truncated frame.
//
//go:noinline
func (fr *frameReader) prefixFailed(i int, err error) error {
	if i > 0 && errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fr.failed(err)
}

// frame reads the size bytes of a frame whose prefix was read.
//
//go:noinline
func (fr *frameReader) frame(size uint64) ([]byte, error) {
	if size > MaxFrameSize {
		return nil, fmt.Errorf("%w: frame of %d bytes exceeds %d", errMalformed, size, MaxFrameSize)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(fr.r, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the prefix was read: EOF is mid-frame
		}
		return nil, fr.failed(err)
	}
	if fr.onFrame != nil {
		if err := fr.onFrame(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// failed classifies err, which reading a frame met: io.EOF at a clean end
// between frames, the stream's error if the transport failed, otherwise
// malformed.
func (fr *frameReader) failed(err error) error {
	if fr.src.err != nil {
		if errors.Is(fr.src.err, io.EOF) {
			if errors.Is(err, io.EOF) {
				return io.EOF // clean end between frames
			}
			return fmt.Errorf("%w: truncated: %w", errMalformed, err)
		}
		return fr.src.err
	}
	return fmt.Errorf("%w: %w", errMalformed, err)
}

// decodeFrame decodes frame bytes read by readRaw into m; bytes that are not
// an m are malformed.
func decodeFrame(b []byte, m proto.Message) error {
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: %w", errMalformed, err)
	}
	return nil
}

// encodeFrame encodes m once, with its length prefix, ready to be written to
// any number of streams.
func encodeFrame(m proto.Message) []byte {
	size := proto.Size(m)
	b := make([]byte, 0, protowire.SizeVarint(uint64(size))+size)
	b = protowire.AppendVarint(b, uint64(size))
	b, err := proto.MarshalOptions{}.MarshalAppend(b, m)
	if err != nil {
		panic(fmt.Sprintf("bps: marshal %T: %v", m, err))
	}
	return b
}

// codec is how a stream carries frames after the Ack: bare SWIP-74/60
// frames, or — once both the Join and the Ack set multihop (SWIP-61) —
// each inside the envelope pb.Frame, in both directions. The handshake
// itself (Join, Ack) is always bare.
type codec uint8

const (
	codecBare     codec = iota // SWIP-74 and SWIP-60 peers: no envelope, ever
	codecEnvelope              // both ends speak multihop
)

// negotiated is the codec of a stream whose Join and Ack were join and ack.
func negotiated(join *pb.Join, ack *pb.Ack) codec {
	if join.GetMultihop() && ack.GetMultihop() {
		return codecEnvelope
	}
	return codecBare
}

// frameKind is which frame an outFrame's bare bytes are: the envelope's
// field number for it.
type frameKind uint8

const (
	kindBroadcast  frameKind = 1  // pb.Frame.broadcast
	kindProbe      frameKind = 3  // pb.Frame.probe
	kindReparent   frameKind = 4  // pb.Frame.reparent
	kindCandidates frameKind = 5  // pb.Frame.candidates
	kindLease      frameKind = 9  // pb.Frame.lease
	kindLeased     frameKind = 10 // pb.Frame.leased
	kindRelease    frameKind = 11 // pb.Frame.release
	kindRoute      frameKind = 12 // pb.Frame.route
)

// out is what the stream writes for f: its bare bytes as they are, or
// inside the envelope. A bare frame is uvarint(n) ‖ the frame's n bytes; the
// envelope holding it is those bytes as field kind of a pb.Frame, framed
// again — the same bytes proto.Marshal of the pb.Frame gives, without
// decoding and encoding the frame again for every stream.
func (cd codec) out(f outFrame) []byte {
	if cd == codecBare {
		return f.b
	}
	kind := f.kind
	if kind == 0 {
		kind = kindBroadcast
	}
	n, k := protowire.ConsumeVarint(f.b)
	if k < 0 || uint64(len(f.b)-k) != n {
		panic("bps: out: not a bare frame")
	}
	inner := f.b[k:]
	size := protowire.SizeTag(protowire.Number(kind)) + protowire.SizeBytes(len(inner))
	b := make([]byte, 0, protowire.SizeVarint(uint64(size))+size)
	b = protowire.AppendVarint(b, uint64(size))
	b = protowire.AppendTag(b, protowire.Number(kind), protowire.BytesType)
	b = protowire.AppendBytes(b, inner)
	return b
}

// decodeUp decodes a frame that a child sent up a stream. The envelope says
// what the frame is; which kinds may travel up is the cohort's to judge
// (ingest). After the handshake a bare stream (SWIP-74 Rev 8, SWIP-60 rev
// 14) carries nothing but Broadcasts; what one may send is the cohort's to
// judge by the stream's role.
func (cd codec) decodeUp(b []byte) (*pb.Frame, error) {
	if cd == codecEnvelope {
		f := new(pb.Frame)
		if err := decodeFrame(b, f); err != nil || f.Kind == nil {
			return nil, violationf("not an envelope: %w", err)
		}
		return f, nil
	}
	bc := new(pb.Broadcast)
	if err := decodeFrame(b, bc); err != nil {
		return nil, &violation{err: err}
	}
	return &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: bc}}, nil
}

// decodeDown decodes a frame that a parent sent down a stream: a bare frame
// is a delivery (a Broadcast); the envelope says what it is.
func (cd codec) decodeDown(b []byte) (*pb.Frame, error) {
	if cd == codecEnvelope {
		f := new(pb.Frame)
		if err := decodeFrame(b, f); err != nil {
			return nil, err
		}
		if f.Kind == nil {
			return nil, fmt.Errorf("%w: an empty envelope", errMalformed)
		}
		return f, nil
	}
	bc := new(pb.Broadcast)
	if err := decodeFrame(b, bc); err != nil {
		return nil, err
	}
	return &pb.Frame{Kind: &pb.Frame_Broadcast{Broadcast: bc}}, nil
}
