// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package wsclient

import (
	"bytes"
	"context"
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
	KindEndOfStream = "END_OF_STREAM"
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

// PostService signs svc as the next update of the admin's service feed of
// the cohort o names (bps.ServiceUpdate: a SOC under bps.ServiceID) and
// posts it to POST /pubsub/{topic}/service as id ‖ signature ‖ span ‖
// payload, for the node to relay on the admin's publisher stream. signer is
// the admin's; the node relays only with an admin session of the cohort open
// on it. A refusal is an *HTTPError (403 not the admin's, 409 no admin
// session or a stale index, …).
func PostService(ctx context.Context, o Options, signer crypto.Signer, svc *pb.ServiceMessage) error {
	if o.Mode == GSOC {
		return errors.New("wsclient: a GSOC cohort has no service feed")
	}
	m, err := bps.ServiceUpdate(signer, o.Topic, svc)
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
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(m.Data))
	if err != nil {
		return fmt.Errorf("post service: %w", err)
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("post service: %w", err)
	}
	if resp.StatusCode != http.StatusAccepted {
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
	if *out.Index != svc.Index {
		return fmt.Errorf("post service: the node relayed index %d, want %d", *out.Index, svc.Index)
	}
	return nil
}
