// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
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
func (s *Service) handler(ctx context.Context, peer p2p.Peer, stream p2p.Stream) (err error) {
	if !s.track() {
		_ = stream.Reset()
		return ErrClosed
	}
	defer s.done()
	defer func() { err = s.unwind(peer, stream, err) }()

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
	if status == pb.Status_OK && join.Addr != nil && len(join.Addr) != AddressSize {
		status = pb.Status_REJECTED
	}
	if status != pb.Status_OK {
		return s.refuse(ctx, peer, stream, status, join)
	}
	if join.Multihop && join.Refer {
		// A child asking where else to attach (SWIP-61, self-healing):
		// candidates only, never a second stream to this node.
		return s.refer(ctx, peer, stream, sp, join)
	}
	return s.admit(ctx, peer, stream, fr, sp, join)
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

// admit attaches a Join's stream to its cohort and serves it; a node at
// capacity answers a multihop joiner with candidates in its subtree.
func (s *Service) admit(ctx context.Context, peer p2p.Peer, stream p2p.Stream, fr *frameReader, sp *Spec, join *pb.Join) (err error) {
	ro := joinRole(sp, join)
	// This node speaks the multihop envelope (SWIP-61): a joiner that
	// does too gets it on its stream; any other stays bare.
	ack := &pb.Ack{Status: pb.Status_OK, Multihop: join.Multihop, Attests: join.Multihop && join.Attests}
	m, status, ended := s.reg.attach(peer.Address, stream, negotiated(join, ack), sp, join.Addr, ro)
	if ended != nil {
		return s.tellEnded(ctx, peer, stream, sp, join, ended)
	}
	if status == pb.Status_FULL && join.Multihop {
		return s.refer(ctx, peer, stream, sp, join)
	}
	if status != pb.Status_OK {
		return s.refuse(ctx, peer, stream, status, join)
	}
	defer func() {
		s.reg.detach(m)
		s.trace(Event{Kind: EventLeave, Cohort: sp.String(), Peer: peer.Address, Err: err})
	}()

	ack.Challenge = m.challenge
	m.attests = ack.Attests // before serve starts m's reader
	// Lazy push (lazy.go): the Join's mode, where this node speaks it.
	ack.Push = s.negotiatePush(m, join)
	// The Ack states this node's own depth in the cohort (SWIP-61, DESIGN
	// §1.5): a broker is the root, 0.
	ack.Depth = m.c.ackDepth(m)
	s.metrics.Joins.WithLabelValues("OK").Inc()
	s.trace(Event{Kind: EventJoin, Cohort: sp.String(), Peer: peer.Address, Status: pb.Status_OK.String()})
	return s.serve(ctx, m, fr, encodeFrame(ack))
}

// joinRole is the role a Join asks for. Under implicit authorship there is
// no claim: a stream that declares an address is a publisher stream at
// once, and every message it sends is checked against that address. Under
// explicit authorship a stream is a subscriber until it claims after the
// Ack, over the challenge the Ack issued it: a claim inside the Join
// cannot name a challenge not yet issued and is treated as absent, as
// SWIP-74 rev 3 treats any claim in a Join that does not verify.
func joinRole(sp *Spec, join *pb.Join) role {
	if !sp.Explicit() && join.Addr != nil {
		return rolePublisher
	}
	return roleSubscriber
}

// statusEnded labels the Joins told that their cohort ended (metrics and
// trace); on the wire they are answered OK.
const statusEnded = "ENDED"

// tellEnded answers a Join for a cohort that ended: the Ack (with the
// challenge for a declared address, as for any Join), the cohort's
// END_OF_STREAM as the stream's first delivery, then the broker closes its
// side. What the peer sends meanwhile (a claim) is read and dropped until
// its close, for at most EndGrace.
func (s *Service) tellEnded(ctx context.Context, peer p2p.Peer, stream p2p.Stream, sp *Spec, join *pb.Join, eos []byte) error {
	s.metrics.Joins.WithLabelValues(statusEnded).Inc()
	s.trace(Event{Kind: EventJoin, Cohort: sp.String(), Peer: peer.Address, Status: statusEnded})
	ack := &pb.Ack{Status: pb.Status_OK, Depth: 0} // an ended cohort's root
	if join.Addr != nil {
		ack.Challenge = newChallenge()
	}
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
		cands = s.probe(c, c.nodeDepth()+1, peer.Address, s.opts.ProbeWait)
		if join.Refer {
			s.reg.referred(peer.Address, sp)
		}
	}
	if len(cands) == 0 {
		return s.refuse(ctx, peer, stream, pb.Status_FULL, join)
	}
	s.metrics.Joins.WithLabelValues("REFERRED").Inc()
	s.trace(Event{Kind: EventJoin, Cohort: sp.String(), Peer: peer.Address, Status: pb.Status_FULL.String(), Index: uint64(len(cands))})
	frame := encodeFrame(&pb.Ack{Status: pb.Status_FULL, Candidates: cands, Multihop: true})
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

// serve runs an attached member until its stream ends: it writes the Ack,
// then lets what is queued to the member start on-demand writers, and reads
// what the peer sends in its role. It returns after the reader and the last
// writer have stopped.
func (s *Service) serve(ctx context.Context, m *member, fr *frameReader, ack []byte) error {
	s.priceChild(&m.peerStream, fr, ack) // charging for depth: pricing.go
	defer func() { m.meter.Load().done() }()
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
	stop := context.AfterFunc(ctx, func() { m.kill(context.Cause(ctx)) })
	defer stop()
	// The service's Close kills every member of a live cohort; this also
	// ends one whose cohort ended and was forgotten, waiting for its peer.
	stopSvc := context.AfterFunc(s.ctx, func() { m.kill(errServiceClosed) })
	defer stopSvc()

	rerr := s.readLoop(m, fr)
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

// maxPendingClaims bounds the verified claims a stream may send that are not
// taken — by an address that is not (yet) a publisher, or again for the
// address it is already upgraded for — beyond one per service message the
// cohort accepted since the stream attached: each costs a signature
// recovery, and an honest client claims again only on a new roster.
const maxPendingClaims = 4

// readLoop reads the peer's frames for as long as the stream lives and hands
// each to the cohort's ingest. It returns nil on the peer's clean close, a
// *violation for misbehaviour, and the transport error otherwise. A frame is
// decoded by the stream's role when it is read, not when the read began: a
// roster may upgrade a stream while its reader waits.
func (s *Service) readLoop(m *member, fr *frameReader) error {
	c := m.c
	for {
		b, err := fr.readRaw()
		publisher := m.isPub.Load()
		if err != nil {
			if !publisher {
				return s.readErr(c, err, CounterWrongStream)
			}
			return s.readErr(c, err, CounterInvalidSOC)
		}
		f, k, err := m.codec.decodeUp(b, publisher, c.spec.Explicit())
		if err != nil {
			s.count(c, k)
			return err
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

// takeClaim handles a well-formed Claim sent after the Ack, under explicit
// authorship: one that does not verify is a violation; a verified one
// upgrades the stream, is held until a roster names its address, or is
// redundant on a stream already upgraded for it.
func (s *Service) takeClaim(m *member, claim *pb.Claim) error {
	c := m.c
	if err := s.checkClaim(m, claim); err != nil {
		s.count(c, CounterInvalidClaim)
		return &violation{err: err}
	}
	res, rosters := s.reg.upgrade(m, claim)
	switch res {
	case upgraded:
		s.trace(Event{Kind: EventClaim, Cohort: c.spec.String(), Peer: m.peer, Index: claim.Index})
		return nil
	case notPublisher:
		// SWIP-60: a verified claim by an address the roster does not
		// (yet) name leaves the stream a spectator (silent in a closed
		// cohort) until a roster names it; it is counted, not punished.
		s.count(c, CounterInvalidClaim)
	case redundant:
	default:
		return fmt.Errorf("claim not taken: cohort gone or publisher streams at bound")
	}
	if m.pending++; uint64(m.pending) > maxPendingClaims+rosters {
		return &violation{err: fmt.Errorf("%d claims not taken: %w", m.pending, errClaimNotAdmin)}
	}
	return nil
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

// checkClaim verifies a Claim sent after the Ack: it names the declared
// address, if any (on a publisher stream, the address it publishes as), and
// its signature recovers to it over this broker's challenge and overlay.
func (s *Service) checkClaim(m *member, claim *pb.Claim) error {
	addr := m.declared
	if m.isPub.Load() {
		addr = m.addr
	}
	if addr != nil && !bytes.Equal(claim.Addr, addr) {
		return errClaimAddr
	}
	return s.verifyClaim(m.challenge, claim)
}
