// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
	"google.golang.org/protobuf/proto"
)

// Sizes of the parts of a SOC frame.
const (
	indexSize     = 8
	idSize        = swarm.HashSize
	sigSize       = swarm.SocSignatureSize
	socFrameMin   = sigSize + swarm.SpanSize // signature ‖ span, empty payload
	socFrameMax   = socFrameMin + swarm.ChunkSize
	bareIndexZero = idSize - indexSize
)

// socField is one field of swarm-soc-fields (SWIP-60 after bee #5497, plus
// SWIP-65's index).
type socField byte

const (
	fieldAddress         socField = iota // 32: the SOC address
	fieldRecoveredPubKey                 // 33: the owner's compressed public key
	fieldIdentifier                      // 32: the signed SOC id
	fieldSignature                       // 65: r ‖ s ‖ v
	fieldWrappedAddress                  // 32: the wrapped chunk's address
	fieldSpan                            // 8: little-endian
	fieldPayload                         // the rest: last if present
	fieldIndex                           // 8: big-endian feed index (FEED_TOPIC only)
)

var socFieldNames = []string{"address", "recoveredPubKey", "identifier", "signature", "wrappedAddress", "span", "payload", "index"}

func (f socField) String() string { return socFieldNames[f] }

// defaultFields is what a delivery frame carries without swarm-soc-fields:
// the GSOC client's signature ‖ span ‖ payload, else SWIP-60's payload.
func defaultFields(gsoc bool) []socField {
	if gsoc {
		return []socField{fieldSignature, fieldSpan, fieldPayload}
	}
	return []socField{fieldPayload}
}

// parseSOCFields reads swarm-soc-fields: comma-separated names (case does not
// matter), each at most once, concatenated in the order given; payload, the
// one field of variable length, must come last.
func parseSOCFields(s string, feed bool) ([]socField, error) {
	var out []socField
	seen := make(map[socField]bool)
	for part := range strings.SplitSeq(s, ",") {
		name := strings.TrimSpace(part)
		f, ok := socField(0), false
		for i, n := range socFieldNames {
			if strings.EqualFold(n, name) {
				f, ok = socField(i), true
				break
			}
		}
		switch {
		case !ok:
			return nil, fmt.Errorf("unknown field %q: want %s", name, strings.Join(socFieldNames, ", "))
		case seen[f]:
			return nil, fmt.Errorf("field %s given twice", f)
		case f == fieldIndex && !feed:
			return nil, errors.New("index only with binding=feed")
		case seen[fieldPayload]:
			return nil, errors.New("payload must be the last field")
		}
		seen[f] = true
		out = append(out, f)
	}
	return out, nil
}

// fieldsKey names a field list, to encode a delivery once per distinct list.
func fieldsKey(fields []socField) string {
	b := make([]byte, len(fields))
	for i, f := range fields {
		b[i] = byte(f)
	}
	return string(b)
}

// encodeFields encodes the delivery v views as fields: each field's bytes
// in order, payload last.
func encodeFields(v *session.View, fields []socField) ([]byte, error) {
	d := v.Delivery()
	var b []byte
	for _, f := range fields {
		switch f {
		case fieldAddress:
			b = append(b, d.Address.Bytes()...)
		case fieldIdentifier:
			b = append(b, v.Identifier()...)
		case fieldSignature:
			b = append(b, d.Signature()...)
		case fieldSpan:
			b = append(b, d.Span()...)
		case fieldPayload:
			b = append(b, d.Payload()...)
		case fieldIndex:
			b = binary.BigEndian.AppendUint64(b, d.Index)
		case fieldRecoveredPubKey, fieldWrappedAddress:
			s, err := v.SOC()
			if err != nil {
				return nil, fmt.Errorf("parse delivery: %w", err)
			}
			if f == fieldRecoveredPubKey {
				b = append(b, s.OwnerPubKey()...)
			} else {
				b = append(b, s.WrappedChunk().Address().Bytes()...)
			}
		}
	}
	return b, nil
}

