// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package wsclient

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/gorilla/websocket"
)

// States of a session, as the node's last ready or waiting frame said.
const (
	StateReady   = "ready"   // a subscriber receives, a publisher may send
	StateWaiting = "waiting" // a publisher may not send, yet or any more
)

// maxPending bounds the frames Await and NextMessage keep for later reads.
const maxPending = 1024

// Message is one received frame, decoded per the session's fields: each
// field is set when the fields include it.
type Message struct {
	Raw            []byte // the frame as received
	Address        []byte // the SOC address
	PubKey         []byte // the owner's compressed public key (recoveredPubKey)
	ID             []byte // the signed SOC id (identifier)
	Signature      []byte
	WrappedAddress []byte
	Span           []byte
	Index          uint64 // when the fields include index
	Payload        []byte // the trailing payload field
}

// Session is an open WebSocket session. One goroutine reads it (Next,
// NextMessage, Await); sends may come from any goroutine.
type Session struct {
	conn    *websocket.Conn
	o       Options
	binding string
	fields  []string
	signer  crypto.Signer // answers claim requests; nil on a subscriber
	gsocID  []byte        // a GSOC publisher's SOC id

	// Ready and Waiting are the node's latest ready and waiting frames
	// (never in GSOC mode), as of the last read; read them from the reading
	// goroutine. State says which came last.
	Ready   map[string]any
	Waiting map[string]any

	wmu sync.Mutex // one writer at a time: claims from the reader, frames from the caller

	// pending holds frames a selective read (Await, NextMessage) skipped,
	// in order, for the reads after it. Reading goroutine only.
	pending []received

	mu    sync.Mutex // guards state
	state string
}

// received is one frame read: a message, or a text frame.
type received struct {
	msg  Message
	text map[string]any
}

// State is StateReady or StateWaiting, as the node's last ready or waiting
// frame said ("" before either, and in GSOC mode).
func (s *Session) State() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// handshake reads until ready (subscriber) or until ready or waiting (a
// publisher), keeping what else arrives for later reads.
func (s *Session) handshake(ctx context.Context, subscriber bool) error {
	for {
		r, err := s.read(ctx)
		if err != nil {
			return err
		}
		if r.text == nil {
			return errors.New("session: binary frame before ready")
		}
		switch r.text["type"] {
		case "ready":
			return nil
		case "waiting":
			if !subscriber {
				return nil
			}
		case "error":
			return nodeError(r.text)
		}
		if err := s.keep(r); err != nil {
			return err
		}
	}
}

// read reads one frame off the socket: a claim request is answered with the
// session's signer, ready and waiting frames update the state. A context
// that ends closes the session.
func (s *Session) read(ctx context.Context) (received, error) {
	stop := context.AfterFunc(ctx, func() { _ = s.conn.Close() })
	defer stop()
	kind, data, err := s.conn.ReadMessage()
	if err != nil {
		if ctx.Err() != nil {
			return received{}, fmt.Errorf("session: %w", ctx.Err())
		}
		return received{}, err
	}
	if kind != websocket.TextMessage {
		return received{msg: s.decode(data)}, nil
	}
	var f map[string]any
	if err := json.Unmarshal(data, &f); err != nil {
		return received{}, fmt.Errorf("session: text frame: %w", err)
	}
	switch f["type"] {
	case "claim-request":
		if s.signer == nil {
			return received{}, errors.New("session: claim requested from a subscriber")
		}
		if err := s.answerClaim(data); err != nil {
			return received{}, err
		}
	case "ready":
		s.Ready = f
		s.setState(StateReady)
	case "waiting":
		s.Waiting = f
		s.setState(StateWaiting)
	}
	return received{text: f}, nil
}

func (s *Session) setState(st string) {
	s.mu.Lock()
	s.state = st
	s.mu.Unlock()
}

// keep queues r for a later read.
func (s *Session) keep(r received) error {
	if len(s.pending) >= maxPending {
		return fmt.Errorf("session: more than %d frames skipped unread", maxPending)
	}
	s.pending = append(s.pending, r)
	return nil
}

// take removes and returns the first pending frame that match accepts.
func (s *Session) take(match func(received) bool) (received, bool) {
	for i, r := range s.pending {
		if match(r) {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			return r, true
		}
	}
	return received{}, false
}

// nodeError is the node's error frame as an error.
func nodeError(f map[string]any) error {
	return fmt.Errorf("session: node: %v", f["reason"])
}

