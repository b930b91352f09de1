// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// violation is a provable protocol violation by the peer: its stream is reset
// and the peer blocklisted.
type violation struct{ err error }

func (v *violation) Error() string { return "protocol violation: " + v.err.Error() }
func (v *violation) Unwrap() error { return v.err }

func violationf(format string, a ...any) error {
	return &violation{err: fmt.Errorf(format, a...)}
}

// handler is the broker side of a BPS stream. It is resident: it returns when
// the stream ends, after reading the Join, answering it, and serving the
// stream in its role. It returns p2p.NewBlockPeerError only for a violation.
//
// A member's handler is its stream's reader, waiting in a read for as long
// as the stream lives; so everything but the read loop is in functions
// that are not on the stack while it waits (accept, served, release), and
// what they share is in a handling. A goroutine's stack that grew to 8 KiB
// is halved by the GC only if less than a quarter of it, Go's 800-byte
// guard included, is in use where the goroutine waits.
func (s *Service) handler(ctx context.Context, peer p2p.Peer, stream p2p.Stream) (err error) {
	h, err := s.accept(ctx, peer, stream)
	if h == nil {
		return err
	}
	defer func() { err = s.release(h, err) }()
	return s.served(h, s.readLoop(h.m, h.fr))
}

// handling is a member stream's handler's state while its reader runs.
type handling struct {
	peer    p2p.Peer
	stream  p2p.Stream
	sp      *Spec
	m       *member      // set once the Join is admitted
	fr      *frameReader // m's reader
	stop    func() bool  // ends the context.AfterFunc that kills m when the handler's context ends
	stopSvc func() bool  // the same for the service's
}

// accept reads a stream's Join and answers it. It returns the handling of
// a member whose Ack it wrote, which the handler serves and then releases;
// nil, and the handler's error, for a stream it ended (refused, referred,
// told the cohort ended, or failed).
//
//go:noinline
func (s *Service) accept(ctx context.Context, peer p2p.Peer, stream p2p.Stream) (*handling, error) {
	if !s.track() {
		_ = stream.Reset()
		return nil, ErrClosed
	}
	h := &handling{peer: peer, stream: stream}
	err := s.handshake(ctx, h)
	switch {
	case h.m != nil && err == nil:
		return h, nil
	case h.m != nil: // admitted, and failed before its reader started
		return nil, s.release(h, err)
	}
	err = s.unwind(peer, stream, err)
	s.done()
	return nil, err
}

// release ends the handling of a member whose handler returns err, and
// returns the handler's error.
func (s *Service) release(h *handling, err error) error {
	if h.stopSvc != nil {
		h.stopSvc()
	}
	if h.stop != nil {
		h.stop()
	}
	h.m.meter.Load().done()
	if gone := s.reg.detach(h.m); len(gone) > 0 {
		s.releaseLeases(h.sp, gone)
	}
	s.trace(Event{Kind: EventLeave, Cohort: h.sp.String(), Peer: h.peer.Address, Err: err})
	err = s.unwind(h.peer, h.stream, err)
	s.done()
	return err
}

// handshake reads the Join and answers it; a Join it admits sets h.m.
func (s *Service) handshake(ctx context.Context, h *handling) error {
	peer, stream := h.peer, h.stream
	if s.opts.PeerCheck != nil {
		if err := s.opts.PeerCheck(ctx, peer, stream); err != nil {
			if de := (*p2p.DisconnectError)(nil); errors.As(err, &de) {
				return err // bee closes the connection, without blocklisting
			}
			return violationf("peer check: %w", err)
		}
	}

	fr := newFrameReader(stream)
	join := new(pb.Join)
	if err := s.withDeadline(ctx, stream, s.opts.HandshakeTimeout, func() error { return fr.read(join) }); err != nil {
		if errors.Is(err, errMalformed) {
			return violationf("join: %w", err)
		}
		return fmt.Errorf("read join: %w", err)
	}
	sp, status := specFromPB(join.Cohort)
	if status == pb.Status_OK && len(join.Addr) != AddressSize {
		status = pb.Status_REJECTED // Rev 8: every stream declares its 20-byte address
	}
	if status != pb.Status_OK {
		return s.refuse(ctx, peer, stream, status, join)
	}
	if join.Multihop && join.Refer {
		// A child asking where else to attach (SWIP-61, self-healing):
		// candidates only, never a second stream to this node.
		return s.refer(ctx, peer, stream, sp, join)
	}
	return s.admit(ctx, h, fr, sp, join)
}