// errInvalidFrame marks a dApp frame that is not a valid publication.
var errInvalidFrame = errors.New("invalid frame")

// Sizes of the prefix of an inbound frame (docs/api.md).
const (
	kindSize    = 1
	headerSize  = kindSize + indexSize // kind(1) ‖ index(8, BE)
	socMin      = idSize + socFrameMin // id ‖ signature ‖ span
	socMax      = idSize + socFrameMax
	storageSize = sigSize // a persistent DATA frame's storage signature
)

// inFrame is a dApp's binary frame, parsed: the Broadcast the node sends
// (its challenge set by the session: the stream's) and, for a persistent
// DATA frame under a session feed, the signature of the update for storage
// (SWIP-65 on Rev 8).
type inFrame struct {
	b          *pb.Broadcast
	storageSig []byte
}

// parse reads a dApp's binary frame. Every session with a binding sends
// kind(1) ‖ index(8, BE) ‖ soc, soc = id(32) ‖ signature(65) ‖ span(8, LE)
// ‖ payload — a persistent session's DATA frame under a session feed
// (explicit authorship, ALL) with the storage signature(65) before the soc;
// under implicit authorship the kind is DATA and the id the binding's own.
// The GSOC client sends signature(65) ‖ span(8, LE) ‖ payload under its id.
// It checks the layout only: signatures are the session's (Spec.Verify).
func (p *plan) parse(frame []byte) (*inFrame, error) {
	if p.gsoc {
		if len(frame) < socFrameMin || len(frame) > socFrameMax {
			return nil, fmt.Errorf("%w: %d bytes, want signature(65) ‖ span(8) ‖ payload(≤4096)", errInvalidFrame, len(frame))
		}
		return &inFrame{b: &pb.Broadcast{Kind: pb.Kind_DATA, Soc: append(bytes.Clone(p.id), frame...)}}, nil
	}
	if len(frame) < headerSize {
		return nil, fmt.Errorf("%w: %d bytes, want kind(1) ‖ index(8) ‖ soc", errInvalidFrame, len(frame))
	}
	kind, index := pb.Kind(frame[0]), binary.BigEndian.Uint64(frame[kindSize:headerSize])
	rest := frame[headerSize:]
	f := &inFrame{b: &pb.Broadcast{Kind: kind, Index: index}}
	switch kind {
	case pb.Kind_DATA:
		if p.batch != nil && p.salted() {
			if len(rest) < storageSize {
				return nil, fmt.Errorf("%w: a persistent DATA frame is kind(1) ‖ index(8) ‖ storage signature(65) ‖ soc", errInvalidFrame)
			}
			f.storageSig, rest = rest[:storageSize], rest[storageSize:]
		}
	case pb.Kind_AUTH:
		if index != 0 {
			return nil, fmt.Errorf("%w: an AUTH at index %d: AUTH is sent at index 0", errInvalidFrame, index)
		}
	case pb.Kind_ROSTER, pb.Kind_EOS:
		if !p.isAdmin() || !p.spec.Explicit() {
			return nil, fmt.Errorf("%w: a %s frame: only the admin's publishing session sends ROSTER and EOS", errInvalidFrame, kind)
		}
	default:
		return nil, fmt.Errorf("%w: kind %d: want DATA (1), AUTH (2), ROSTER (3) or EOS (4)", errInvalidFrame, frame[0])
	}
	if p.spec.Implicit() && kind != pb.Kind_DATA {
		return nil, fmt.Errorf("%w: a %s frame under implicit authorship: only DATA", errInvalidFrame, kind)
	}
	if len(rest) < socMin || len(rest) > socMax {
		return nil, fmt.Errorf("%w: a soc of %d bytes, want id(32) ‖ signature(65) ‖ span(8) ‖ payload(≤4096)", errInvalidFrame, len(rest))
	}
	f.b.Soc = bytes.Clone(rest)
	return f, nil
}

