// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/gorilla/websocket"
)

// checkBatch asks the node's storage whether it can stamp with batch, before
// the session joins anything: a batch that is not the node's, unknown, not
// usable or exhausted is refused with bee's status and reason (as bee's
// upload endpoints refuse it), never a 101 and a close at the first
// publication. It reports whether the session may go on.
func (s *Server) checkBatch(w http.ResponseWriter, r *http.Request, logger log.Logger, batch []byte) bool {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.JoinTimeout)
	defer cancel()
	err := s.opts.Storage.CheckBatch(ctx, batch)
	if err == nil {
		return true
	}
	logger.Debug("postage batch refused", "batch", batch, "error", err)
	code := http.StatusBadRequest
	var se interface{ StatusCode() int }
	if errors.As(err, &se) && se.StatusCode() >= 400 {
		code = se.StatusCode()
	}
	reason := err.Error()
	var be *bps.BatchError
	if errors.As(err, &be) {
		reason = be.Reason
	}
	jsonhttp.Respond(w, code, jsonhttp.StatusResponse{
		Code:    code,
		Message: "postage batch refused",
		Reasons: []jsonhttp.Reason{{Field: "swarm-postage-batch-id", Error: reason}},
	})
	return false
}

// persist uploads the update just published through the node's storage,
// stamped with the session's batch (SWIP-65: publish is upload): the SOC
// id, sig, data (span ‖ payload) — under a session feed the update for
// storage the dApp signed under the channel's own id keccak256(topic ‖
// index) (plan.storageUpdate), under implicit authorship the chunk itself —
// and its wrapped chunk. It returns once bee has pushed both, so an update
// a follower sees live has every earlier update of the session stored.
func (ss *wsSession) persist(id, sig, data []byte) error {
	ctx, cancel := context.WithTimeout(ss.s.ctx, ss.s.opts.PersistTimeout)
	defer cancel()
	return ss.s.opts.Storage.Upload(ctx, ss.plan.batch, ss.plan.addr, id, sig, data)
}

// Text frame types of SWIP-65 recovery.
const (
	typeRecovered = "recovered"
	typeGap       = "gap"
)

// feedRangeFrame announces updates from … to of addr's feed: recovered
// from storage (they follow, in index order, as binary frames like live
// ones), or a gap (missed, not recovered).
type feedRangeFrame struct {
	Type string `json:"type"`
	Addr string `json:"addr"`
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
}

// Recovered queues the announcement of recovered updates (session.GapSession).
func (ss *wsSession) Recovered(ctx context.Context, owner []byte, from, to uint64) bool {
	return ss.feedRange(ctx, typeRecovered, owner, from, to)
}

// Gap queues the report of updates missed and not recovered
// (session.GapSession).
func (ss *wsSession) Gap(ctx context.Context, owner []byte, from, to uint64) bool {
	return ss.feedRange(ctx, typeGap, owner, from, to)
}

func (ss *wsSession) feedRange(ctx context.Context, typ string, owner []byte, from, to uint64) bool {
	if !ss.plan.control() {
		return true
	}
	b, _ := json.Marshal(feedRangeFrame{Type: typ, Addr: hex.EncodeToString(owner), From: from, To: to}) // cannot fail
	return ss.enqueueWait(ctx, websocket.TextMessage, b)
}

// DeliverWait is Deliver for a recovery's burst: it waits for room in the
// session's queue, at most WriteTimeout — a dApp that reads nothing for
// that long is a slow consumer, as for Deliver (session.GapSession).
func (ss *wsSession) DeliverWait(ctx context.Context, v *session.View) bool {
	fields := ss.plan.fields
	frame, err := v.Frame(fieldsKey(fields), func(v *session.View) ([]byte, error) { return encodeFields(v, fields) })
	if err != nil {
		ss.fail(websocket.CloseInternalServerErr, err.Error())
		return false
	}
	if !ss.enqueueWait(ctx, websocket.BinaryMessage, frame) {
		return false
	}
	ss.s.metrics.Delivered.Inc()
	return true
}

// enqueueWait queues a frame, waiting for room at most WriteTimeout (then
// the session is slow), or until the session or ctx ends.
func (ss *wsSession) enqueueWait(ctx context.Context, typ int, data []byte) bool {
	if ss.enqueue(typ, data) {
		return true
	}
	t := time.NewTimer(ss.s.opts.WriteTimeout)
	defer t.Stop()
	select {
	case ss.queue <- outFrame{typ: typ, data: data}:
		return true
	case <-ss.quit:
	case <-ctx.Done():
	case <-t.C:
		ss.slow()
	}
	return false
}

var _ session.GapSession = (*wsSession)(nil)