// unwind ends a stream whose handler returns err: a clean close, or a
// reset, and a violation becomes p2p.NewBlockPeerError, counted.
func (s *Service) unwind(peer p2p.Peer, stream p2p.Stream, err error) error {
	if err == nil {
		_ = stream.FullClose()
		return nil
	}
	_ = stream.Reset()
	var v *violation
	if errors.As(err, &v) {
		s.metrics.Violations.Inc()
		s.trace(Event{Kind: EventViolation, Peer: peer.Address, Err: err})
		s.logger.Debug("bps: peer violated the protocol", "peer_address", peer.Address, "error", err)
		return p2p.NewBlockPeerError(s.opts.BlocklistDuration, err)
	}
	return err
}

// admit attaches a Join's stream to its cohort, as h.m, and starts serving
// it; a node at capacity answers a multihop joiner with candidates in its
// subtree.
func (s *Service) admit(ctx context.Context, h *handling, fr *frameReader, sp *Spec, join *pb.Join) error {
	peer, stream := h.peer, h.stream
	// This node speaks the multihop envelope (SWIP-61): a joiner that
	// does too gets it on its stream; any other stays bare.
	ack := &pb.Ack{Status: pb.Status_OK, Multihop: join.Multihop}
	challenge, err := s.challengeFor(ctx, peer.Address, sp, join)
	if err != nil {
		return s.refuse(ctx, peer, stream, pb.Status_FULL, join)
	}
	m, status, ended := s.reg.attach(peer.Address, stream, negotiated(join, ack), sp, join, challenge, replayOf(join))
	if ended != nil {
		return s.tellEnded(ctx, peer, stream, sp, join, ended)
	}
	if status == pb.Status_FULL && join.Multihop {
		s.releaseLease(sp, challenge)
		return s.refer(ctx, peer, stream, sp, join)
	}
	if status != pb.Status_OK {
		s.releaseLease(sp, challenge)
		return s.refuse(ctx, peer, stream, status, join)
	}
	h.m, h.fr, h.sp = m, fr, sp // release detaches m

	ack.Challenge = m.challenge
	// Lazy push (lazy.go): the Join's mode, where this node speaks it.
	ack.Push = s.negotiatePush(m, join)
	// The Ack states this node's own depth in the cohort (SWIP-61;
	// docs/protocol.md, "Depth"): a broker is the root, 0.
	ack.Depth = m.c.ackDepth(m)
	if _, root := m.c.role.(rootRole); root && join.Multihop {
		s.stateBeat(ack, sp)
	}
	s.metrics.Joins.WithLabelValues("OK").Inc()
	s.trace(Event{Kind: EventJoin, Cohort: sp.String(), Peer: peer.Address, Status: pb.Status_OK.String()})
	return s.serve(ctx, h, encodeFrame(ack))
}

// statusEnded labels the Joins told that their cohort ended (metrics and
// trace); on the wire they are answered OK.
const statusEnded = "ENDED"

