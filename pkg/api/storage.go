// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
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

// persist uploads msg, just published, through the node's storage stamped
// with the session's batch (SWIP-65: publish is upload): the SOC under its
// signed id — for a feed update keccak256(topic ‖ index), not the bare
// index the frame carries — and its wrapped chunk. It returns once bee has
// pushed both, so an update a follower sees live has every earlier update of
// the session stored.
func (ss *session) persist(msg *pb.Message) error {
	p := ss.plan
	slot := msg.Data[:idSize]
	id := slot
	if p.spec.Binding == pb.TopicBinding_FEED_TOPIC && p.layout == layoutIndex {
		id = bps.FeedID(p.spec.Topic, binary.BigEndian.Uint64(slot[idSize-indexSize:]))
	}
	sig := msg.Data[idSize : idSize+swarm.SocSignatureSize]
	data := msg.Data[idSize+swarm.SocSignatureSize:]
	ctx, cancel := context.WithTimeout(ss.s.ctx, ss.s.opts.PersistTimeout)
	defer cancel()
	return ss.s.opts.Storage.Upload(ctx, p.batch, p.addr, id, sig, data)
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

// Recovered queues the announcement of recovered updates (bps.GapSession).
func (ss *session) Recovered(owner []byte, from, to uint64) bool {
	return ss.feedRange(typeRecovered, owner, from, to)
}

// Gap queues the report of updates missed and not recovered
// (bps.GapSession).
func (ss *session) Gap(owner []byte, from, to uint64) bool {
	return ss.feedRange(typeGap, owner, from, to)
}

func (ss *session) feedRange(typ string, owner []byte, from, to uint64) bool {
	if !ss.plan.control() {
		return true
	}
	if !ss.sendControl(feedRangeFrame{Type: typ, Addr: hex.EncodeToString(owner), From: from, To: to}) {
		ss.slow()
		return false
	}
	return true
}