// verify checks b as a broker checks it on a stream publishing as addr
// under challenge (bps.Spec.Verify: the kind, the session-feed id, or the
// binding's own under implicit authorship, a valid signature by addr, what
// the kind fixes), so the node never sends a frame the broker would count
// against it — enough of those and the broker blocklists the node.
func (p *plan) verify(b *pb.Broadcast, challenge []byte) error {
	if p.salted() {
		b.Challenge = challenge
	}
	if err := p.spec.Verify(b, p.addr, challenge); err != nil {
		return fmt.Errorf("%w: not a %s of %x on this stream (%w)", errInvalidFrame, b.Kind, p.addr, err)
	}
	return nil
}

// storageUpdate is the SWIP-65 update for storage of a persistent DATA
// frame: under a session feed the same wrapped payload under the channel's
// own id keccak256(topic ‖ index), signed by addr with storageSig —
// checked here, before anything is sent; under implicit authorship the
// chunk itself. It returns the id, signature and span ‖ payload to upload.
func (p *plan) storageUpdate(f *inFrame) (id, sig, data []byte, err error) {
	soc0 := f.b.Soc
	data = soc0[idSize+sigSize:]
	if f.storageSig == nil {
		return soc0[:idSize], soc0[idSize : idSize+sigSize], data, nil
	}
	id = bps.FeedID(p.spec.Topic, f.b.Index)
	addr, err := soc.CreateAddress(id, p.addr)
	if err != nil {
		return nil, nil, nil, err
	}
	chunk := make([]byte, 0, idSize+sigSize+len(data))
	chunk = append(append(append(chunk, id...), f.storageSig...), data...)
	s, err := soc.FromChunk(swarm.NewChunk(addr, chunk))
	if err != nil || !bytes.Equal(s.OwnerAddress(), p.addr) {
		return nil, nil, nil, fmt.Errorf("%w: the storage signature is not %x's over keccak256(topic ‖ %d) and the payload", errInvalidFrame, p.addr, f.b.Index)
	}
	return id, f.storageSig, data, nil
}

// Text frames of the session protocol (docs/api.md). Hex strings carry no
// 0x prefix; the node accepts either from the dApp.
const (
	typeChallenge = "challenge"
	typeReady     = "ready"
	typeWaiting   = "waiting"
	typeStale     = "stale"
	typeService   = "service"
	typeError     = "error"
)

// challengeFrame hands a publishing session under a session feed
// (explicit authorship, ALL) the challenge of its stream's join seq: the
// dApp signs every chunk under it (SWIP-74 Rev 8), under explicit
// authorship an AUTH first.
type challengeFrame struct {
	Type      string `json:"type"`
	Challenge string `json:"challenge"`
	Seq       int    `json:"seq"`
	Topic     string `json:"topic"`
	Addr      string `json:"addr"`
	Broker    string `json:"broker"`
}

// readyFrame tells the dApp the session is set up: a subscriber receives from
// now on, a publisher may send.
type readyFrame struct {
	Type      string  `json:"type"`
	Role      string  `json:"role"` // "subscriber" or "publisher"
	Topic     string  `json:"topic"`
	Binding   string  `json:"binding"`
	Broker    string  `json:"broker"`
	Addr      string  `json:"addr,omitempty"`
	Index     *uint64 `json:"index,omitempty"`     // the dApp's own cursor hint, echoed
	Challenge string  `json:"challenge,omitempty"` // a session feed's: the challenge the session publishes under
	Seq       int     `json:"seq,omitempty"`       // and its stream's join
	Fields    string  `json:"fields"`              // the swarm-soc-fields in effect
}

// waitingFrame tells a publishing session that it may not publish yet, or
// no longer: its address is not in the roster, or a roster revoked it. A
// later ready frame ends the wait.
type waitingFrame struct {
	Type   string `json:"type"`
	Addr   string `json:"addr"`
	Reason string `json:"reason"`
}

// staleFrame answers a frame signed under a challenge that is not the
// stream's now: it was not sent; the dApp re-signs the same payload at the
// same index under the challenge of join seq and sends it again.
type staleFrame struct {
	Type  string `json:"type"`
	Kind  string `json:"kind"`
	Index uint64 `json:"index"`
	Seq   int    `json:"seq"`
}

