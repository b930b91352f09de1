// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"encoding/binary"
	"flag"
	"os"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protowire"
)

// Virtual time: the same nodes, the same pkg/bps code and the same
// transport, run inside a testing/synctest bubble, whose clock moves only
// when every goroutine of the run is blocked. The code under test then
// takes no time at all, however busy the host, so latency is what the
// links and the nodes' processors make it: every node has a processor of
// its own (streamtest.CPU), serving one charge at a time, and each write,
// each frame read and each signature checked is charged to it at the costs
// below, measured by the project's benchmarks (docs/benchmarks.md).
//
// synctest.Test is the only way into a bubble, and it runs in a test, so
// this mode runs from the package's test binary: `make sim-virtual
// ARGS='-nodes 10000'` (TestVirtual, virtual_test.go).

// VirtualTime is what the virtual-time mode charges.
type VirtualTime struct {
	// Virtual: the run is on a fake clock, in a synctest bubble. Set by
	// the test binary; bps-sim itself runs on the wall clock.
	Virtual bool `json:"virtual"`
	// Jitter is added to each write's link latency, uniformly in
	// [0, Jitter), seeded (both modes).
	Jitter Dur `json:"jitter"`
	// CPUValidate is a delivery's signature and hash check, charged to the
	// node that reads a SOC it has not taken yet (a second parent's copy
	// is dropped before the check, as pkg/bps's receiver does).
	CPUValidate Dur `json:"cpu_validate"`
	// CPUWrite is charged to a node for every write it makes (a frame, or
	// a batch of them), CPURead for every frame it reads.
	CPUWrite Dur `json:"cpu_write"`
	CPURead  Dur `json:"cpu_read"`

	// MemProfile, if set, is where the heap profile is written at the end
	// of the run, before anything stops (both modes).
	MemProfile string `json:"-"`
}

// The default costs, from docs/benchmarks.md:
//   - validation: BenchmarkValidate's CPU per 1 KB update (58.7–61.7 µs,
//     "Fast signature path");
//   - a frame: BenchmarkFanoutLibp2pPaced's CPU per delivery at N = 1,000
//     on bee's libp2p (10.5 µs: yamux, TLS and the syscall, both ends),
//     split evenly between the writer and the reader ("Fan-out at the
//     floor").
const (
	defaultCPUValidate = 60 * time.Microsecond
	defaultCPUWrite    = 5 * time.Microsecond
	defaultCPURead     = 5 * time.Microsecond
)

func defaultVirtualTime() VirtualTime {
	return VirtualTime{CPUValidate: Dur(defaultCPUValidate), CPUWrite: Dur(defaultCPUWrite), CPURead: Dur(defaultCPURead)}
}

// virtualFlags adds the flags of the virtual-time mode.
func virtualFlags(fs *flag.FlagSet, v *VirtualTime) {
	durFlag(fs, &v.Jitter, "jitter", "each write's extra link latency, uniform in [0, jitter), seeded")
	durFlag(fs, &v.CPUValidate, "cpu-validate", "virtual time: a node's CPU per delivery it checks (signature and hash)")
	durFlag(fs, &v.CPUWrite, "cpu-write", "virtual time: a node's CPU per write")
	durFlag(fs, &v.CPURead, "cpu-read", "virtual time: a node's CPU per frame read")
	fs.StringVar(&v.MemProfile, "memprofile", "", "write the heap profile at the end of the run, before anything stops, to this file (and the goroutines' to this file.goroutine)")
}

