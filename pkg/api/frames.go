// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
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

// view is one delivery as the sessions of a hub see it: each field is
// computed on first use and each frame once per field list. Used by the
// hub's goroutine only.
type view struct {
	spec   *bps.Spec
	d      bps.Delivery
	id     []byte
	parsed *soc.SOC
	frames map[string][]byte
	echo   *[32]byte
}

func newView(sp *bps.Spec, d bps.Delivery) *view {
	return &view{spec: sp, d: d, frames: make(map[string][]byte, 1)}
}

// identifier is the signed SOC id: the feed id for a feed update (whose id
// slot carries the bare index), else the id slot itself.
func (v *view) identifier() []byte {
	if v.id == nil {
		if v.spec.Binding == pb.TopicBinding_FEED_TOPIC {
			v.id = bps.FeedID(v.spec.Topic, v.d.Index)
		} else {
			v.id = v.d.Data[:idSize]
		}
	}
	return v.id
}

// soc parses the delivery as the SOC it is (one signature recovery); only
// recoveredPubKey and wrappedAddress need it.
func (v *view) soc() (*soc.SOC, error) {
	if v.parsed == nil {
		data := make([]byte, len(v.d.Data))
		copy(data, v.identifier())
		copy(data[idSize:], v.d.Data[idSize:])
		s, err := soc.FromChunk(swarm.NewChunk(v.d.Address, data))
		if err != nil {
			return nil, err
		}
		v.parsed = s
	}
	return v.parsed, nil
}

// echoKey identifies the delivery for the no-echo filter: the chunk address
// and the data as on the wire.
func (v *view) echoKey() [32]byte {
	if v.echo == nil {
		k := echoKey(v.d.Address.Bytes(), v.d.Data)
		v.echo = &k
	}
	return *v.echo
}

