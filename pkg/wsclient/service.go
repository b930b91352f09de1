// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package wsclient

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Service kinds, as service frames name them.
const (
	KindRoster      = "ROSTER"
	KindEndOfStream = "EOS" // SWIP-60 rev 14's EOS
)

// Service is a service frame: an update of the admin's service feed as the
// node verified it.
type Service struct {
	Kind       string   // KindRoster or KindEndOfStream
	Index      uint64   // the service feed's index
	Publishers [][]byte // the roster as of Index (20-byte addresses; the admin not listed)
	Gap        bool     // earlier updates never reached the node
}

// Names reports whether the roster lists addr.
func (v Service) Names(addr []byte) bool {
	for _, p := range v.Publishers {
		if bytes.Equal(p, addr) {
			return true
		}
	}
	return false
}

// DecodeService decodes a service text frame as Next and Await return it.
func DecodeService(f map[string]any) (Service, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return Service{}, err
	}
	var w struct {
		Type       string   `json:"type"`
		Kind       string   `json:"kind"`
		Index      *uint64  `json:"index"`
		Publishers []string `json:"publishers"`
		Gap        bool     `json:"gap"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return Service{}, fmt.Errorf("service frame: %w", err)
	}
	if w.Type != "service" || (w.Kind != KindRoster && w.Kind != KindEndOfStream) || w.Index == nil {
		return Service{}, fmt.Errorf("not a service frame: %s", b)
	}
	v := Service{Kind: w.Kind, Index: *w.Index, Gap: w.Gap}
	for _, p := range w.Publishers {
		a, err := decodeHex(p)
		if err != nil || len(a) != 20 {
			return Service{}, fmt.Errorf("service frame: publisher %q", p)
		}
		v.Publishers = append(v.Publishers, a)
	}
	return v, nil
}

// servicePayload is the kind and payload of a service chunk: a ROSTER's
// payload is the Roster naming publishers, an EOS is empty.
func servicePayload(kind string, publishers [][]byte) (pb.Kind, []byte, error) {
	switch kind {
	case KindRoster:
		p, err := bps.RosterPayload(publishers)
		return pb.Kind_ROSTER, p, err
	case KindEndOfStream:
		if len(publishers) > 0 {
			return 0, nil, errors.New("wsclient: an EOS names no publishers")
		}
		return pb.Kind_EOS, nil, nil
	}
	return 0, nil, fmt.Errorf("wsclient: service kind %q: want %s or %s", kind, KindRoster, KindEndOfStream)
}

// PostService signs a ROSTER naming publishers (KindRoster) or the EOS
// (KindEndOfStream) at index with the admin's signer, under challenge —
// that of the admin's stream on the node, which its publishing session's
// challenge frame gave (Session.Challenge) — and posts it to POST
// /pubsub/{topic}/service, for the node to relay on that stream. A refusal
// is an *HTTPError (409 no admin stream with this challenge, or a stale
// index; 400 a chunk that does not validate).
func PostService(ctx context.Context, o Options, signer crypto.Signer, challenge []byte, kind string, index uint64, publishers [][]byte) error {
	if o.Mode == GSOC {
		return errors.New("wsclient: a GSOC cohort has no service feed")
	}
	k, payload, err := servicePayload(kind, publishers)
	if err != nil {
		return err
	}
	addr, err := signer.EthereumAddress()
	if err != nil {
		return err
	}
	data, _, err := bps.SignSOC(signer, addr.Bytes(), bps.SessionID(k, o.Topic, challenge, index), payload)
	if err != nil {
		return err
	}
	body, err := json.Marshal(map[string]any{"kind": kind, "index": index, "challenge": hex.EncodeToString(challenge), "soc": hex.EncodeToString(data)})
	if err != nil {
		return err
	}
	q, err := o.query()
	if err != nil {
		return err
	}
	u, err := o.endpoint(false, "/service", q)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("post service: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("post service: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return httpError("post service", resp)
	}
	defer func() { _ = resp.Body.Close() }()
	var out struct {
		Index *uint64 `json:"index"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("post service: %s: %w", resp.Status, err)
	}
	if out.Index == nil {
		return fmt.Errorf("post service: %s without the relayed index", resp.Status)
	}
	if *out.Index != index {
		return fmt.Errorf("post service: the node relayed index %d, want %d", *out.Index, index)
	}
	return nil
}

// PostService is the package's PostService for the admin's publishing
// session: its signer, under its stream's challenge.
func (s *Session) PostService(ctx context.Context, kind string, index uint64, publishers [][]byte) error {
	ch, _ := s.Challenge()
	if ch == nil || s.signer == nil {
		return errors.New("wsclient: not a publishing session with a challenge")
	}
	return PostService(ctx, s.o, s.signer, ch, kind, index, publishers)
}