// tellEnded answers a Join for a cohort that ended: the Ack (with the
// challenge for a declared address, as for any Join), the cohort's
// EOS as the stream's first delivery, then the broker closes its side.
// What the peer sends meanwhile (its claim) is read and dropped until its
// close, for at most EndGrace.
func (s *Service) tellEnded(ctx context.Context, peer p2p.Peer, stream p2p.Stream, sp *Spec, join *pb.Join, eos []byte) error {
	s.metrics.Joins.WithLabelValues(statusEnded).Inc()
	s.trace(Event{Kind: EventJoin, Cohort: sp.String(), Peer: peer.Address, Status: statusEnded})
	ack := &pb.Ack{Status: pb.Status_OK, Challenge: newChallenge()} // an ended cohort's root
	out := append(encodeFrame(ack), eos...)
	if err := s.withDeadline(ctx, stream, s.opts.WriteTimeout, func() error {
		_, err := stream.Write(out)
		return err
	}); err != nil {
		return fmt.Errorf("tell ended: %w", err)
	}
	half, err := closeWrite(stream)
	if err != nil || !half {
		return err // closed whole: nothing is left to read
	}
	return s.withDeadline(ctx, stream, s.opts.EndGrace, func() error {
		n, err := io.Copy(io.Discard, io.LimitReader(stream, endDrainLimit+1))
		switch {
		case err != nil:
			return fmt.Errorf("tell ended: drain: %w", err)
		case n > endDrainLimit:
			return fmt.Errorf("tell ended: the peer sent more than %d bytes after the end", endDrainLimit)
		}
		return nil
	})
}

// endDrainLimit bounds what a broker reads and drops from a stream after it
// closed its side at the end of a cohort: frames in flight, not a flood.
const endDrainLimit = 4 * MaxFrameSize

// refer answers a multihop Join this node has no room for (SWIP-61): it
// probes its subtree and answers FULL with the two shallowest free slots
// found — bare FULL if none, or if this node has no subtree in the cohort.
func (s *Service) refer(ctx context.Context, peer p2p.Peer, stream p2p.Stream, sp *Spec, join *pb.Join) error {
	var cands []*pb.Candidate
	if c := s.reg.live(sp); c != nil && (!join.Refer || s.reg.mayRefer(peer.Address, sp)) {
		cands = s.probe(c, c.nodeDepth()+1, peer.Address, s.opts.ProbeWait, !s.mayProbe(peer.Address), join.Refer)
		if join.Refer {
			s.reg.referred(peer.Address, sp)
		}
	}
	if len(cands) == 0 {
		return s.refuse(ctx, peer, stream, pb.Status_FULL, join)
	}
	s.metrics.Joins.WithLabelValues("REFERRED").Inc()
	s.trace(Event{Kind: EventJoin, Cohort: sp.String(), Peer: peer.Address, Status: pb.Status_FULL.String(), Index: uint64(len(cands))})
	ack := &pb.Ack{Status: pb.Status_FULL, Candidates: cands, Multihop: true}
	if c := s.reg.live(sp); c != nil {
		if _, root := c.role.(rootRole); root {
			s.stateBeat(ack, sp)
		}
	}
	frame := encodeFrame(ack)
	if err := s.withDeadline(ctx, stream, s.opts.WriteTimeout, func() error {
		_, err := stream.Write(frame)
		return err
	}); err != nil {
		return fmt.Errorf("write FULL ack: %w", err)
	}
	return nil
}

// refuse answers a Join with a non-OK status and ends the stream cleanly.
func (s *Service) refuse(ctx context.Context, peer p2p.Peer, stream p2p.Stream, status pb.Status, join *pb.Join) error {
	s.metrics.Joins.WithLabelValues(status.String()).Inc()
	cohort := ""
	if sp, st := specFromPB(join.Cohort); st == pb.Status_OK {
		cohort = sp.String()
	}
	s.trace(Event{Kind: EventJoin, Cohort: cohort, Peer: peer.Address, Status: status.String()})
	frame := encodeFrame(&pb.Ack{Status: status})
	if err := s.withDeadline(ctx, stream, s.opts.WriteTimeout, func() error {
		_, err := stream.Write(frame)
		return err
	}); err != nil {
		return fmt.Errorf("write %s ack: %w", status, err)
	}
	return nil
}

