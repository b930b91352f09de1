// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package mock is a BPS service without a network, for the session layer
// (session.Protocol) and the API's handler tests (api.Protocol): a join
// answers what the test says — by default it opens a Stream the test
// drives — and the node shows no cohorts, no tree and no charges.
package mock

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
)

// Service is a BPS service without a network. Its mutex guards opened.
type Service struct {
	overlay   swarm.Address
	subscribe func(ctx context.Context, broker swarm.Address, sp *bps.Spec) (session.Subscription, error)
	publish   func(ctx context.Context, broker swarm.Address, sp *bps.Spec, o bps.PublishOptions) (session.Publisher, error)
	backoff   func(broker swarm.Address, sp *bps.Spec) (time.Time, error)

	mu     sync.Mutex
	opened []*Stream
}

var _ session.Protocol = (*Service)(nil)

// Option configures a Service.
type Option func(*Service)

// WithOverlay sets the node's overlay; default a random one.
func WithOverlay(a swarm.Address) Option { return func(s *Service) { s.overlay = a } }

// WithSubscribe answers every subscriber join with f.
func WithSubscribe(f func(ctx context.Context, broker swarm.Address, sp *bps.Spec) (session.Subscription, error)) Option {
	return func(s *Service) { s.subscribe = f }
}

// WithPublish answers every publisher join with f.
func WithPublish(f func(ctx context.Context, broker swarm.Address, sp *bps.Spec, o bps.PublishOptions) (session.Publisher, error)) Option {
	return func(s *Service) { s.publish = f }
}

// WithBackoff answers Backoff with f; default no backoff.
func WithBackoff(f func(broker swarm.Address, sp *bps.Spec) (time.Time, error)) Option {
	return func(s *Service) { s.backoff = f }
}

// New is a Service with opts. Without WithSubscribe or WithPublish a join
// succeeds and opens a Stream (Opened) with a challenge of its own; a
// publisher join calls Joined with it, as the node does once the broker
// answered.
func New(opts ...Option) *Service {
	overlay := make([]byte, swarm.HashSize)
	_, _ = rand.Read(overlay)
	s := &Service{overlay: swarm.NewAddress(overlay)}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Subscribe joins broker as a subscriber (session.Protocol).
func (s *Service) Subscribe(ctx context.Context, broker swarm.Address, sp *bps.Spec) (session.Subscription, error) {
	if s.subscribe != nil {
		return s.subscribe(ctx, broker, sp)
	}
	return s.open(), nil
}

// Publish joins broker as a publisher (session.Protocol).
func (s *Service) Publish(ctx context.Context, broker swarm.Address, sp *bps.Spec, o bps.PublishOptions) (session.Publisher, error) {
	if s.publish != nil {
		return s.publish(ctx, broker, sp, o)
	}
	st := s.open()
	if o.Joined != nil {
		o.Joined(st.Challenge())
	}
	return st, nil
}

func (s *Service) open() *Stream {
	st := NewStream()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opened = append(s.opened, st)
	return st
}

// Opened is the streams the default joins opened, in order.
func (s *Service) Opened() []*Stream {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Stream(nil), s.opened...)
}

// Backoff reports the node's backoff (session.Protocol).
func (s *Service) Backoff(broker swarm.Address, sp *bps.Spec) (time.Time, error) {
	if s.backoff != nil {
		return s.backoff(broker, sp)
	}
	return time.Time{}, nil
}

// Overlay is the node's overlay.
func (s *Service) Overlay() swarm.Address { return s.overlay }

// Tree is the node's place in the cohorts' trees: none.
func (s *Service) Tree() []bps.Position { return nil }

// Cohorts is the cohorts the node brokers: none.
func (s *Service) Cohorts() []bps.CohortInfo { return nil }

// CohortPeers is the peers attached to a cohort the node brokers: none.
func (s *Service) CohortPeers(*bps.Spec) []swarm.Address { return nil }

// Audience is the node's audience as a broker: nothing held.
func (s *Service) Audience() bps.Audience { return bps.Audience{} }

// Prices is what the node charges: nothing.
func (s *Service) Prices() bps.Prices { return bps.Prices{} }

// Charges is what the node charged its peers: nothing.
func (s *Service) Charges() []bps.PeerCharges { return nil }

// streamQueue bounds the deliveries a Stream holds for its reader.
const streamQueue = 64

// Stream is a subscriber or publisher stream the test drives: Deliver hands
// its reader a delivery, End ends it as the broker would; Sent is what was
// published on it. Its mutex guards everything below it.
type Stream struct {
	c chan bps.Delivery

	challenge []byte

	mu    sync.Mutex
	ended bool
	err   error
	sent  []*pb.Broadcast
	more  chan struct{} // closed, and replaced, on every Send
}

var (
	_ session.Subscription = (*Stream)(nil)
	_ session.Publisher    = (*Stream)(nil)
)

// NewStream is an open stream with a random challenge.
func NewStream() *Stream {
	ch := make([]byte, 32)
	_, _ = rand.Read(ch)
	return &Stream{c: make(chan bps.Delivery, streamQueue), challenge: ch, more: make(chan struct{})}
}

// C is what the broker sends.
func (s *Stream) C() <-chan bps.Delivery { return s.c }

// Err is why the stream ended: nil for a clean end or a Close.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Dropped is the deliveries the stream dropped: none.
func (s *Stream) Dropped() uint64 { return 0 }

// Send publishes b: recorded, or bps.ErrClosed once the stream ended.
func (s *Stream) Send(_ context.Context, b *pb.Broadcast) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return bps.ErrClosed
	}
	s.sent = append(s.sent, b)
	close(s.more)
	s.more = make(chan struct{})
	return nil
}

// AwaitSent returns what was published on the stream once it holds at
// least n frames, or ctx's error.
func (s *Stream) AwaitSent(ctx context.Context, n int) ([]*pb.Broadcast, error) {
	for {
		s.mu.Lock()
		sent, more := append([]*pb.Broadcast(nil), s.sent...), s.more
		s.mu.Unlock()
		if len(sent) >= n {
			return sent, nil
		}
		select {
		case <-more:
		case <-ctx.Done():
			return sent, ctx.Err()
		}
	}
}

// Challenge is the stream's challenge (its Ack's).
func (s *Stream) Challenge() []byte { return s.challenge }

// Close ends the stream from the node's side.
func (s *Stream) Close() error {
	s.End(nil)
	return nil
}

// Deliver hands d to the stream's reader; false if the stream ended or
// streamQueue deliveries are waiting.
func (s *Stream) Deliver(d bps.Delivery) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	select {
	case s.c <- d:
		return true
	default:
		return false
	}
}

// End ends the stream with err (nil: a clean end by the broker): C closes
// once what it holds is read.
func (s *Stream) End(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return
	}
	s.ended, s.err = true, err
	close(s.c)
}

// Ended reports whether the stream ended.
func (s *Stream) Ended() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ended
}

// Sent is what was published on the stream, in order.
func (s *Stream) Sent() []*pb.Broadcast {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*pb.Broadcast(nil), s.sent...)
}
