// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// The root heartbeat (docs/protocol.md, "The root heartbeat"; issue 24).
// The gap escape (escape.go) needs a gap: an index both parents passed
// over. Two parents that withhold *every* update of a publisher while
// passing the service feed leave none — only silence, which a quiet
// publisher makes too. So the root says, at a period it states, what it
// has accepted: every period it signs a HEARTBEAT chunk (a kind of its
// own, 5) whose payload names each publisher's next index at the root,
// and sends it down every multihop subscriber stream; each relay checks it
// and passes it on, once, to its own. A node then judges:
//
//   - a heartbeat that says a publisher's next index is N, when this node's
//     cursor for it is still below N escapeGrace + reorderWait later, is
//     a gap both parents passed over: the escape (one of the two left at
//     random, for a parent the root's probe finds), with its bounds;
//   - no heartbeat for beatMissed periods (plus escapeGrace) is a gap of
//     its own: the parents drop the heartbeat too.
//
// A quiet publisher moves nobody: its index does not move at the root, and
// the heartbeat keeps coming. Nobody is blamed (a starved honest relay
// passes on what it was given), as with a gap.
//
// The key. The root signs with its bee signer (Options.Signer), whose
// Ethereum address bee's handshake binds to its overlay: bee v2.8.1's
// handshake sends a bzz.Address (overlay, underlays, signature, nonce,
// Ethereum address) that the receiver verifies — the overlay is
// keccak256(address ‖ network id ‖ nonce), the signature the key's — and
// keeps in its addressbook, and hands a handler the peer's address as
// p2p.Peer.EthereumAddress. A subscriber, however deep, made its first
// Join at the root (the broker it names) before any referral, on a stream
// bee authenticated as the root's overlay: the root states the address in
// that Ack (heartbeat_key, with heartbeat_ms, its period), on OK and on
// FULL alike, and on every rejoin and escape, which start at the root too.
// A node takes the terms from an Ack of the root's only; a relay's Ack
// never carries them. A HEARTBEAT signed by any other key is a parent's
// forgery (an honest relay passes only what verified): a violation.
//
// Cost: one signature per cohort per period at the root, one signature
// check per node per period, and one frame of about 150 bytes plus 30 per
// publisher on each subscriber stream — never charged as a delivery (the
// parent's writer skips it, the child's meter never sees it).

// Bounds of the heartbeat.
const (
	DefaultHeartbeat = 2 * time.Second
	minHeartbeat     = 10 * time.Millisecond
	maxHeartbeat     = time.Minute
	maxBeatHeads     = 128 // publishers a heartbeat names: the cohort's feed cursors, most advanced first past it
	beatMissed       = 2   // periods without a heartbeat that are a gap
	maxBeatBases     = 2 * maxBeatHeads
)

// Errors of a heartbeat a parent sent.
var (
	errBeatKey   = errors.New("heartbeat not signed by the root's key")
	errBeatShape = errors.New("malformed heartbeat")
	// Why a node escaped on the heartbeat's evidence (EventHeartbeat).
	errBeatMissed = errors.New("no root heartbeat for two periods: both parents drop it")
	errBeatBehind = errors.New("the root's heartbeat named an update both parents passed over")
)

// beatSigner is what a root signs its heartbeats with.
type beatSigner struct {
	signer crypto.Signer
	addr   []byte // its Ethereum address
}

// initBeat takes Options.Signer, or draws a key.
func (s *Service) initBeat() error {
	signer := s.opts.Signer
	if signer == nil {
		k, err := crypto.GenerateSecp256k1Key()
		if err != nil {
			return fmt.Errorf("bps: heartbeat key: %w", err)
		}
		signer = crypto.NewDefaultSigner(k)
	}
	addr, err := addressOf(signer)
	if err != nil {
		return fmt.Errorf("bps: heartbeat key: %w", err)
	}
	s.beatKey = beatSigner{signer: signer, addr: addr}
	return nil
}

// beats reports whether the root of cohort sp sends heartbeats: explicit
// FEED_TOPIC, where each publisher's feed has a cursor.
func (s *Service) beats(sp *Spec) bool {
	return s.opts.Heartbeat > 0 && sp.Binding == pb.TopicBinding_FEED_TOPIC && sp.Explicit()
}

// beatChallenge is what a heartbeat carries as its challenge:
// keccak256(the cohort's canonical spec), binding it to the whole spec.
func (sp *Spec) beatChallenge() []byte { return keccak(sp.canonical) }

// rootBeat is the root's heartbeat of one cohort; under the cohort's mu.
type rootBeat struct {
	timer *time.Timer
	seq   uint64 // the last heartbeat's index: its Unix time in ms, kept increasing
}

