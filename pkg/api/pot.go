// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/gorilla/websocket"
)

// The pot profile on the WebSocket bridge (SWIP-65), query parameter pot=true
// with binding=feed: a publishing session's every update must be the pot
// node over the session's previous one (bps.PotCheck), and a receiving
// session recovers a gap by pot descent.

// typeEquivocation is the text frame of SWIP-65's protocol error.
const typeEquivocation = "equivocation"

// equivocationFrame tells the dApp that update top of addr's feed carries a
// pot that does not extend update index, which the session holds.
type equivocationFrame struct {
	Type   string `json:"type"`
	Addr   string `json:"addr"`
	Index  uint64 `json:"index"`
	Top    uint64 `json:"top"`
	Reason string `json:"reason"`
}

// signatureFields need the SOC of a delivery, which recovery by pot descent
// does not retrieve.
var signatureFields = []socField{fieldSignature, fieldRecoveredPubKey, fieldWrappedAddress}

// PotProfile reports whether the session recovers by pot descent: pot=true,
// and no field its dApp reads needs the update's signature
// (session.PotSession).
func (ss *wsSession) PotProfile() bool {
	return ss.plan.pot && !slices.ContainsFunc(ss.plan.fields, func(f socField) bool { return slices.Contains(signatureFields, f) })
}

// Equivocation queues the protocol error (session.PotSession); the session goes
// on: what to do is the dApp's decision.
func (ss *wsSession) Equivocation(ctx context.Context, e *session.EquivocationError) bool {
	ss.s.logger.Debug("pubsub: equivocation", "owner", hex.EncodeToString(e.Owner), "index", e.Index, "top", e.Top, "error", e.Err)
	b, _ := json.Marshal(equivocationFrame{Type: typeEquivocation, Addr: hex.EncodeToString(e.Owner), Index: e.Index, Top: e.Top, Reason: e.Err.Error()}) // cannot fail
	return ss.enqueueWait(ctx, websocket.TextMessage, b)
}

// checkPot holds a publication to the pot profile: it follows the
// session's previous update at the next index (followers count indices
// along the pot), and its payload is the node bps.PotNext makes over the
// previous one; a session's first update is only checked to be a node.
// Called by the session's reader only.
func (ss *wsSession) checkPot(b *pb.Broadcast) error {
	if !ss.plan.pot {
		return nil
	}
	index := b.Index
	payload := b.Soc[socMin:]
	var prev []byte
	if ss.potPrev != nil {
		if index != ss.potIndex+1 {
			return fmt.Errorf("%w: update %d after %d: the pot profile publishes every index", bps.ErrNotPotStep, index, ss.potIndex)
		}
		prev = ss.potPrev
	}
	if err := bps.PotCheck(prev, payload); err != nil {
		return err
	}
	ss.potPrev, ss.potIndex = payload, index
	return nil
}

var _ session.PotSession = (*wsSession)(nil)
