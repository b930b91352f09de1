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
	"net/http"
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

// claimRequest asks the dApp for a claim: the fields it signs, from which
// it derives the digest itself — ClaimDigest(challenge, broker, index), in
// the SOC convention — and answers with a claim frame. The node never hands
// it a digest: a dApp that signed one it was given could be made to sign
// anything, a SOC as the admin included. The index travels as a decimal
// string, which JavaScript keeps exact past 2^53.
type claimRequest struct {
	Type      string `json:"type"`
	Topic     string `json:"topic"`
	Addr      string `json:"addr"`
	Broker    string `json:"broker"`
	Challenge string `json:"challenge"`
	Index     string `json:"index"`
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

// serviceSOC checks a posted service SOC of sp as the broker will, and
// returns it as a message, with the status to answer if it is refused: 400
// for what is not a service SOC of this cohort, 403 for one the admin did
// not sign.
func serviceSOC(sp *bps.Spec, body []byte) (*pb.Message, *pb.ServiceMessage, int, error) {
	if len(body) < idSize+socFrameMin {
		return nil, nil, http.StatusBadRequest, fmt.Errorf("%d bytes: want id(32) ‖ signature(65) ‖ span(8) ‖ payload", len(body))
	}
	id, payload := body[:idSize], body[idSize+socFrameMin:]
	svc := asService(sp, id, payload)
	if svc == nil {
		return nil, nil, http.StatusBadRequest, errors.New(`not a service SOC of this topic: the payload must be a ServiceMessage and the id keccak256("bps-service:v1" ‖ topic ‖ uint64BE(index))`)
	}
	switch svc.Kind {
	case pb.ServiceKind_ROSTER:
		for _, p := range svc.Publishers {
			if len(p) != bps.AddressSize {
				return nil, nil, http.StatusBadRequest, fmt.Errorf("roster names a %d-byte address, want 20", len(p))
			}
		}
	case pb.ServiceKind_END_OF_STREAM:
		if len(svc.Publishers) != 0 {
			return nil, nil, http.StatusBadRequest, errors.New("an end of stream names no publishers")
		}
	default:
		return nil, nil, http.StatusBadRequest, fmt.Errorf("unknown service kind %d", svc.Kind)
	}
	addr, err := soc.CreateAddress(id, sp.Admin)
	if err != nil {
		return nil, nil, http.StatusBadRequest, err
	}
	data := bytes.Clone(body)
	parsed, err := soc.FromChunk(swarm.NewChunk(addr, data))
	if err != nil {
		return nil, nil, http.StatusBadRequest, fmt.Errorf("not a single-owner chunk: %w", err)
	}
	if owner := parsed.OwnerAddress(); !bytes.Equal(owner, sp.Admin) {
		return nil, nil, http.StatusForbidden, fmt.Errorf("signed by %x, not by the admin %x", owner, sp.Admin)
	}
	msg := &pb.Message{Address: addr.Bytes(), Data: data}
	if err := sp.Verify(msg, sp.Admin); err != nil {
		return nil, nil, http.StatusBadRequest, err
	}
	return msg, svc, 0, nil
}