// Next returns the next frame: a binary frame decoded per the session's
// fields, or a text frame (returned in text, non-nil; the message is then
// zero). Frames a selective read kept come first. A claim request is
// answered before it is returned.
func (s *Session) Next(ctx context.Context) (Message, map[string]any, error) {
	if len(s.pending) > 0 {
		r := s.pending[0]
		s.pending = s.pending[1:]
		return r.msg, r.text, nil
	}
	r, err := s.read(ctx)
	return r.msg, r.text, err
}

// NextMessage returns the next binary frame, keeping the text frames before
// it for later reads. An error frame ends the read with its reason.
func (s *Session) NextMessage(ctx context.Context) (Message, error) {
	if r, ok := s.take(func(r received) bool { return r.text == nil }); ok {
		return r.msg, nil
	}
	for {
		r, err := s.read(ctx)
		if err != nil {
			return Message{}, err
		}
		if r.text == nil {
			return r.msg, nil
		}
		if r.text["type"] == "error" {
			return Message{}, nodeError(r.text)
		}
		if err := s.keep(r); err != nil {
			return Message{}, err
		}
	}
}

// Await returns the next text frame of type typ ("ready", "waiting",
// "service", "claim-request", "error"), keeping the frames before it for
// later reads. An error frame ends the wait with its reason, unless typ is
// "error". Claim requests are answered as they come.
func (s *Session) Await(ctx context.Context, typ string) (map[string]any, error) {
	if r, ok := s.take(func(r received) bool { return r.text != nil && r.text["type"] == typ }); ok {
		return r.text, nil
	}
	for {
		r, err := s.read(ctx)
		if err != nil {
			return nil, fmt.Errorf("await %s: %w", typ, err)
		}
		if r.text != nil {
			switch r.text["type"] {
			case typ:
				return r.text, nil
			case "error":
				return nil, fmt.Errorf("await %s: %w", typ, nodeError(r.text))
			}
		}
		if err := s.keep(r); err != nil {
			return nil, err
		}
	}
}

// AwaitService returns the next service frame, decoded, keeping the frames
// before it for later reads.
func (s *Session) AwaitService(ctx context.Context) (Service, error) {
	f, err := s.Await(ctx, "service")
	if err != nil {
		return Service{}, err
	}
	return DecodeService(f)
}

// claimRequest is the node's claim-request frame: the fields a claim signs,
// the index a decimal string. Any digest the node sends is ignored.
type claimRequest struct {
	Addr      string `json:"addr"`
	Broker    string `json:"broker"`
	Challenge string `json:"challenge"`
	Index     uint64 `json:"index,string"`
}

// answerClaim signs the claim digest it derives from the request's fields,
// after checking the request is for this signer: it never signs a digest
// the node hands it.
func (s *Session) answerClaim(data []byte) error {
	var req claimRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return fmt.Errorf("session: claim request: %w", err)
	}
	challenge, err1 := decodeHex(req.Challenge)
	broker, err2 := decodeHex(req.Broker)
	if err1 != nil || err2 != nil || len(challenge) != swarm.HashSize || len(broker) != swarm.HashSize {
		return fmt.Errorf("session: malformed claim request %s", data)
	}
	addr, err := s.signer.EthereumAddress()
	if err != nil {
		return err
	}
	if a, err := decodeHex(req.Addr); err != nil || !bytes.Equal(a, addr.Bytes()) {
		return fmt.Errorf("session: claim requested for %s, not for the signer %x", req.Addr, addr.Bytes())
	}
	sig, err := s.signer.Sign(bps.ClaimDigest(challenge, swarm.NewAddress(broker), req.Index))
	if err != nil {
		return fmt.Errorf("sign claim: %w", err)
	}
	return s.writeJSON(map[string]string{"type": "claim", "signature": hex.EncodeToString(sig)})
}

func decodeHex(s string) ([]byte, error) {
	return hex.DecodeString(strings.TrimPrefix(s, "0x"))
}

func (s *Session) writeJSON(v any) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.conn.WriteJSON(v)
}

func (s *Session) writeBinary(b []byte) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.conn.WriteMessage(websocket.BinaryMessage, b)
}

