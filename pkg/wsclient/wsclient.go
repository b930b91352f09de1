// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package wsclient is a Go client of a BPS node's WebSocket bridge
// (/pubsub, docs/api.md): it opens sessions in every SWIP-60 configuration,
// signs with a local key — under its stream's challenge (SWIP-74 Rev 8) —
// its claiming AUTH, what it publishes and the admin's rosters and end,
// and decodes what it receives. The node holds no
// keys. The bee-bps CLI and the end-to-end tests use it; a dApp would use
// bee-js.
//
// Opening a session: Subscribe (a receiving session), Publish (a session
// publishing as the signer's address), PublishFeed and PublishGSOC (the
// first two configurations this client knew). Reading one: Next returns
// frames in order; Await and NextMessage pick the next frame of a kind and
// keep what they skip for later reads. Writing: SendSOC, SendFeedUpdate,
// SendGSOC. The admin's control plane: PostService.
package wsclient

import (
	"context"
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
	"github.com/gorilla/websocket"
)

// Mode is the kind of cohort a session is on.
type Mode int

// Modes.
const (
	// Feed is a session on a SWIP-60 cohort: binding=feed with an admin (a
	// SWIP-74 live stream), or, when Options.Binding is set, the cohort that
	// Binding, Admin, Publishers and Closed name.
	Feed Mode = iota
	// GSOC is the bee-js GSOC client's session: the implicit ANCHOR cohort
	// of a SOC address, binary frames signature ‖ span ‖ payload, no text
	// frames.
	GSOC
)

// Bindings, as the bridge's binding parameter names them (case does not
// matter to the node).
const (
	BindingAnchor   = "anchor"
	BindingSOCID    = "soc_id"
	BindingOwner    = "owner"
	BindingFeed     = "feed"
	BindingMnemonic = "mnemonic"
)

// PublishersAll is the publishers parameter of a group chat: anyone
// attached publishes as the address it declares.
const PublishersAll = "all"

// Options name a session: the node, the broker, the cohort and, for a
// publishing session, what its claim and frames need.
type Options struct {
	API  string // the node's API base URL, e.g. http://127.0.0.1:1633
	Peer string // the broker: multiaddr with /p2p/, or overlay hex
	Mode Mode
	// Topic is the 32-byte topic (a mnemonic topic hashed by the caller);
	// in GSOC mode the SOC address.
	Topic []byte

	// The cohort's spec (SWIP-60), not in GSOC mode. Binding empty in Feed
	// mode is binding=feed with Admin, the live stream.
	Binding    string // anchor, soc_id, owner, feed or mnemonic
	Admin      []byte // the admin's address: explicit authorship; nil: implicit
	Publishers string // PublishersAll for a group chat; empty otherwise
	Closed     bool   // a closed cohort (a jam): only publishers attend
	// History (binding=feed with an admin): a history cohort, whose
	// receiving sessions get each feed from index 0, recovered from
	// storage (SWIP-65); its publishers must name a PostageBatch.
	History bool
	// Pot turns SWIP-65's pot profile on (binding=feed): a publisher's
	// payloads must be the feed's pot nodes (bps.PotNext), a receiving
	// session recovers by pot descent.
	Pot bool

	// Publishing only.
	ID []byte // binding=anchor without an admin: the session's SOC id
	// Index is the client's own feed cursor (binding=feed): the lowest
	// index its key never signed. The client signs an update only within
	// [Index, Index + 1,024) — or re-signs one it signed (docs/protocol.md
	// "Publishers"); the node echoes it in ready and does nothing with it.
	Index uint64
	// PostageBatch (swarm-postage-batch-id) makes a publishing session
	// persistent (SWIP-65): the node uploads every update, stamped with it.
	// Subscribe ignores it.
	PostageBatch []byte

	// Subscribing only: Resume, under binding=feed on a node with storage,
	// is the index the session resumes each publisher's feed at; the
	// updates missed before the first live one are recovered from storage
	// (a "recovered" text frame, then binary frames like live ones; what
	// cannot be recovered is a "gap" text frame).
	Resume *uint64

	Fields string // swarm-soc-fields; empty: the node's default
}