// serviceFrame is a service chunk of the admin's (SWIP-60 rev 14), as the
// node verified it: a roster, or the end of the channel. gap reports
// rosters the node never received before this one (a liveness fault:
// withholding).
type serviceFrame struct {
	Type       string   `json:"type"`
	Kind       string   `json:"kind"` // "ROSTER" or "EOS"
	Index      uint64   `json:"index"`
	Publishers []string `json:"publishers"` // hex addresses, the admin not included
	Gap        bool     `json:"gap"`
}

func newServiceFrame(svc *bps.ServiceMsg, gap bool) []byte {
	f := serviceFrame{Type: typeService, Kind: svc.Kind.String(), Index: svc.Index, Publishers: make([]string, len(svc.Publishers)), Gap: gap}
	for i, p := range svc.Publishers {
		f.Publishers[i] = hex.EncodeToString(p)
	}
	b, _ := json.Marshal(f) // cannot fail: strings, a number, a bool
	return b
}

// errorFrame precedes the close frame of a session the node ends for a
// reason the dApp should see in full (a close reason is at most 123 bytes).
type errorFrame struct {
	Type   string `json:"type"`
	Reason string `json:"reason"`
}

// controlIn is a text frame from the dApp: none is defined (the claim
// frames of rev 3 are gone); its type names it in the refusal.
type controlIn struct {
	Type string `json:"type"`
}

func fieldNames(fields []socField) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.String()
	}
	return strings.Join(names, ",")
}

// serviceBody is the body of POST /pubsub/{topic}/service: a ROSTER or EOS
// the admin's dApp signed under the challenge of the admin's stream.
type serviceBody struct {
	Kind      string  `json:"kind"`
	Index     *uint64 `json:"index"`
	Challenge string  `json:"challenge"`
	SOC       string  `json:"soc"`
}

// serviceChunk checks a posted service chunk of sp as the broker will on
// the admin's stream whose challenge it names, and returns it with what it
// says: 400 for what is not one.
func serviceChunk(sp *bps.Spec, body []byte) (*pb.Broadcast, *bps.ServiceMsg, error) {
	var in serviceBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, nil, fmt.Errorf(`want {"kind":"ROSTER"|"EOS","index":N,"challenge":"<hex>","soc":"<hex>"}: %w`, err)
	}
	b := &pb.Broadcast{}
	switch in.Kind {
	case "ROSTER":
		b.Kind = pb.Kind_ROSTER
	case "EOS":
		b.Kind = pb.Kind_EOS
	default:
		return nil, nil, fmt.Errorf("kind %q: want ROSTER or EOS", in.Kind)
	}
	if in.Index == nil {
		return nil, nil, errors.New("index: required")
	}
	b.Index = *in.Index
	var err error
	if b.Challenge, err = decodeHex(in.Challenge); err != nil || len(b.Challenge) != 32 {
		return nil, nil, fmt.Errorf("challenge: want 32 bytes of hex (the admin stream's challenge)")
	}
	if b.Soc, err = decodeHex(in.SOC); err != nil || len(b.Soc) < socMin || len(b.Soc) > socMax {
		return nil, nil, fmt.Errorf("soc: want the hex of id(32) ‖ signature(65) ‖ span(8) ‖ payload(≤4096)")
	}
	if err := sp.Verify(b, sp.Admin, b.Challenge); err != nil {
		return nil, nil, fmt.Errorf("not a %s of the admin %x under that challenge (%w)", b.Kind, sp.Admin, err)
	}
	svc := &bps.ServiceMsg{Kind: b.Kind, Index: b.Index}
	if b.Kind == pb.Kind_ROSTER {
		r := new(pb.Roster)
		if err := proto.Unmarshal(b.Soc[socMin:], r); err != nil {
			return nil, nil, fmt.Errorf("a ROSTER's payload is a Roster: %w", err)
		}
		svc.Publishers = r.Publishers
	}
	return b, svc, nil
}