// SendSOC signs payload as the SOC (id, signer) and sends it framed for the
// session's binding (docs/api.md, inbound frames): id ‖ signature ‖ span ‖
// payload where each frame carries its id (anchor with an admin, owner,
// mnemonic: the id is the dApp's choice), signature ‖ span ‖ payload where
// the binding fixes it (soc_id: the topic; anchor without an admin: the
// session's ID; GSOC: its gsoc-topic), for which id may be nil. A feed's
// updates go through SendFeedUpdate.
func (s *Session) SendSOC(signer crypto.Signer, id, payload []byte) error {
	var fixed []byte // the id the binding fixes: not in the frame
	prefixed := false
	switch {
	case s.o.Mode == GSOC:
		fixed = s.gsocID
	case s.binding == BindingFeed:
		return errors.New("wsclient: binding=feed: send updates with SendFeedUpdate")
	case s.binding == BindingSOCID:
		fixed = s.o.Topic
	case s.binding == BindingAnchor && len(s.o.Admin) == 0:
		fixed = s.o.ID
	case s.binding == BindingAnchor, s.binding == BindingOwner, s.binding == BindingMnemonic:
		prefixed = true
	default:
		return fmt.Errorf("wsclient: unknown binding %q", s.o.Binding)
	}
	if !prefixed {
		if fixed == nil {
			return errors.New("wsclient: no SOC id: give Options.ID (or the GSOC id) when opening the session")
		}
		if id != nil && !bytes.Equal(id, fixed) {
			return fmt.Errorf("wsclient: binding %s fixes the id to %x", s.binding, fixed)
		}
		id = fixed
	}
	if len(id) != swarm.HashSize {
		return fmt.Errorf("wsclient: SOC id of %d bytes, want %d", len(id), swarm.HashSize)
	}
	m, err := bps.SOCUpdate(signer, id, payload)
	if err != nil {
		return err
	}
	if !prefixed {
		return s.writeBinary(m.Data[swarm.HashSize:])
	}
	return s.writeBinary(m.Data)
}

// SendFeedUpdate signs update index of the feed and sends it as
// index(8, BE) ‖ signature ‖ span ‖ payload.
func (s *Session) SendFeedUpdate(signer crypto.Signer, index uint64, payload []byte) error {
	m, err := bps.FeedUpdate(signer, s.o.Topic, index, payload)
	if err != nil {
		return err
	}
	frame := binary.BigEndian.AppendUint64(nil, index)
	frame = append(frame, m.Data[swarm.HashSize:]...)
	return s.writeBinary(frame)
}

// SendGSOC signs payload as the SOC (id, signer) and sends signature ‖ span
// ‖ payload, the GSOC client's frame.
func (s *Session) SendGSOC(signer crypto.Signer, id, payload []byte) error {
	frame, err := GSOCFrame(signer, id, payload)
	if err != nil {
		return err
	}
	return s.writeBinary(frame)
}

// GSOCFrame is the frame SendGSOC sends: payload signed as the SOC (id,
// signer), signature ‖ span ‖ payload. With SendFrame it lets a caller sign
// ahead of time, as a benchmark does to time the node and not the signing.
func GSOCFrame(signer crypto.Signer, id, payload []byte) ([]byte, error) {
	m, err := bps.SOCUpdate(signer, id, payload)
	if err != nil {
		return nil, err
	}
	return m.Data[swarm.HashSize:], nil
}

// SendFrame sends frame, already in the session's inbound format, as one
// binary frame.
func (s *Session) SendFrame(frame []byte) error {
	return s.writeBinary(frame)
}

var fieldSize = map[string]int{
	"address": 32, "recoveredpubkey": 33, "identifier": 32, "signature": 65,
	"wrappedaddress": 32, "span": 8, "index": 8,
}

func (s *Session) decode(b []byte) Message {
	m := Message{Raw: b}
	off := 0
	for _, f := range s.fields {
		f = strings.ToLower(strings.TrimSpace(f))
		if f == "payload" {
			m.Payload = b[min(off, len(b)):]
			break
		}
		n := fieldSize[f]
		if off+n > len(b) {
			break
		}
		v := b[off : off+n]
		switch f {
		case "address":
			m.Address = v
		case "recoveredpubkey":
			m.PubKey = v
		case "identifier":
			m.ID = v
		case "signature":
			m.Signature = v
		case "wrappedaddress":
			m.WrappedAddress = v
		case "span":
			m.Span = v
		case "index":
			m.Index = binary.BigEndian.Uint64(v)
		}
		off += n
	}
	return m
}

// Close ends the session with a normal closure.
func (s *Session) Close() error {
	s.wmu.Lock()
	_ = s.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	s.wmu.Unlock()
	return s.conn.Close()
}