func (b *rootBeat) stop() {
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
}

// armBeatLocked schedules cohort c's next heartbeat, if it sends any; the
// caller holds c.mu.
func (s *Service) armBeatLocked(c *cohort) {
	if !s.beats(c.spec) || c.dead {
		return
	}
	c.beat.timer = time.AfterFunc(s.opts.Heartbeat, func() { s.beat(c) })
}

// stateBeat sets a root's heartbeat terms on ack, its answer to a
// multihop Join for cohort sp.
func (s *Service) stateBeat(ack *pb.Ack, sp *Spec) {
	if s.beats(sp) {
		ack.HeartbeatMs = uint32(s.opts.Heartbeat / time.Millisecond)
		ack.HeartbeatKey = s.beatKey.addr
	}
}

// beat signs cohort c's heartbeat and sends it to every multihop
// subscriber stream, then arms the next.
func (s *Service) beat(c *cohort) {
	if !s.track() {
		return
	}
	defer s.done()
	c.mu.Lock()
	if c.dead {
		c.mu.Unlock()
		return
	}
	c.beat.seq = max(c.beat.seq+1, uint64(time.Now().UnixMilli()))
	seq, heads, any := c.beat.seq, headsLocked(c), false
	for m := range c.children {
		any = any || beatsTo(m)
	}
	c.mu.Unlock()
	var frame []byte
	if any {
		payload, err := proto.Marshal(&pb.Heartbeat{PeriodMs: uint32(s.opts.Heartbeat / time.Millisecond), Heads: heads})
		if err == nil {
			var b *pb.Broadcast
			if b, err = signBeat(s.beatKey, c.spec, seq, payload); err == nil {
				frame = encodeFrame(b)
			}
		}
		if err != nil {
			s.logger.Debug("heartbeat not signed", "cohort", c.spec.String(), "error", err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return
	}
	if frame != nil {
		s.beatDownLocked(c, frame)
	}
	s.armBeatLocked(c)
}

// headsLocked is what the root of c has accepted: each publisher's next
// index, at most maxBeatHeads (the most advanced, past it). Under c.mu.
func headsLocked(c *cohort) []*pb.Head {
	heads := make([]*pb.Head, 0, min(len(c.cursors), maxBeatHeads))
	for o, n := range c.cursors {
		heads = append(heads, &pb.Head{Addr: []byte(o), Next: n})
	}
	if len(heads) > maxBeatHeads {
		slices.SortFunc(heads, func(a, b *pb.Head) int {
			switch {
			case a.Next > b.Next:
				return -1
			case a.Next < b.Next:
				return 1
			}
			return bytes.Compare(a.Addr, b.Addr)
		})
		heads = heads[:maxBeatHeads]
	}
	return heads
}

// signBeat is the heartbeat of cohort sp at index seq carrying payload,
// signed by key.
func signBeat(key beatSigner, sp *Spec, seq uint64, payload []byte) (*pb.Broadcast, error) {
	ch := sp.beatChallenge()
	data, _, err := SignSOC(key.signer, key.addr, SessionID(pb.Kind_HEARTBEAT, sp.Topic, ch, seq), payload)
	if err != nil {
		return nil, err
	}
	return &pb.Broadcast{Soc: data, Kind: pb.Kind_HEARTBEAT, Challenge: ch, Index: seq}, nil
}

// beatsTo reports whether child stream m is sent heartbeats: a multihop
// stream that never publishes (a subscription's), claimed or not. Any
// other peer would drop it as an unknown kind. Under c.mu.
func beatsTo(m *member) bool {
	return m.listen && m.codec == codecEnvelope
}

// beatDownLocked queues a heartbeat frame on every child stream that is
// sent heartbeats, uncharged; a full queue resets the stream, as any
// frame's does. Under c.mu.
func (s *Service) beatDownLocked(c *cohort, frame []byte) {
	for m := range c.children {
		if beatsTo(m) {
			s.offerOrReset(c, m, outFrame{b: frame, kind: kindBroadcast, free: true})
		}
	}
}

// verifyBeat checks heartbeat b of cohort sp against the root's key: the
// id its index and the spec give, the signature key's, the payload a
// Heartbeat naming at most maxBeatHeads 20-byte addresses. fromRoot: it
// came on a stream from the root itself, whose word it is — the signature
// is what a relay's copy needs, and is not checked (a root's direct
// children, its largest audience, spend no signature check per period).
func verifyBeat(sp *Spec, b *pb.Broadcast, key []byte, fromRoot bool) (*pb.Heartbeat, error) {
	if len(b.Soc) < socHeaderSize || len(b.Soc) > maxSOCDataSize || !bytes.Equal(b.Challenge, sp.beatChallenge()) {
		return nil, errBeatShape
	}
	if !bytes.Equal(b.Soc[:idSize], SessionID(pb.Kind_HEARTBEAT, sp.Topic, b.Challenge, b.Index)) {
		return nil, errBeatShape
	}
	payload := b.Soc[socHeaderSize:]
	if !fromRoot {
		sc, err := readSOC(b.Soc)
		if err != nil {
			return nil, errBeatShape
		}
		if !bytes.Equal(sc.OwnerAddress(), key) {
			return nil, errBeatKey
		}
		payload = sc.WrappedChunk().Data()[swarm.SpanSize:]
	}
	hb := new(pb.Heartbeat)
	if err := proto.Unmarshal(payload, hb); err != nil || len(hb.Heads) > maxBeatHeads {
		return nil, errBeatShape
	}
	for _, h := range hb.Heads {
		if len(h.Addr) != AddressSize {
			return nil, errBeatShape
		}
	}
	return hb, nil
}

// beat takes a HEARTBEAT parent stream cs sent (the receiver's onBeat):
// dropped as an unknown kind while the node knows no root key, and
// unchecked if its index is not past the last taken (the other parent's
// copy: one signature check per period, not two); a violation if it does
// not verify; otherwise passed to this node's children and judged.
func (sub *Subscription) beat(cs *clientStream, b *pb.Broadcast) error {
	j := sub.judge
	key, last := j.beatKeySeq()
	if key == nil {
		sub.drop(cs, CounterUnknownKind, b.Index)
		return nil
	}
	if b.Index <= last {
		return nil // the other parent's copy, or an old one: nothing to check
	}
	hb, err := verifyBeat(sub.spec, b, key, cs.peer.Equal(sub.root))
	if err != nil {
		sub.drop(cs, CounterInvalidSOC, b.Index)
		return violationf("parent sent a heartbeat that is not the root's: %w", err)
	}
	if !j.heard(b.Index, hb) {
		return nil // the other parent's copy, or an old one
	}
	sub.s.metrics.Heartbeats.Inc()
	sub.s.trace(Event{Kind: EventHeartbeat, Cohort: sub.spec.String(), Peer: cs.peer, Index: b.Index})
	sub.mu.Lock()
	rl := sub.relayLocked()
	sub.mu.Unlock()
	if rl != nil {
		frame := encodeFrame(b)
		c := rl.c
		c.mu.Lock()
		if !c.dead {
			sub.s.beatDownLocked(c, frame)
		}
		c.mu.Unlock()
	}
	return nil
}

// beatState is what a judge holds of the root's heartbeat; under its mu.
type beatState struct {
	key    []byte        // the root's heartbeat key, as its Ack stated it
	period time.Duration // the root's period; 0: it sends none
	seq    uint64        // the last heartbeat taken
	last   time.Time     // when it was taken, or the watch began
	base   map[string]uint64
	behind []gapRef    // what the last heartbeat said this node lacked
	check  *time.Timer // judges behind
	watch  *time.Timer // the missed-period watch
	wgen   uint64      // numbers the watch: a callback of one replaced is a no-op
	gaps   uint64      // heartbeat gaps seen (Subscription.BeatGaps)
}

// beatKey is the root's heartbeat key, nil if its Ack stated none.
func (j *judge) beatKey() []byte {
	k, _ := j.beatKeySeq()
	return k
}

// beatKeySeq is the root's heartbeat key and the last heartbeat taken.
func (j *judge) beatKeySeq() ([]byte, uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.hb.key, j.hb.seq
}

// rootTerms takes the heartbeat terms of the Ack (or FULL answer, err)
// that peer gave a Join, if peer is the cohort's root.
func (j *judge) rootTerms(peer swarm.Address, ack *pb.Ack, err error) {
	if !peer.Equal(j.root) {
		return
	}
	if ack == nil {
		var full *FullError
		if !errors.As(err, &full) || full.ack == nil {
			return
		}
		ack = full.ack
	}
	period := time.Duration(ack.GetHeartbeatMs()) * time.Millisecond
	key := ack.GetHeartbeatKey()
	if len(key) != AddressSize || period < minHeartbeat || period > maxHeartbeat {
		key, period = nil, 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stopped {
		return
	}
	if !bytes.Equal(key, j.hb.key) {
		j.hb.seq = 0 // another root key: its own sequence
	}
	j.hb.key, j.hb.period = key, period
	if j.hb.watch != nil {
		j.hb.watch.Stop()
		j.hb.watch = nil
	}
	if period > 0 {
		j.hb.last = time.Now()
		j.armWatchLocked(j.missedAfter())
	}
}

// missedAfter is how long without a heartbeat is a gap; under j.mu.
func (j *judge) missedAfter() time.Duration { return beatMissed*j.hb.period + escapeGrace }

func (j *judge) armWatchLocked(d time.Duration) {
	j.hb.wgen++
	gen := j.hb.wgen
	j.hb.watch = time.AfterFunc(d, func() { j.watched(gen) })
}

// watched runs when no heartbeat may have come for missedAfter: if none
// did, the node's parents drop it — a gap of its own — and the node
// escapes as from a gap both passed over.
func (j *judge) watched(gen uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if gen != j.hb.wgen {
		return // replaced meanwhile (rootTerms)
	}
	j.hb.watch = nil
	if j.stopped || j.hb.period == 0 {
		return
	}
	after := j.missedAfter()
	if left := after - time.Since(j.hb.last); left > 0 {
		j.armWatchLocked(left)
		return
	}
	j.hb.last = time.Now() // the next judgement a whole wait from now
	j.armWatchLocked(after)
	if j.beatJudgedLocked() {
		j.hb.gaps++
		j.s.metrics.HeartbeatGaps.Inc()
		j.s.trace(Event{Kind: EventHeartbeat, Cohort: j.spec.String(), Index: j.hb.seq, Err: errBeatMissed})
		j.escapeNowLocked(j.hb.seq)
	}
}

// beatJudgedLocked reports whether the node's parents are the ones a
// heartbeat judges: one or two, none the root (which gives what it
// accepts). A single parent is judged too — the heartbeat is evidence
// against every parent the node has, where a gap needs two. Under j.mu.
func (j *judge) beatJudgedLocked() bool {
	if len(j.parents) == 0 || len(j.parents) > 2 {
		return false
	}
	for _, q := range j.parents {
		if q.p.cs.peer.Equal(j.root) {
			return false
		}
	}
	return true
}

// heard takes a verified heartbeat at index seq: false if it is not newer
// than the last. The publishers it says moved past this node's cursor
// since the first heartbeat that named them are judged escapeGrace +
// reorderWait later.
func (j *judge) heard(seq uint64, hb *pb.Heartbeat) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.stopped || seq <= j.hb.seq {
		return false
	}
	j.hb.seq, j.hb.last = seq, time.Now()
	if j.hb.base == nil {
		j.hb.base = make(map[string]uint64)
	}
	var behind []gapRef
	for _, h := range hb.Heads {
		o := string(h.Addr)
		base, ok := j.hb.base[o]
		if !ok {
			// Named for the first time: what it accepted before this
			// node heard of it is no evidence (no history, SWIP-74).
			if len(j.hb.base) < maxBeatBases {
				j.hb.base[o] = h.Next
			}
			continue
		}
		if h.Next > base && j.s.cursors.get(j.spec.feedKey(h.Addr)) < h.Next {
			behind = append(behind, gapRef{owner: o, index: h.Next - 1})
		}
	}
	if len(behind) > 0 && j.hb.check == nil && j.beatJudgedLocked() {
		j.hb.behind = behind
		j.hb.check = time.AfterFunc(escapeGrace+reorderWait, j.checkBehind)
	}
	return true
}

// checkBehind judges what a heartbeat said the node lacked: one still
// missing is a gap both parents passed over.
func (j *judge) checkBehind() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.hb.check = nil
	if j.stopped || !j.beatJudgedLocked() {
		return
	}
	for _, g := range j.hb.behind {
		if j.s.cursors.get(j.spec.feedKey([]byte(g.owner))) <= g.index {
			j.hb.gaps++
			j.s.metrics.HeartbeatGaps.Inc()
			j.s.trace(Event{Kind: EventHeartbeat, Cohort: j.spec.String(), Index: g.index, Err: errBeatBehind})
			j.escapeNowLocked(g.index)
			break
		}
	}
	j.hb.behind = nil
}

// stopBeatLocked stops the heartbeat's timers; under j.mu.
func (j *judge) stopBeatLocked() {
	for _, t := range []**time.Timer{&j.hb.check, &j.hb.watch} {
		if *t != nil {
			(*t).Stop()
			*t = nil
		}
	}
}

// BeatGaps counts the gaps this subscription saw through the root's
// heartbeat: an index it said was accepted that never came, or missed
// periods (heartbeat.go).
func (sub *Subscription) BeatGaps() uint64 {
	j := sub.judge
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.hb.gaps
}

// HeartbeatKey is the address the cohort's root stated, in its Ack, that
// it signs its heartbeats with (its bee signer's: the Ethereum address
// bee's handshake binds to its overlay); nil if it stated none.
func (sub *Subscription) HeartbeatKey() []byte {
	k := sub.judge.beatKey()
	return append([]byte(nil), k...)
}