// serve starts serving an attached member: it writes the Ack, then lets
// what is queued to the member start on-demand writers. The handler then
// reads what the peer sends in its role (readLoop) until the stream ends,
// and served waits for the last writer.
func (s *Service) serve(ctx context.Context, h *handling, ack []byte) error {
	m := h.m
	s.priceChild(&m.peerStream, h.fr, ack) // charging for depth: pricing.go; release ends the meter
	t := m.writeTimer()
	err := m.write(t, ack)
	t.Stop()
	if err != nil {
		m.kill(err)
		_ = m.stopWriter()
		return err
	}
	if !m.releaseWriter() {
		m.kill(errServiceClosed)
		_ = m.stopWriter()
		return errServiceClosed
	}

	// Unblock the reader when the handler context ends (the peer
	// disconnected); the service's own Close kills every member.
	h.stop = context.AfterFunc(ctx, func() { m.kill(context.Cause(ctx)) })
	// The service's Close kills every member of a live cohort; this also
	// ends one whose cohort ended and was forgotten, waiting for its peer.
	h.stopSvc = context.AfterFunc(s.ctx, func() { m.kill(errServiceClosed) })
	return nil
}

// served ends a member's serving once its reader returned rerr: it stops
// the writers and returns why the stream ended.
//
//go:noinline
func (s *Service) served(h *handling, rerr error) error {
	m := h.m
	if m.ending.Load() {
		// The cohort ended: the writer delivered END_OF_STREAM and closed
		// our side; the peer closed its own (or EndGrace reset it).
		werr := m.stopWriter()
		return s.ended(m, rerr, werr)
	}
	if rerr != nil {
		m.kill(rerr)
	} else {
		m.kill(nil) // the peer closed: stop the writer
	}
	werr := m.stopWriter()

	if reason := m.reason; reason != nil && !errors.Is(rerr, reason) {
		if errors.Is(reason, errClaimTimeout) {
			return &violation{err: reason}
		}
		return reason
	}
	if rerr != nil {
		return rerr
	}
	return werr
}

// ended is how a member's handler ends after its cohort ended: cleanly
// (then the handler FullCloses) unless the peer misbehaved or outstayed
// EndGrace. The writer has returned.
func (s *Service) ended(m *member, rerr, werr error) error {
	if t := m.endTimer; t != nil && !t.Stop() {
		<-m.quit // EndGrace fired: wait for its kill to record why
	}
	select {
	case <-m.quit:
		if m.reason != nil && !errors.Is(rerr, m.reason) {
			return m.reason
		}
	default:
	}
	var v *violation
	switch {
	case errors.As(rerr, &v):
		return rerr
	case werr != nil:
		return werr
	}
	return nil // EOF, or the read end closed under the reader
}

// readLoop reads the peer's frames for as long as the stream lives and hands
// each to the cohort's ingest. It returns nil on the peer's clean close, a
// *violation for misbehaviour, and the transport error otherwise.
func (s *Service) readLoop(m *member, fr *frameReader) error {
	c := m.c
	for {
		b, err := fr.readRaw()
		if err != nil {
			return s.readErr(c, err, CounterInvalidSOC)
		}
		f, err := m.codec.decodeUp(b)
		if err != nil {
			s.count(c, CounterInvalidSOC)
			return err
		}
		if r := f.GetReceipt(); r != nil {
			// A receipt that lies is a violation, counted as one (unwind).
			if err := m.receipt(r); err != nil {
				return err
			}
			continue
		}
		if ok, err := c.lazyUp(f, m); ok {
			if err != nil {
				return err
			}
			continue
		}
		if err := c.ingest(f, m); err != nil {
			return err
		}
	}
}

// readErr classifies a read failure: a clean EOF ends the stream normally, a
// malformed frame is counted and is a violation, anything else is the
// transport's.
func (s *Service) readErr(c *cohort, err error, k Counter) error {
	switch {
	case errors.Is(err, io.EOF):
		return nil
	case errors.Is(err, errMalformed):
		s.count(c, k)
		return &violation{err: err}
	default:
		return err
	}
}