// binding is the session's binding as this client frames it: lower case,
// socid spelt soc_id; empty in GSOC mode.
func (o Options) binding() string {
	if o.Mode == GSOC {
		return ""
	}
	b := strings.ToLower(o.Binding)
	switch b {
	case "":
		return BindingFeed
	case "socid":
		return BindingSOCID
	}
	return b
}

// explicit reports whether the cohort has an admin that is not a group
// chat's: publishers other than the admin claim, once a roster names them.
func (o Options) explicit() bool {
	return o.Mode != GSOC && o.Publishers == "" && (len(o.Admin) > 0 || o.Binding == "")
}

// query is the spec and the peer as query parameters: what names the
// cohort at the node, for a session and for POST …/service alike.
func (o Options) query() (url.Values, error) {
	q := url.Values{"peer": {o.Peer}}
	if o.Mode == GSOC {
		if o.Binding != "" || o.Admin != nil || o.Publishers != "" || o.Closed {
			return nil, errors.New("wsclient: GSOC mode takes no spec (binding, admin, publishers, closed)")
		}
		return q, nil
	}
	q.Set("binding", o.binding())
	if o.Binding == "" || len(o.Admin) > 0 {
		q.Set("admin", hex.EncodeToString(o.Admin))
	}
	if o.Publishers != "" {
		q.Set("publishers", o.Publishers)
	}
	if o.Closed {
		q.Set("closed", "true")
	}
	if o.History {
		q.Set("history", "true")
	}
	if o.Pot {
		q.Set("pot", "true")
	}
	return q, nil
}

