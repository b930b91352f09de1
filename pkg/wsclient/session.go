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
	"github.com/ethersphere/bps/pkg/bps/pb"
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
	signer  crypto.Signer // signs the session's AUTH and re-signs stale frames; nil on a subscriber
	addr    []byte        // the signer's address
	gsocID  []byte        // a GSOC publisher's SOC id

	// A publisher under a session feed (explicit authorship, ALL): the
	// challenge of its stream (the latest challenge frame, SWIP-74 Rev 8),
	// whether the session's AUTH claimed it, whether the roster the node
	// told names the address, and what it signed — the payloads of its last
	// keepSigned DATA indexes, to re-sign one the node answers stale, and
	// its own cursor, the lowest index it never signed. Under cmu.
	cmu       sync.Mutex
	challenge []byte
	seq       int
	authed    int
	rostered  bool
	signed    map[uint64][]byte
	order     []uint64
	next      uint64
	nextSet   bool

	// Ready and Waiting are the node's latest ready and waiting frames
	// (never in GSOC mode), as of the last read; read them from the reading
	// goroutine. State says which came last.
	Ready   map[string]any
	Waiting map[string]any

	wmu sync.Mutex // one writer at a time: AUTHs and re-signed frames from the reader, frames from the caller

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

// read reads one frame off the socket: a challenge frame is taken (and
// answered with an AUTH where the session may claim), a roster naming the
// address is answered with an AUTH if the stream is not claimed, a stale
// frame's update is re-signed and sent again, ready and waiting frames
// update the state. A context that ends closes the session.
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
	case "challenge":
		if err := s.onChallenge(f); err != nil {
			return received{}, err
		}
	case "service":
		if err := s.onService(f); err != nil {
			return received{}, err
		}
	case "stale":
		if err := s.onStale(f); err != nil {
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
// zero). Frames a selective read kept come first. A challenge is claimed,
// and a stale update re-signed, before it is returned.
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
// "service", "challenge", "stale", "error"), keeping the frames before it for
// later reads. An error frame ends the wait with its reason, unless typ is
// "error". Challenges are claimed, and stale updates re-signed, as they come.
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

// keepSigned bounds the DATA payloads a session keeps to re-sign, and how
// far past its own cursor it signs (docs/protocol.md "Publishers").
const keepSigned = 1024

// onChallenge takes the challenge of the session's stream (a new one after
// the node joined the broker again): under explicit authorship the session
// claims it with an AUTH at once if it may publish (the admin, or the
// roster the node told names it); otherwise a roster naming it will.
func (s *Session) onChallenge(f map[string]any) error {
	if s.signer == nil {
		return errors.New("session: a challenge frame on a subscriber")
	}
	ch, err := decodeHex(fmt.Sprint(f["challenge"]))
	seq, ok := f["seq"].(float64)
	if err != nil || len(ch) != swarm.HashSize || !ok {
		return fmt.Errorf("session: malformed challenge frame %v", f)
	}
	if a, err := decodeHex(fmt.Sprint(f["addr"])); err != nil || !bytes.Equal(a, s.addr) {
		return fmt.Errorf("session: a challenge for %v, not for the signer %x", f["addr"], s.addr)
	}
	s.cmu.Lock()
	s.challenge, s.seq = ch, int(seq)
	if bytes.Equal(s.addr, s.o.Admin) {
		s.rostered = true
	}
	s.cmu.Unlock()
	return s.claim()
}

// onService notes whether a roster names the session's address, and claims
// the stream when one does: its cue (SWIP-60 rev 14).
func (s *Session) onService(f map[string]any) error {
	if s.signer == nil || !s.o.explicit() {
		return nil
	}
	v, err := DecodeService(f)
	if err != nil || v.Kind != KindRoster {
		return nil
	}
	s.cmu.Lock()
	s.rostered = bytes.Equal(s.addr, s.o.Admin) || v.Names(s.addr)
	if !s.rostered {
		s.authed = 0
	}
	s.cmu.Unlock()
	return s.claim()
}

// claim sends the claiming AUTH (kind 2, index 0, empty) under the
// stream's challenge, once per challenge, where the session may publish
// under explicit authorship.
func (s *Session) claim() error {
	s.cmu.Lock()
	if !s.o.explicit() || s.challenge == nil || !s.rostered || s.authed == s.seq {
		s.cmu.Unlock()
		return nil
	}
	s.authed = s.seq
	ch := s.challenge
	s.cmu.Unlock()
	frame, err := s.frame(pb.Kind_AUTH, ch, 0, nil)
	if err != nil {
		return err
	}
	return s.writeBinary(frame)
}

// onStale re-signs the update the node did not send — signed under an
// earlier challenge — at the same index with the same payload under the
// latest challenge, and sends it again (SWIP-74 Rev 8: re-sign, never
// reuse an index for another payload).
func (s *Session) onStale(f map[string]any) error {
	index, ok := f["index"].(float64)
	if !ok || f["kind"] != "DATA" {
		return nil // an AUTH: the challenge frame's claim is sent anew
	}
	s.cmu.Lock()
	payload, kept := s.signed[uint64(index)]
	s.cmu.Unlock()
	if !kept {
		return fmt.Errorf("session: update %d is stale and no longer kept to re-sign", uint64(index))
	}
	return s.sendUpdate(s.signer, uint64(index), payload, true)
}

// frame is a chunk of kind at index wrapping payload signed by the
// session's signer under challenge, as the node takes it: kind(1) ‖
// index(8, BE) ‖ id ‖ signature ‖ span ‖ payload.
func (s *Session) frame(kind pb.Kind, challenge []byte, index uint64, payload []byte) ([]byte, error) {
	data, _, err := bps.SignSOC(s.signer, s.addr, bps.SessionID(kind, s.o.Topic, challenge, index), payload)
	if err != nil {
		return nil, err
	}
	return append(binary.BigEndian.AppendUint64([]byte{byte(kind)}, index), data...), nil
}

// Challenge is the challenge of the session's stream as the node last told
// it, and its join (0: none yet, or no session feed).
func (s *Session) Challenge() ([]byte, int) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	return s.challenge, s.seq
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

// salted reports whether the session's chunks are session-feed chunks:
// explicit authorship or ALL (SWIP-74 Rev 8).
func (s *Session) salted() bool {
	return s.o.Mode != GSOC && (len(s.o.Admin) > 0 || s.o.Binding == "")
}

// SendSOC signs payload as the SOC (id, signer) and sends it under
// implicit authorship, where the binding names the id: kind(1)=DATA ‖
// index(8)=0 ‖ soc (docs/api.md, inbound frames); the binding fixes it
// under soc_id (the topic) and anchor (the session's ID), for which id may
// be nil. In GSOC mode: signature ‖ span ‖ payload under the GSOC id. A
// session feed's chunks (explicit authorship, ALL) and an implicit feed's
// updates go through SendUpdate.
func (s *Session) SendSOC(signer crypto.Signer, id, payload []byte) error {
	if s.o.Mode == GSOC {
		return s.SendGSOC(signer, s.gsocID, payload)
	}
	var fixed []byte // the id the binding fixes
	switch {
	case s.salted():
		return errors.New("wsclient: a session feed: send updates with SendUpdate (every chunk is signed under the stream's challenge)")
	case s.binding == BindingFeed:
		return errors.New("wsclient: binding=feed: send updates with SendUpdate")
	case s.binding == BindingSOCID:
		fixed = s.o.Topic
	case s.binding == BindingAnchor:
		fixed = s.o.ID
	case s.binding == BindingOwner, s.binding == BindingMnemonic:
	default:
		return fmt.Errorf("wsclient: unknown binding %q", s.o.Binding)
	}
	if fixed != nil {
		if id != nil && !bytes.Equal(id, fixed) {
			return fmt.Errorf("wsclient: binding %s fixes the id to %x", s.binding, fixed)
		}
		id = fixed
	}
	if len(id) != swarm.HashSize {
		return fmt.Errorf("wsclient: SOC id of %d bytes, want %d", len(id), swarm.HashSize)
	}
	addr, err := signer.EthereumAddress()
	if err != nil {
		return err
	}
	data, _, err := bps.SignSOC(signer, addr.Bytes(), id, payload)
	if err != nil {
		return err
	}
	return s.writeBinary(append(binary.BigEndian.AppendUint64([]byte{byte(pb.Kind_DATA)}, 0), data...))
}

// SendUpdate signs DATA update index wrapping payload and sends it: under
// a session feed (explicit authorship, ALL; any binding) a session-feed
// chunk under the stream's challenge, and for a persistent session the
// update for storage signed under the channel's own id keccak256(topic ‖
// index) too (SWIP-65 on Rev 8); under implicit FEED_TOPIC the channel's
// own update. It refuses an index at or past its own cursor + 1,024, and
// below it anything but the payload it signed there (docs/protocol.md
// "Publishers": a node cannot make a client sign far ahead, nor a second
// content at an index).
func (s *Session) SendUpdate(signer crypto.Signer, index uint64, payload []byte) error {
	return s.sendUpdate(signer, index, payload, false)
}

// SendFeedUpdate is SendUpdate (its name before Rev 8).
func (s *Session) SendFeedUpdate(signer crypto.Signer, index uint64, payload []byte) error {
	return s.SendUpdate(signer, index, payload)
}

func (s *Session) sendUpdate(signer crypto.Signer, index uint64, payload []byte, resign bool) error {
	addr, err := signer.EthereumAddress()
	if err != nil {
		return err
	}
	if !s.salted() {
		if s.binding != BindingFeed {
			return errors.New("wsclient: implicit authorship: send with SendSOC")
		}
		data, _, err := bps.SignSOC(signer, addr.Bytes(), bps.FeedID(s.o.Topic, index), payload)
		if err != nil {
			return err
		}
		return s.writeBinary(append(binary.BigEndian.AppendUint64([]byte{byte(pb.Kind_DATA)}, index), data...))
	}
	if s.signer == nil || !bytes.Equal(addr.Bytes(), s.addr) {
		return errors.New("wsclient: a session feed's updates are signed by the session's signer")
	}
	s.cmu.Lock()
	ch := s.challenge
	if err := s.mayResign(index, payload, resign); err != nil {
		s.cmu.Unlock()
		return err
	}
	s.cmu.Unlock()
	if ch == nil {
		return errors.New("wsclient: no challenge yet: wait for ready")
	}
	frame, err := s.frame(pb.Kind_DATA, ch, index, payload)
	if err != nil {
		return err
	}
	if s.o.PostageBatch != nil {
		stored, _, err := bps.StorageUpdate(signer, s.addr, s.o.Topic, index, payload)
		if err != nil {
			return err
		}
		sig := stored[swarm.HashSize : swarm.HashSize+swarm.SocSignatureSize]
		frame = append(append(append([]byte{}, frame[:9]...), sig...), frame[9:]...)
	}
	return s.writeBinary(frame)
}

// mayResign applies the client's own cursor to a DATA index and keeps the
// payload; the caller holds cmu.
func (s *Session) mayResign(index uint64, payload []byte, resign bool) error {
	if !s.nextSet {
		s.next, s.nextSet = s.o.Index, true
	}
	if prev, ok := s.signed[index]; ok {
		if !bytes.Equal(prev, payload) {
			return fmt.Errorf("wsclient: index %d was signed with another payload: never two contents at an index", index)
		}
		return nil
	}
	switch {
	case resign:
		return fmt.Errorf("wsclient: index %d was never signed here", index)
	case index < s.next:
		return fmt.Errorf("wsclient: index %d is below this client's cursor %d: never signed here, so not re-signed", index, s.next)
	case index-s.next >= keepSigned:
		return fmt.Errorf("wsclient: index %d is %d past this client's cursor %d: it signs within %d", index, index-s.next, s.next, keepSigned)
	}
	if s.signed == nil {
		s.signed = make(map[uint64][]byte)
	}
	s.signed[index] = bytes.Clone(payload)
	s.order = append(s.order, index)
	if len(s.order) > keepSigned {
		delete(s.signed, s.order[0])
		s.order = s.order[1:]
	}
	if index >= s.next {
		s.next = index + 1
	}
	return nil
}

// SendService signs a ROSTER naming publishers (KindRoster) or the EOS
// (KindEndOfStream) at index as the admin, under the stream's challenge,
// and sends it on this session — the admin's publishing session only.
func (s *Session) SendService(kind string, index uint64, publishers [][]byte) error {
	k, payload, err := servicePayload(kind, publishers)
	if err != nil {
		return err
	}
	ch, _ := s.Challenge()
	if ch == nil || s.signer == nil {
		return errors.New("wsclient: not a publishing session with a challenge")
	}
	frame, err := s.frame(k, ch, index, payload)
	if err != nil {
		return err
	}
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
	addr, err := signer.EthereumAddress()
	if err != nil {
		return nil, err
	}
	data, _, err := bps.SignSOC(signer, addr.Bytes(), id, payload)
	if err != nil {
		return nil, err
	}
	return data[swarm.HashSize:], nil
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
