// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package wsclient is a Go client of a BPS node's WebSocket bridge
// (/pubsub, docs/api.md): it opens sessions, answers claim requests with a
// local key, signs what it publishes, and decodes what it receives. The
// bee-bps CLI and the end-to-end tests use it; a dApp would use bee-js.
package wsclient

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/gorilla/websocket"
)

// Mode is the kind of cohort a session is on.
type Mode int

// Modes.
const (
	// Feed is a SWIP-74 live stream: binding=feed with an admin.
	Feed Mode = iota
	// GSOC is the bee-js GSOC client's session: the implicit ANCHOR cohort
	// of a SOC address, binary frames signature ‖ span ‖ payload.
	GSOC
)

// Options name a session.
type Options struct {
	API    string // the node's API base URL, e.g. http://127.0.0.1:1633
	Peer   string // the broker: multiaddr with /p2p/, or overlay hex
	Mode   Mode
	Topic  []byte // Feed: the 32-byte feed topic; GSOC: the SOC address
	Admin  []byte // Feed: the admin address
	Fields string // swarm-soc-fields; empty: the node's default
}

// Message is one received frame, decoded per the session's fields.
type Message struct {
	Raw     []byte // the frame as received
	Index   uint64 // when the fields include index
	Payload []byte // the trailing payload field
}

// Session is an open WebSocket session.
type Session struct {
	conn   *websocket.Conn
	o      Options
	fields []string
	Ready  map[string]any // the node's ready frame (not in GSOC mode)
}

