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
	"time"

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
	defer s.wg.Done()
	defer func() {
		if err != nil {
			_ = stream.Reset()
			var v *violation
			if errors.As(err, &v) {
				s.metrics.Violations.Inc()
				s.logger.Debug("bps: peer violated the protocol", "peer_address", peer.Address, "error", err)
				err = p2p.NewBlockPeerError(s.opts.BlocklistDuration, err)
			}
			return
		}
		_ = stream.FullClose()
	}()

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

	// Under explicit authorship a claim in the Join is verified before any
	// bound, and treated as absent if it does not verify or does not name
	// the declared address. Under implicit authorship there is no claim: a
	// stream that declares an address is a publisher stream at once, and
	// every message it sends is checked against that address.
	ro := roleSubscriber
	var claimIndex uint64
	switch {
	case !sp.explicit():
		if join.Addr != nil {
			ro = rolePublisher
		}
	case join.Claim != nil && join.Addr != nil && bytes.Equal(join.Claim.Addr, join.Addr) &&
		s.verifyClaim(sp, join.Claim) == nil:
		// attach takes it iff the address is a publisher of the cohort.
		ro, claimIndex = rolePublisher, join.Claim.Index
	}

	m, status := s.reg.attach(peer.Address, stream, sp, join.Addr, ro, claimIndex)
	if status != pb.Status_OK {
		return s.refuse(ctx, peer, stream, status, join)
	}
	defer func() {
		s.reg.detach(m)
		s.trace(Event{Kind: EventLeave, Cohort: sp.String(), Peer: peer.Address, Err: err})
	}()

	ack := &pb.Ack{Status: pb.Status_OK}
	if join.Addr != nil {
		ack.Challenge = s.challenge(sp, join.Addr)
	}
	s.metrics.Joins.WithLabelValues("OK").Inc()
	s.trace(Event{Kind: EventJoin, Cohort: sp.String(), Peer: peer.Address, Status: pb.Status_OK.String()})
	if m.role == rolePublisher && sp.explicit() {
		s.trace(Event{Kind: EventClaim, Cohort: sp.String(), Peer: peer.Address, Index: claimIndex})
	}

	return s.serve(ctx, m, fr, encodeFrame(ack))
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

