// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// SignHeartbeat is the root heartbeat of cohort sp at index seq, stating
// period and heads (publisher address → next index), signed by signer:
// what a root sends, for a test standing in for the root or forging one.
func SignHeartbeat(signer crypto.Signer, sp *Spec, seq uint64, period time.Duration, heads map[string]uint64) (*pb.Broadcast, error) {
	addr, err := addressOf(signer)
	if err != nil {
		return nil, err
	}
	hb := &pb.Heartbeat{PeriodMs: uint32(period / time.Millisecond)}
	for a, n := range heads {
		hb.Heads = append(hb.Heads, &pb.Head{Addr: []byte(a), Next: n})
	}
	payload, err := proto.Marshal(hb)
	if err != nil {
		return nil, err
	}
	return signBeat(beatSigner{signer: signer, addr: addr}, sp, seq, payload)
}

// HeartbeatKey is the address this node signs its heartbeats with.
func (s *Service) HeartbeatKey() []byte { return s.beatKey.addr }

// Why a node escaped on the heartbeat's evidence.
var (
	ErrBeatBehind = errBeatBehind
	ErrBeatMissed = errBeatMissed
)
