// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/gorilla/mux"
)

// maxServiceBody is the largest service SOC: id ‖ signature ‖ span ‖ a
// 4096-byte payload.
const maxServiceBody = idSize + socFrameMax

// serviceResponse answers a relayed service SOC.
type serviceResponse struct {
	Index uint64 `json:"index"`
}

// serviceHandler serves POST /pubsub/{topic}/service: the admin's control
// plane (SWIP-60). The body is a service SOC the admin's dApp signed —
// id(32) ‖ signature(65) ‖ span(8, LE) ‖ payload, the payload a
// ServiceMessage, the id keccak256("bps-service:v1" ‖ topic ‖
// uint64BE(index)) — which the node checks as the broker will (the admin's
// signature at keccak256(id ‖ admin), a service SOC of this topic, newer
// than the service index the node holds) and relays on the admin's
// publisher stream of a session on this node: the node holds no keys, so
// it cannot claim the admin's stream itself. The broker answers nothing;
// 202 means relayed.
func (s *Server) serviceHandler(w http.ResponseWriter, r *http.Request) {
	logger := s.logger.WithName("pubsub_service").Build()
	topic, err := parseTopic(mux.Vars(r)["topic"])
	if err != nil {
		badRequest(w, logger, "invalid path params", jsonhttp.Reason{Field: "topic", Error: err.Error()})
		return
	}

	var q serviceQuery
	if reasons := s.mapParams(queryGetter(r), &q); len(reasons) > 0 {
		badRequest(w, logger, "invalid query params", reasons...)
		return
	}
	var reasons reasonList
	ref := s.parsePeerParam(q.Peer, &reasons)
	sp := buildSpec(topic, specParams{binding: q.Binding, admin: q.Admin, publishers: q.Publishers, closed: q.Closed, history: q.History}, &reasons)
	if len(reasons) > 0 {
		badRequest(w, logger, "invalid query params", reasons...)
		return
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxServiceBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			jsonhttp.RequestEntityTooLarge(w, fmt.Sprintf("a service SOC is at most %d bytes", maxServiceBody))
			return
		}
		badRequest(w, logger, "read body: "+err.Error())
		return
	}
	msg, svc, status, err := serviceSOC(sp, body)
	if err != nil {
		logger.Debug("service SOC refused", "error", err)
		jsonhttp.Respond(w, status, err.Error())
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.opts.JoinTimeout)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	broker, err := s.peers.resolve(ctx, ref)
	if err != nil {
		s.joinFailed(w, logger, err)
		return
	}

	key := cohortKey(broker, sp)
	if rm := s.lookupRoom(key); rm != nil {
		if st := rm.service(); st.seen && svc.Index < st.next {
			jsonhttp.Conflict(w, fmt.Sprintf("stale service index %d: this node holds the admin's service feed up to index %d; the next is %d", svc.Index, st.next-1, st.next))
			return
		}
	}
	e := s.holdPub(key + string(sp.Admin))
	if e == nil {
		jsonhttp.Conflict(w, fmt.Sprintf("no admin session on this node: open GET /pubsub/{topic}?addr=%x (with this spec and peer) first", sp.Admin))
		return
	}
	defer s.releasePub(e)
	if err := e.p.Send(ctx, msg); err != nil {
		logger.Debug("relay failed", "error", err)
		jsonhttp.BadGateway(w, "relay: "+err.Error())
		return
	}
	s.metrics.ServiceRelayed.Inc()
	// The node takes what it relayed as the roster in force: the admin's
	// stream never gets its own service SOCs back, and a session here may
	// be waiting for this very roster.
	e.room.deliver(bps.Delivery{Index: svc.Index, Address: swarm.NewAddress(msg.Address), Owner: sp.Admin, Data: msg.Data, Service: svc})
	jsonhttp.Accepted(w, serviceResponse{Index: svc.Index})
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
