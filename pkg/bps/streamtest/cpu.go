// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest

import (
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// CPU is what a node's processor costs it, for a Network on a fake clock
// (a synctest bubble), where the code under test takes no time of its own:
// every write charges the writer, every write that arrives charges its
// reader, on one processor per node that serves one charge at a time. A
// node that validates sixteen deliveries is busy sixteen times as long as
// with one, and what it writes or reads meanwhile waits.
//
//   - WriteCost is charged to the writer when it writes p; the bytes leave
//     (and the link's latency starts) when the node's processor has served
//     it.
//   - ReadCost is charged to the reader when the bytes of a write p have
//     crossed the link and the reader looks for them; they become readable
//     when the processor has served it (one that costs nothing still waits
//     for the processor to be free). Writes are taken in the order the
//     reader's streams find them, each stream's in order.
//
// Both are called one at a time per node, under the stream's lock and the
// node's processor's (a leaf): they must not block; p must not be kept.
// A Network on a real clock may have a CPU too, and its costs come on top
// of the real ones.
type CPU interface {
	WriteCost(p []byte) time.Duration
	ReadCost(p []byte) time.Duration
}

// WithCPU gives every node the Network makes (and every incarnation
// Restart makes) the processor cpu returns for its overlay; nil: none,
// writes and reads cost nothing.
func WithCPU(cpu func(overlay swarm.Address) CPU) Option {
	return func(o *options) { o.cpu = cpu }
}

// processor is a node's CPU: its costs and when it is next free.
type processor struct {
	cost CPU
	mu   sync.Mutex // leaf
	busy time.Time  // real time the processor finishes its last charge
}

// occupy charges what cost says b costs at real time now and returns when
// it is served.
func (p *processor) occupy(now time.Time, b []byte, cost func([]byte) time.Duration) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy = maxTime(now, p.busy).Add(max(cost(b), 0))
	return p.busy
}

// writeDelay charges the write of b and returns how long from now its bytes
// wait for the processor; 0 without a CPU.
func (nd *Node) writeDelay(b []byte) time.Duration {
	if nd.cpu == nil {
		return 0
	}
	now := time.Now()
	return max(nd.cpu.occupy(now, b, nd.cpu.cost.WriteCost).Sub(now), 0)
}

// Busy is the real time at which the node's processor has served every
// charge so far; zero without a CPU.
func (nd *Node) Busy() time.Time {
	if nd.cpu == nil {
		return time.Time{}
	}
	nd.cpu.mu.Lock()
	defer nd.cpu.mu.Unlock()
	return nd.cpu.busy
}