// frame is the delivery encoded as fields.
func (v *view) frame(fields []socField) ([]byte, error) {
	key := fieldsKey(fields)
	if b, ok := v.frames[key]; ok {
		return b, nil
	}
	var b []byte
	for _, f := range fields {
		switch f {
		case fieldAddress:
			b = append(b, v.d.Address.Bytes()...)
		case fieldIdentifier:
			b = append(b, v.identifier()...)
		case fieldSignature:
			b = append(b, v.d.Signature()...)
		case fieldSpan:
			b = append(b, v.d.Span()...)
		case fieldPayload:
			b = append(b, v.d.Payload()...)
		case fieldIndex:
			b = binary.BigEndian.AppendUint64(b, v.d.Index)
		case fieldRecoveredPubKey, fieldWrappedAddress:
			s, err := v.soc()
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
	v.frames[key] = b
	return b, nil
}

// errInvalidFrame marks a dApp frame that is not a valid publication.
var errInvalidFrame = errors.New("invalid frame")

// assemble turns a dApp's binary frame into the message the node publishes,
// validated exactly as the broker validates it (bps.Spec.Verify: the
// binding's SOC shape, the signature, addr as the owner), so the node never
// sends a frame the broker would count against it — enough of those and the
// broker blocklists the node. The frame is signature(65) ‖ span(8, LE) ‖
// payload, prefixed per the session's layout:
//
//   - layoutIndex: index(8, BE); signed as update index of addr's feed on
//     the topic (id keccak256(topic ‖ index)), sent with the bare index in
//     the id slot (SWIP-74, SWIP-65).
//   - layoutID: the 32-byte id the dApp signed under.
//   - layoutTopicID, layoutSessionID: nothing; the id is the topic, or the
//     session's.
//
// A service SOC is refused here: it goes through POST
// /pubsub/{topic}/service, so that the node knows the roster it relays.
func (p *plan) assemble(frame []byte) (*pb.Message, error) {
	var slot, id []byte
	switch p.layout {
	case layoutIndex:
		if len(frame) < indexSize {
			return nil, fmt.Errorf("%w: %d bytes, want index(8) ‖ signature(65) ‖ span(8) ‖ payload(≤4096)", errInvalidFrame, len(frame))
		}
		slot = make([]byte, idSize)
		copy(slot[bareIndexZero:], frame[:indexSize])
		id = bps.FeedID(p.spec.Topic, binary.BigEndian.Uint64(frame[:indexSize]))
		frame = frame[indexSize:]
	case layoutID:
		if len(frame) < idSize {
			return nil, fmt.Errorf("%w: %d bytes, want id(32) ‖ signature(65) ‖ span(8) ‖ payload(≤4096)", errInvalidFrame, len(frame))
		}
		slot, id = frame[:idSize], frame[:idSize]
		frame = frame[idSize:]
	case layoutTopicID:
		slot, id = p.spec.Topic, p.spec.Topic
	default:
		slot, id = p.id, p.id
	}
	if len(frame) < socFrameMin || len(frame) > socFrameMax {
		return nil, fmt.Errorf("%w: %d bytes after the prefix, want signature(65) ‖ span(8) ‖ payload(≤4096)", errInvalidFrame, len(frame))
	}
	addr, err := soc.CreateAddress(id, p.addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errInvalidFrame, err)
	}
	data := make([]byte, idSize+len(frame))
	copy(data, slot)
	copy(data[idSize:], frame)
	msg := &pb.Message{Address: addr.Bytes(), Data: data}
	if !p.spec.Implicit() && asService(p.spec, slot, frame[socFrameMin:]) != nil {
		return nil, fmt.Errorf("%w: a service SOC: POST it to /pubsub/{topic}/service", errInvalidFrame)
	}
	if err := p.spec.Verify(msg, p.addr); err != nil {
		return nil, fmt.Errorf("%w: not a publication of %x in this cohort (%w)", errInvalidFrame, p.addr, err)
	}
	return msg, nil
}

// asService decodes a SOC as a service SOC of sp's service feed: its payload
// a ServiceMessage whose index names the id in the id slot. It checks no
// signature.
func asService(sp *bps.Spec, id, payload []byte) *pb.ServiceMessage {
	svc := new(pb.ServiceMessage)
	if err := proto.Unmarshal(payload, svc); err != nil {
		return nil
	}
	if !bytes.Equal(id, bps.ServiceID(sp.Topic, svc.Index)) {
		return nil
	}
	return svc
}

// echoKey is what the no-echo filter remembers of a message: a hash of its
// address and data.
func echoKey(address, data []byte) [32]byte {
	h := sha256.New()
	h.Write(address)
	h.Write(data)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// echoFilter remembers the last messages a publishing session sent, so the
// hub does not hand them back to it (a GSOC client publishes and receives,
// but not its own messages). Bounded: the oldest is forgotten first. Its
// mutex guards it: the session's reader adds, the hub takes.
type echoFilter struct {
	mu   sync.Mutex
	keys [][32]byte
	next int
}

func newEchoFilter(size int) *echoFilter {
	return &echoFilter{keys: make([][32]byte, 0, size)}
}

// add remembers k.
func (e *echoFilter) add(k [32]byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.keys) < cap(e.keys) {
		e.keys = append(e.keys, k)
		return
	}
	e.keys[e.next] = k
	e.next = (e.next + 1) % len(e.keys)
}

// take forgets k and reports whether it was remembered.
func (e *echoFilter) take(k [32]byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.keys {
		if e.keys[i] == k {
			e.keys[i] = [32]byte{}
			return true
		}
	}
	return false
}

// Text frames of the session protocol (docs/api.md). Hex strings carry no
// 0x prefix; the node accepts either from the dApp.
const (
	typeClaimRequest = "claim-request"
	typeClaim        = "claim"
	typeReady        = "ready"
	typeWaiting      = "waiting"
	typeService      = "service"
	typeError        = "error"
)

// claimRequest asks the dApp to sign digest = ClaimDigest(challenge, broker,
// index) in the SOC convention and answer with a claim frame.
type claimRequest struct {
	Type      string `json:"type"`
	Topic     string `json:"topic"`
	Addr      string `json:"addr"`
	Broker    string `json:"broker"`
	Challenge string `json:"challenge"`
	Index     uint64 `json:"index"`
	Digest    string `json:"digest"`
}

// readyFrame tells the dApp the session is set up: a subscriber receives from
// now on, a publisher may send.
type readyFrame struct {
	Type    string  `json:"type"`
	Role    string  `json:"role"` // "subscriber" or "publisher"
	Topic   string  `json:"topic"`
	Binding string  `json:"binding"`
	Broker  string  `json:"broker"`
	Addr    string  `json:"addr,omitempty"`
	Index   *uint64 `json:"index,omitempty"`
	Fields  string  `json:"fields"` // the swarm-soc-fields in effect
}

// waitingFrame tells a publishing session that it may not publish yet, or
// no longer: its address is not in the roster, the broker has not admitted
// it to a closed cohort, or a roster revoked it. A later ready frame ends
// the wait.
type waitingFrame struct {
	Type   string `json:"type"`
	Addr   string `json:"addr"`
	Reason string `json:"reason"`
}

// serviceFrame is a service SOC of the admin's service feed (SWIP-60), as
// the node verified it: a roster, or the end of the stream. gap reports
// service updates the node never received before this one (a liveness
// fault: withholding).
type serviceFrame struct {
	Type       string   `json:"type"`
	Kind       string   `json:"kind"` // "ROSTER" or "END_OF_STREAM"
	Index      uint64   `json:"index"`
	Publishers []string `json:"publishers"` // hex addresses, the admin not included
	Gap        bool     `json:"gap"`
}

func newServiceFrame(svc *pb.ServiceMessage, gap bool) []byte {
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

// controlIn is a text frame from the dApp.
type controlIn struct {
	Type      string `json:"type"`
	Signature string `json:"signature"`
}

func fieldNames(fields []socField) string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.String()
	}
	return strings.Join(names, ",")
}