func (o Options) url(extra url.Values) (string, error) {
	u, err := url.Parse(o.API)
	if err != nil {
		return "", fmt.Errorf("api url: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/pubsub/" + hex.EncodeToString(o.Topic)
	q := url.Values{"peer": {o.Peer}}
	if o.Mode == Feed {
		q.Set("binding", "feed")
		q.Set("admin", hex.EncodeToString(o.Admin))
	}
	for k, v := range extra {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

func dial(ctx context.Context, o Options, extra url.Values) (*Session, error) {
	u, err := o.url(extra)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if o.Fields != "" {
		h.Set("swarm-soc-fields", o.Fields)
	}
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, u, h)
	if err != nil {
		if resp != nil {
			var body struct {
				Message string `json:"message"`
				Reasons []struct{ Field, Error string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&body)
			_ = resp.Body.Close()
			return nil, fmt.Errorf("open session: %s: %s %v", resp.Status, body.Message, body.Reasons)
		}
		return nil, fmt.Errorf("open session: %w", err)
	}
	s := &Session{conn: conn, o: o}
	s.fields = strings.Split(o.Fields, ",")
	if o.Fields == "" {
		s.fields = []string{"payload"}
		if o.Mode == GSOC {
			s.fields = []string{"signature", "span", "payload"}
		}
	}
	return s, nil
}

// Subscribe opens a subscriber session and waits for the node's ready frame.
func Subscribe(ctx context.Context, o Options) (*Session, error) {
	s, err := dial(ctx, o, nil)
	if err != nil {
		return nil, err
	}
	if o.Mode == Feed {
		if err := s.handshake(ctx, nil); err != nil {
			_ = s.conn.Close()
			return nil, err
		}
	}
	return s, nil
}

// PublishFeed opens a publishing session on a feed cohort as signer, answers
// the node's claim requests with signer, and waits for ready.
func PublishFeed(ctx context.Context, o Options, signer crypto.Signer, index uint64) (*Session, error) {
	addr, err := signer.EthereumAddress()
	if err != nil {
		return nil, err
	}
	s, err := dial(ctx, o, url.Values{"addr": {hex.EncodeToString(addr.Bytes())}, "index": {strconv.FormatUint(index, 10)}})
	if err != nil {
		return nil, err
	}
	if err := s.handshake(ctx, signer); err != nil {
		_ = s.conn.Close()
		return nil, err
	}
	return s, nil
}

// PublishGSOC opens a GSOC publishing session for the SOC (id, signer's
// address); o.Topic must be that SOC's address.
func PublishGSOC(ctx context.Context, o Options, owner []byte, id []byte) (*Session, error) {
	return dial(ctx, o, url.Values{"gsoc-eth-address": {hex.EncodeToString(owner)}, "gsoc-topic": {hex.EncodeToString(id)}})
}

// handshake reads text frames until ready, answering claim requests.
func (s *Session) handshake(ctx context.Context, signer crypto.Signer) error {
	stop := context.AfterFunc(ctx, func() { _ = s.conn.Close() })
	defer stop()
	for {
		kind, data, err := s.conn.ReadMessage()
		if err != nil {
			return fmt.Errorf("session: %w", err)
		}
		if kind != websocket.TextMessage {
			return errors.New("session: binary frame before ready")
		}
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("session: text frame: %w", err)
		}
		switch f["type"] {
		case "ready":
			s.Ready = f
			return nil
		case "claim-request":
			if signer == nil {
				return errors.New("session: claim requested from a subscriber")
			}
			if err := s.answerClaim(f, signer); err != nil {
				return err
			}
		case "error":
			return fmt.Errorf("session: node: %v", f["reason"])
		default:
			// waiting, service: informational before ready
		}
	}
}

// answerClaim signs the claim digest recomputed from the request's parts.
func (s *Session) answerClaim(f map[string]any, signer crypto.Signer) error {
	challenge, err1 := hex.DecodeString(strings.TrimPrefix(fmt.Sprint(f["challenge"]), "0x"))
	broker, err2 := hex.DecodeString(strings.TrimPrefix(fmt.Sprint(f["broker"]), "0x"))
	idx, ok := f["index"].(float64)
	if err1 != nil || err2 != nil || !ok {
		return fmt.Errorf("session: malformed claim request %v", f)
	}
	digest := bps.ClaimDigest(challenge, swarm.NewAddress(broker), uint64(idx))
	if want := fmt.Sprint(f["digest"]); want != hex.EncodeToString(digest) {
		return fmt.Errorf("session: the node's digest %s differs from ours %x", want, digest)
	}
	sig, err := signer.Sign(digest)
	if err != nil {
		return fmt.Errorf("sign claim: %w", err)
	}
	return s.conn.WriteJSON(map[string]string{"type": "claim", "signature": hex.EncodeToString(sig)})
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
	return s.conn.WriteMessage(websocket.BinaryMessage, frame)
}

// SendGSOC signs payload as the SOC (id, signer) and sends signature ‖ span
// ‖ payload, the GSOC client's frame.
func (s *Session) SendGSOC(signer crypto.Signer, id, payload []byte) error {
	m, err := bps.SOCUpdate(signer, id, payload)
	if err != nil {
		return err
	}
	return s.conn.WriteMessage(websocket.BinaryMessage, m.Data[swarm.HashSize:])
}

// Next returns the next binary frame, skipping text frames (they are
// returned in text if non-nil).
func (s *Session) Next(ctx context.Context) (Message, map[string]any, error) {
	stop := context.AfterFunc(ctx, func() { _ = s.conn.Close() })
	defer stop()
	kind, data, err := s.conn.ReadMessage()
	if err != nil {
		return Message{}, nil, err
	}
	if kind == websocket.TextMessage {
		var f map[string]any
		if err := json.Unmarshal(data, &f); err != nil {
			return Message{}, nil, err
		}
		return Message{}, f, nil
	}
	return s.decode(data), nil, nil
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
		if f == "index" {
			m.Index = binary.BigEndian.Uint64(b[off : off+n])
		}
		off += n
	}
	return m
}

// Close ends the session with a normal closure.
func (s *Session) Close() error {
	_ = s.conn.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
	return s.conn.Close()
}

// GSOCAddress is the SOC address of (id, owner): the topic of a GSOC session.
func GSOCAddress(id, owner []byte) ([]byte, error) {
	a, err := soc.CreateAddress(id, owner)
	if err != nil {
		return nil, err
	}
	return a.Bytes(), nil
}