// serve runs an attached member until its stream ends: the writer drains the
// member's queue (first the Ack), the reader handles what the peer sends in
// its role. Both are owned here; serve returns after both have stopped.
func (s *Service) serve(ctx context.Context, m *member, fr *frameReader, ack []byte) error {
	writerDone := make(chan error, 1)
	if !s.goOwned(func() { writerDone <- s.writeLoop(m, ack) }) {
		m.kill(errServiceClosed)
		return errServiceClosed
	}

	// Unblock the reader when the handler context ends (the peer
	// disconnected); the service's own Close kills every member.
	stop := context.AfterFunc(ctx, func() { m.kill(context.Cause(ctx)) })
	defer stop()

	rerr := s.readLoop(m, fr)
	if rerr != nil {
		m.kill(rerr)
	} else {
		m.kill(nil) // the peer closed: stop the writer
	}
	werr := <-writerDone

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

// writeLoop writes the Ack and then every queued frame to a subscriber stream.
// One timer per stream bounds each write; a stalled write kills the member.
func (s *Service) writeLoop(m *member, ack []byte) error {
	t := time.AfterFunc(time.Hour, func() { m.kill(errWriteTimeout) })
	t.Stop()
	defer t.Stop()
	write := func(frame []byte) error {
		t.Reset(s.opts.WriteTimeout)
		_, err := m.stream.Write(frame)
		t.Stop()
		return err
	}
	if err := write(ack); err != nil {
		m.kill(err)
		return fmt.Errorf("write ack: %w", err)
	}
	for {
		select {
		case <-m.quit:
			return nil
		case f := <-m.queue:
			if err := write(f.b); err != nil {
				m.kill(err)
				return fmt.Errorf("write delivery: %w", err)
			}
			if f.svc > 0 {
				m.told.Store(f.svc)
			}
		}
	}
}

// maxPendingClaims bounds the verified claims a stream may send for an
// address that is not (yet) a publisher: each costs a signature recovery.
const maxPendingClaims = 4

// readLoop reads the peer's frames for as long as the stream lives. It
// returns nil on the peer's clean close, a *violation for misbehaviour, and
// the transport error otherwise.
func (s *Service) readLoop(m *member, fr *frameReader) error {
	c := m.c
	auth := cohortAuthority{r: s.reg, c: c}
	for {
		// m.role and m.addr change only in upgrade, called from this
		// goroutine, so reading them here needs no lock.
		if m.role == roleSubscriber {
			if err := s.readClaim(m, fr); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
			continue
		}

		msg := new(pb.Message)
		if err := fr.read(msg); err != nil {
			return s.readErr(c, err, CounterInvalidSOC)
		}
		addr := m.addr
		pub, v := check(c.spec, msg, addr, auth)
		if v == accepted && !s.reg.accept(c, pub, encodeFrame(&pb.Message{Address: msg.Address, Data: msg.Data})) {
			v = retransmit // a duplicate, or another publisher stream got there first
		}
		switch v {
		case accepted:
			s.metrics.Accepted.Inc()
			s.trace(Event{Kind: EventAccept, Cohort: c.spec.String(), Peer: m.peer, Index: pub.index, Service: pub.service != nil})
			continue
		case retransmit:
			s.count(c, CounterRetransmit)
			continue
		}
		s.count(c, v.counter())
		if v == wrongOwner {
			// A revoked publisher is tolerated until the roster revoking it
			// has been written to its stream; after that it is a violation.
			if revoked, told := s.reg.revoked(m); told {
				return violationf("publication after the roster revoking %x", addr)
			} else if revoked {
				continue
			}
		}
		if m.invalid++; m.invalid >= s.opts.MaxInvalidFrames {
			return violationf("%d invalid publications", m.invalid)
		}
	}
}

// readClaim reads the one kind of frame a subscriber stream may send: a
// Claim, under explicit authorship only.
func (s *Service) readClaim(m *member, fr *frameReader) error {
	c := m.c
	claim := new(pb.Claim)
	if err := fr.read(claim); err != nil {
		if errors.Is(err, io.EOF) {
			return err
		}
		return s.readErr(c, err, CounterWrongStream)
	}
	if !c.spec.explicit() || !claimWellFormed(claim) {
		s.count(c, CounterWrongStream)
		return violationf("subscriber stream sent a frame that is not a claim")
	}
	if err := s.checkClaim(m, claim); err != nil {
		s.count(c, CounterInvalidClaim)
		return &violation{err: err}
	}
	switch s.reg.upgrade(m, claim.Addr, claim.Index) {
	case upgraded:
		s.trace(Event{Kind: EventClaim, Cohort: c.spec.String(), Peer: m.peer, Index: claim.Index})
		return nil
	case notPublisher:
		// SWIP-60: a verified claim by an address the roster does not
		// (yet) name leaves the stream a spectator; it claims again when
		// a roster names it. More than maxPendingClaims of them is abuse.
		s.count(c, CounterInvalidClaim)
		if m.pending++; m.pending > maxPendingClaims {
			return &violation{err: errClaimNotAdmin}
		}
		return nil
	default:
		return fmt.Errorf("claim not taken: cohort gone or publisher streams at bound")
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

// checkClaim verifies a Claim sent after the Ack: it names the declared
// address, if any, and its signature recovers to it over this broker's
// challenge and overlay.
func (s *Service) checkClaim(m *member, claim *pb.Claim) error {
	if addr := m.addr; addr != nil && !bytes.Equal(claim.Addr, addr) {
		return errClaimAddr
	}
	return s.verifyClaim(m.c.spec, claim)
}

// withDeadline runs f, resetting stream if f has not returned within d or
// when ctx or the service ends first. p2p.Stream has no deadlines; a reset is
// how a blocked read or write is ended.
func (s *Service) withDeadline(ctx context.Context, stream p2p.Stream, d time.Duration, f func() error) error {
	t := time.AfterFunc(d, func() { _ = stream.Reset() })
	stopCtx := context.AfterFunc(ctx, func() { _ = stream.Reset() })
	stopSvc := context.AfterFunc(s.ctx, func() { _ = stream.Reset() })
	err := f()
	timedOut := !t.Stop()
	stopCtx()
	stopSvc()
	if err != nil && timedOut {
		return fmt.Errorf("%w after %s: %w", context.DeadlineExceeded, d, err)
	}
	return err
}
