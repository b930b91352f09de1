// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// join opens a stream to broker, sends join and reads the Ack, honouring the
// mandatory backoff for (broker, cohort). On OK it returns the open stream.
func (s *Service) join(ctx context.Context, broker swarm.Address, sp *Spec, join *pb.Join) (_ p2p.Stream, _ *frameReader, _ *pb.Ack, err error) {
	return s.joinFilled(ctx, broker, sp, join, nil)
}

// joinFilled is join, with fill, if set, called on the Join just before it
// is written — after any backoff and the stream's opening — for what must
// be stated as of the moment the Join leaves (Join.replay_ms).
func (s *Service) joinFilled(ctx context.Context, broker swarm.Address, sp *Spec, join *pb.Join, fill func(*pb.Join)) (_ p2p.Stream, _ *frameReader, _ *pb.Ack, err error) {
	if s.closed() {
		return nil, nil, nil, ErrClosed
	}
	key := broker.ByteString() + sp.key
	defer func() {
		if err != nil {
			s.backoff.explain(key, err) // what the next backoff says
		}
	}()
	if err := s.backoff.wait(ctx, key); err != nil {
		return nil, nil, nil, fmt.Errorf("backoff: %w", err)
	}
	stream, id, err := s.openStream(ctx, broker)
	if err != nil {
		s.backoff.fail(key)
		return nil, nil, nil, fmt.Errorf("open stream: %w", err)
	}
	defer func() {
		if err != nil {
			_ = stream.Reset()
		}
	}()
	if id.upstream() && (sp.Publishers != pb.PublisherRegime_PUBLISHER_REGIME_UNSPECIFIED || sp.Closed || sp.History || sp.Binding != pb.TopicBinding_FEED_TOPIC || sp.Implicit()) {
		return nil, nil, nil, fmt.Errorf("%w (spec %s, at %s)", errUpstreamSpec, sp, id)
	}
	if mayClaim(join) && sp.Explicit() && s.opts.PeerCheck != nil {
		// A publisher stream claims: the peer must be the one the
		// broker's overlay's record names (SWIP-74 item 11). A stream
		// that declares the zero address or listens never claims.
		if err := s.opts.PeerCheck(ctx, p2p.Peer{Address: broker, FullNode: true}, stream); err != nil {
			s.backoff.fail(key)
			return nil, nil, nil, fmt.Errorf("bps: will not claim against broker %s: %w", broker, err)
		}
	}

	fr := newFrameReader(stream)
	ack := new(pb.Ack)
	if fill != nil {
		fill(join)
	}
	err = s.withDeadline(ctx, stream, s.opts.HandshakeTimeout, func() error {
		if _, err := stream.Write(encodeFrame(join)); err != nil {
			return fmt.Errorf("write join: %w", err)
		}
		if err := fr.read(ack); err != nil {
			return fmt.Errorf("read ack: %w", err)
		}
		return nil
	})
	if err != nil {
		s.backoff.fail(key)
		return nil, nil, nil, err
	}
	if backoff, err := refusal(ack); err != nil {
		if backoff {
			s.backoff.fail(key)
		}
		return nil, nil, nil, err
	}
	return stream, fr, ack, nil
}

// refusal reports whether an Ack that is not OK imposes the backoff, and
// what it means to the joiner: a FULL naming candidates is a referral, not a
// refusal — the node at capacity found room in its subtree (SWIP-61) —
// and no backoff applies; a bare FULL, a REJECTED or a status unknown do.
func refusal(ack *pb.Ack) (backoff bool, err error) {
	switch ack.Status {
	case pb.Status_OK:
		return false, nil
	case pb.Status_FULL:
		if cands := validCandidates(ack.Candidates); len(cands) > 0 {
			return false, &FullError{Candidates: cands}
		}
		return true, ErrFull
	case pb.Status_REJECTED:
		return true, ErrRejected
	default:
		return true, fmt.Errorf("bps: broker answered with status %d", ack.Status)
	}
}

// streamEnded applies the backoff rule when an established stream ends: a
// reset imposes a backoff; one that had lived past the longest backoff
// starts over from the shortest.
func (s *Service) streamEnded(broker swarm.Address, sp *Spec, started time.Time, err error) {
	if err == nil {
		return
	}
	key := broker.ByteString() + sp.key
	if time.Since(started) >= s.opts.BackoffMax {
		s.backoff.succeed(key)
	}
	s.backoff.fail(key)
	s.backoff.explain(key, fmt.Errorf("the last stream to the broker ended: %w", err))
}

// BackoffUntil reports when this node may next join spec at broker (zero:
// now).
func (s *Service) BackoffUntil(broker swarm.Address, sp *Spec) time.Time {
	return s.backoff.until(broker.ByteString() + sp.key)
}

// FullError is a FULL answer that names where to attach instead: the two
// shallowest free slots the answering node's probe found in its subtree
// (SWIP-61). It is ErrFull to errors.Is.
type FullError struct {
	Candidates []*pb.Candidate
}

func (e *FullError) Error() string {
	return fmt.Sprintf("%s, with %d candidates in its subtree", ErrFull, len(e.Candidates))
}

// Is makes a FullError ErrFull.
func (e *FullError) Is(target error) bool { return target == ErrFull }

// validCandidates keeps the well-formed candidates of an Ack, at most
// maxCandidates: a 32-byte overlay, at most maxUnderlays underlays of at
// most maxUnderlaySize bytes each.
func validCandidates(cs []*pb.Candidate) []*pb.Candidate {
	out := make([]*pb.Candidate, 0, min(len(cs), maxCandidates))
	for _, c := range cs {
		if len(out) == maxCandidates {
			break
		}
		if candidateWellFormed(c) {
			out = append(out, c)
		}
	}
	return out
}

// mayClaim reports whether a stream joining with join may claim: it
// declares an address other than the zero address and does not listen.
func mayClaim(join *pb.Join) bool {
	return len(join.Addr) == AddressSize && !join.Listen && !bytes.Equal(join.Addr, zeroAddress)
}