// endpoint is the URL of path under /pubsub/<topic> with q, in scheme
// "ws" (a session) or "http" (a POST), following the API URL's TLS.
func (o Options) endpoint(ws bool, path string, q url.Values) (string, error) {
	u, err := url.Parse(o.API)
	if err != nil {
		return "", fmt.Errorf("api url: %w", err)
	}
	if ws {
		switch u.Scheme {
		case "http":
			u.Scheme = "ws"
		case "https":
			u.Scheme = "wss"
		}
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/pubsub/" + hex.EncodeToString(o.Topic) + path
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// HTTPError is a request the node refused before any WebSocket, in bee's
// JSON error format: a session not opened (400 for a spec the node does not
// serve or a closed cohort without addr, 503 when full…), a service SOC not
// relayed (403, 409…).
type HTTPError struct {
	Op         string // "open session", "post service"
	StatusCode int
	Status     string
	Message    string
	Reasons    []Reason
}

// Reason names a parameter the node refused and why.
type Reason struct {
	Field string `json:"field"`
	Error string `json:"error"`
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("%s: %s: %s %v", e.Op, e.Status, e.Message, e.Reasons)
}

// httpError reads the node's JSON error body of resp and closes it.
func httpError(op string, resp *http.Response) error {
	var body struct {
		Message string   `json:"message"`
		Reasons []Reason `json:"reasons"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	_ = resp.Body.Close()
	return &HTTPError{Op: op, StatusCode: resp.StatusCode, Status: resp.Status, Message: body.Message, Reasons: body.Reasons}
}

func dial(ctx context.Context, o Options, extra url.Values) (*Session, error) {
	q, err := o.query()
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		q[k] = v
	}
	u, err := o.endpoint(true, "", q)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	if o.Fields != "" {
		h.Set("swarm-soc-fields", o.Fields)
	}
	if o.PostageBatch != nil {
		h.Set("swarm-postage-batch-id", hex.EncodeToString(o.PostageBatch))
	}
	conn, resp, err := websocket.DefaultDialer.DialContext(ctx, u, h)
	if err != nil {
		if resp != nil {
			return nil, httpError("open session", resp)
		}
		return nil, fmt.Errorf("open session: %w", err)
	}
	s := &Session{conn: conn, o: o, binding: o.binding()}
	s.fields = strings.Split(o.Fields, ",")
	if o.Fields == "" {
		s.fields = []string{"payload"}
		if o.Mode == GSOC {
			s.fields = []string{"signature", "span", "payload"}
		}
	}
	return s, nil
}

// Subscribe opens a receiving session and, but in GSOC mode, waits for the
// node's ready frame. A closed cohort has no audience: the node refuses it
// with an *HTTPError (400).
func Subscribe(ctx context.Context, o Options) (*Session, error) {
	o.PostageBatch = nil // a subscriber uploads nothing
	var extra url.Values
	if o.Resume != nil {
		extra = url.Values{"index": {strconv.FormatUint(*o.Resume, 10)}}
	}
	s, err := dial(ctx, o, extra)
	if err != nil {
		return nil, err
	}
	if o.Mode != GSOC {
		if err := s.handshake(ctx, true); err != nil {
			_ = s.conn.Close()
			return nil, err
		}
	}
	return s, nil
}

// Publish opens a session publishing as signer's address in the cohort o
// names and returns once the node has said ready or waiting (State tells
// which). Under a session feed (explicit authorship, ALL) the node hands
// the session its stream's challenge and the session signs everything
// under it (SWIP-74 Rev 8); under explicit authorship it claims the stream
// with an AUTH whenever it may publish — at once as the admin, else when a
// roster naming its address arrives — and again after the node joined the
// broker again (a new challenge); a frame the node answers stale is
// re-signed under the new challenge. Under publishers=all and implicit
// authorship there is no claim and the session is ready at once; o.ID is
// the SOC id for binding=anchor without an admin, o.Index the client's own
// cursor for binding=feed. In GSOC mode Publish is PublishGSOC under o.ID.
func Publish(ctx context.Context, o Options, signer crypto.Signer) (*Session, error) {
	addr, err := signer.EthereumAddress()
	if err != nil {
		return nil, err
	}
	if o.Mode == GSOC {
		return PublishGSOC(ctx, o, addr.Bytes(), o.ID)
	}
	extra := url.Values{"addr": {hex.EncodeToString(addr.Bytes())}}
	if o.ID != nil {
		extra.Set("id", hex.EncodeToString(o.ID))
	}
	if o.binding() == BindingFeed && o.explicit() {
		extra.Set("index", strconv.FormatUint(o.Index, 10))
	}
	s, err := dial(ctx, o, extra)
	if err != nil {
		return nil, err
	}
	s.signer, s.addr = signer, addr.Bytes()
	if err := s.handshake(ctx, false); err != nil {
		_ = s.conn.Close()
		return nil, err
	}
	return s, nil
}

// PublishFeed opens a publishing session on a feed cohort as signer with
// its own cursor index, claims when it may, and waits for ready.
func PublishFeed(ctx context.Context, o Options, signer crypto.Signer, index uint64) (*Session, error) {
	o.Index = index
	s, err := Publish(ctx, o, signer)
	if err != nil {
		return nil, err
	}
	if s.State() != StateReady {
		if _, err := s.Await(ctx, "ready"); err != nil {
			_ = s.conn.Close()
			return nil, err
		}
	}
	return s, nil
}

// PublishGSOC opens a GSOC publishing session for the SOC (id, owner);
// o.Topic must be that SOC's address.
func PublishGSOC(ctx context.Context, o Options, owner []byte, id []byte) (*Session, error) {
	s, err := dial(ctx, o, url.Values{"gsoc-eth-address": {hex.EncodeToString(owner)}, "gsoc-topic": {hex.EncodeToString(id)}})
	if err != nil {
		return nil, err
	}
	s.gsocID = id
	return s, nil
}

// GSOCAddress is the SOC address of (id, owner): the topic of a GSOC session.
func GSOCAddress(id, owner []byte) ([]byte, error) {
	a, err := soc.CreateAddress(id, owner)
	if err != nil {
		return nil, err
	}
	return a.Bytes(), nil
}