// writeMemProfile writes the heap profile -memprofile asks for, and the
// goroutines' beside it (.goroutine): where the memory of a node goes.
func (sc Scenario) writeMemProfile() error {
	if sc.MemProfile == "" {
		return nil
	}
	for _, p := range []struct{ name, path string }{{"heap", sc.MemProfile}, {"goroutine", sc.MemProfile + ".goroutine"}} {
		f, err := os.Create(p.path)
		if err != nil {
			return err
		}
		if err := pprof.Lookup(p.name).WriteTo(f, 0); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}

// transport is the streamtest configuration of the run: the links, and in
// virtual time every node's processor.
func (sc Scenario) transport() []streamtest.Option {
	opts := []streamtest.Option{streamtest.WithLinkConfig(streamtest.LinkConfig{
		Latency: time.Duration(sc.Latency), Jitter: time.Duration(sc.Jitter), Bandwidth: sc.Bandwidth, Loss: sc.Loss})}
	if sc.Virtual {
		v := sc.VirtualTime
		opts = append(opts, streamtest.WithCPU(func(swarm.Address) streamtest.CPU { return &nodeCPU{costs: &v} }))
	}
	return opts
}

// hop is what one hop of the tree costs at least: the link, and in virtual
// time the receiver's check of the update.
func (sc Scenario) hop() time.Duration {
	if sc.Virtual {
		return time.Duration(sc.Latency) + time.Duration(sc.CPUValidate)
	}
	return time.Duration(sc.Latency)
}

// nodeCPU is one node's costs. It tells a frame carrying a SOC from the
// others by its shape on the wire — a Broadcast (soc, kind, …), bare or in
// the multihop envelope — and remembers the last SOCs it took, so that a
// copy of one (from the second parent) costs a read, not a check.
type nodeCPU struct {
	costs *VirtualTime
	taken [takenWindow]uint64 // the first 8 bytes of the SOC ids taken, a ring
	next  int
}

// takenWindow is how many SOCs a node remembers: the copies of an update
// from two parents arrive within a few link latencies of each other.
const takenWindow = 8

// WriteCost is the writer's CPU for one write.
func (c *nodeCPU) WriteCost([]byte) time.Duration { return time.Duration(c.costs.CPUWrite) }

// ReadCost is the reader's CPU for the frames of one write; streamtest
// calls it once per write and serially per node.
func (c *nodeCPU) ReadCost(p []byte) time.Duration {
	var cost time.Duration
	for len(p) > 0 {
		size, n := binary.Uvarint(p)
		if n <= 0 || uint64(len(p)-n) < size {
			// A write that is not whole frames (a stream's buffer split
			// it): charged as one frame.
			return cost + time.Duration(c.costs.CPURead)
		}
		cost += time.Duration(c.costs.CPURead)
		if addr, ok := socOf(p[n : n+int(size)]); ok && c.take(addr) {
			cost += time.Duration(c.costs.CPUValidate)
		}
		p = p[n+int(size):]
	}
	return cost
}

// take records a SOC and reports whether it is new to the node.
func (c *nodeCPU) take(addr []byte) bool {
	k := binary.BigEndian.Uint64(addr)
	if slices.Contains(c.taken[:], k) {
		return false
	}
	c.taken[c.next] = k
	c.next = (c.next + 1) % takenWindow
	return true
}

// socOf returns the SOC id of a frame that carries one: a Broadcast
// (SWIP-74 Rev 8: field 1 the SOC, field 2 its kind), alone or as field 1
// of an envelope. Two parents' copies of a chunk carry the same SOC.
func socOf(b []byte) ([]byte, bool) {
	for range 2 {
		var first []byte
		kind := false
		for len(b) > 0 {
			num, typ, n := protowire.ConsumeTag(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
			if typ != protowire.BytesType {
				if num == 2 && typ == protowire.VarintType {
					kind = true
				}
				if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
					return nil, false
				}
				b = b[n:]
				continue
			}
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil, false
			}
			b = b[n:]
			if num == 1 {
				first = v
			}
		}
		if kind && len(first) >= socMinSize {
			return first[:swarm.HashSize], true
		}
		if first == nil {
			return nil, false
		}
		b = first
	}
	return nil, false
}

// socMinSize is the smallest SOC: id, signature and span.
const socMinSize = swarm.HashSize + swarm.SocSignatureSize + swarm.SpanSize

// VirtualResult is what a virtual-time run says beyond the rest: the floor
// with the nodes' checks, and when the last subscriber attached.
type VirtualResult struct {
	Hop               Dur     `json:"hop"`             // link + validation: one hop's floor
	FloorRatioP99     float64 `json:"floor_ratio_p99"` // of every delivery: latency ÷ (hops × hop)
	JoinTimeMax       Dur     `json:"join_time_max"`   // from a subscriber's first Subscribe to its first subscription, the slowest
	Attached          int     `json:"attached"`        // subscribers that ever attached
	Subscribers       int     `json:"subscribers"`
	JoinAnswersMedian int     `json:"join_answers_median"`
}

// collectVirtual fills res.Virtual, after collectTree.
func (s *sim) collectVirtual(res *Result) {
	if !s.sc.Virtual {
		return
	}
	v := &VirtualResult{Hop: Dur(s.sc.hop()), FloorRatioP99: res.Tree.FloorRatioP99, JoinAnswersMedian: res.Tree.JoinRoundTripsP50}
	for _, sl := range s.slots {
		sl.mu.Lock()
		v.Subscribers++
		if len(sl.intervals) > 0 {
			v.Attached++
			v.JoinTimeMax = Dur(max(time.Duration(v.JoinTimeMax), sl.joinTime))
		}
		sl.mu.Unlock()
	}
	res.Virtual = v
}

// writeVirtual adds the virtual-time rows to the table.
func writeVirtual(row func(k, format string, a ...any), res *Result) {
	v := res.Virtual
	if v == nil {
		return
	}
	sc := res.Scenario
	row("virtual time", "every node's CPU charged on a fake clock: %s per check, %s per write, %s per frame read; link %s + jitter < %s",
		sc.CPUValidate, sc.CPUWrite, sc.CPURead, sc.Latency, sc.Jitter)
	row("vs floor", "latency ÷ (hops × (link + one check) = hops × %s): p99 %.3f", v.Hop, v.FloorRatioP99)
	row("attached", "%d of %d subscribers; the slowest first join took %s", v.Attached, v.Subscribers, v.JoinTimeMax)
}
