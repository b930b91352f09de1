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
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/internal/delay"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// PublishOptions describe a publisher stream.
type PublishOptions struct {
	// Addr is the 20-byte address the stream publishes as (SWIP-74 Rev 8:
	// Join.addr).
	Addr []byte
	// Signer, if set, is Addr's key: the stream claims at once with an AUTH
	// at index 0 (docs/protocol.md: our publishers' first frame), and
	// Update signs with it. Without it the caller sends every chunk,
	// signed under Challenge, itself — its first valid frame claims.
	Signer Signer
	// Receive delivers, on C, what the broker sends this stream: the
	// messages of the cohort's other publishers (SWIP-60; under SWIP-74
	// there are none). Without it they are verified and discarded; with it
	// the caller must drain C, or the broker resets the stream when its
	// queue fills.
	Receive bool
	// Joined, if set, is called once the broker has taken the Join (its
	// Ack is OK), with the stream's challenge, before anything is sent on
	// it.
	Joined func(challenge []byte)
}

// Publisher is a claimed publisher stream to a broker.
type Publisher struct {
	clientStream
	receiver
	addr      []byte
	challenge []byte // the one this stream's Ack issued
	signer    Signer // the address's key, if given: the stream claims with an AUTH and Update signs
	writeMu   sync.Mutex
	auth      *pb.Broadcast            // the AUTH this stream claimed with (or sent last): the heartbeat; under writeMu
	beat      *time.Timer              // re-sends auth when nothing was sent for a third of the inactivity deadline; under writeMu
	sentEnd   atomic.Pointer[Delivery] // the admin's END_OF_STREAM, once this stream sent it
}

// read is a publisher stream's reader. A broker closes every stream of a
// cohort its admin ended, the admin's own without sending it its
// END_OF_STREAM back: a clean end after this stream sent the end is that
// end, delivered as every other stream of the cohort received it.
func (p *Publisher) read(fr *frameReader) error {
	err := p.readOne(&p.clientStream, fr, nil)
	if !errors.Is(err, io.EOF) {
		return err
	}
	d := p.sentEnd.Load()
	if d == nil {
		return err
	}
	if p.keep {
		select {
		case p.c <- *d:
		case <-p.quit:
			return ErrClosed
		}
	}
	return ErrEndOfStream
}

// Challenge is the challenge this stream's Ack issued: every chunk sent
// on it is signed under the session feed it salts (SWIP-74 Rev 8).
func (p *Publisher) Challenge() []byte { return p.challenge }

// Publish joins sp at broker declaring o.Addr (SWIP-74 Rev 8). Under
// explicit authorship the stream is pending until its first valid frame,
// which claims it — with o.Signer an AUTH at index 0, sent here; there is
// no reply, and the broker resets a stream whose claim it does not take.
// A broker at capacity may answer with candidates in its subtree (SWIP-61):
// Publish tries them in turn.
func (s *Service) Publish(ctx context.Context, broker swarm.Address, sp *Spec, o PublishOptions) (*Publisher, error) {
	p, err := s.publishAt(ctx, broker, broker, nil, nil, sp, o)
	var full *FullError
	if !errors.As(err, &full) {
		return p, err
	}
	for _, c := range full.Candidates {
		at := swarm.NewAddress(c.Overlay)
		if at.Equal(s.overlay) {
			continue
		}
		if p, err = s.publishAt(ctx, broker, at, c.Underlays, c, sp, o); err == nil {
			return p, nil
		}
	}
	return nil, err
}

// publishAt joins sp at broker, reached directly as the cohort's root
// (cand nil) or through cand, a candidate in root's subtree. The depth its
// Ack states prices every publication written up (Prices.Publish × (depth
// + 1)), so it is held to what this node can check, as a subscriber's
// parent is (ackRefused): the named broker states 0, a candidate's Ack no
// more than the candidate's depth.
func (s *Service) publishAt(ctx context.Context, root, broker swarm.Address, underlays [][]byte, cand *pb.Candidate, sp *Spec, o PublishOptions) (*Publisher, error) {
	if err := s.dial(ctx, broker, underlays); err != nil {
		return nil, err
	}
	if len(o.Addr) != AddressSize {
		return nil, errors.New("bps: publish needs a 20-byte address")
	}
	join := &pb.Join{Cohort: sp.PB(), Addr: bytes.Clone(o.Addr), Multihop: true}
	stream, fr, ack, err := s.join(ctx, broker, sp, join)
	if err != nil {
		return nil, err
	}
	if len(ack.Challenge) != challengeSize {
		_ = stream.Reset()
		return nil, fmt.Errorf("bps: broker issued a %d-byte challenge", len(ack.Challenge))
	}
	if err := ackRefused(root, broker, ack, cand); err != nil {
		_ = stream.Reset()
		return nil, err
	}
	if o.Joined != nil {
		o.Joined(bytes.Clone(ack.Challenge))
	}
	p := &Publisher{
		clientStream: newClientStream(s, broker, sp, stream, ack.GetDepth()),
		addr:         bytes.Clone(o.Addr),
		challenge:    ack.Challenge,
		signer:       o.Signer,
	}
	p.codec = negotiated(join, ack)
	var auth *pb.Broadcast
	if sp.Explicit() && o.Signer != nil {
		if auth, err = sp.Chunk(o.Signer, o.Addr, pb.Kind_AUTH, ack.Challenge, 0, nil); err != nil {
			_ = stream.Reset()
			return nil, fmt.Errorf("claim: %w", err)
		}
		p.auth = auth
	}
	p.receiver.init(s, sp, o.Receive, p.quit)
	if err := p.run(p.read, fr, func() { close(p.c) }); err != nil {
		return nil, err
	}
	if auth != nil {
		// The claiming AUTH is the stream's first frame, written once the
		// stream is metered: a Broadcast up, priced as the parent prices
		// it (both ends count the same frames).
		if err := p.send(ctx, s, outFrame{b: encodeFrame(auth), kind: kindBroadcast}); err != nil {
			p.abort()
			<-p.done
			return nil, fmt.Errorf("claim: %w", err)
		}
		p.writeMu.Lock()
		p.armBeat()
		p.writeMu.Unlock()
	}
	return p, nil
}

// Send publishes one Broadcast, signed under this stream's challenge. It
// returns once the frame is written; an error means the stream is gone
// (ErrClaimNotTaken when the broker reset it).
func (p *Publisher) Send(ctx context.Context, b *pb.Broadcast) error {
	frame := encodeFrame(b)
	if len(frame) > MaxFrameSize {
		return fmt.Errorf("bps: frame of %d bytes exceeds %d", len(frame), MaxFrameSize)
	}
	sp := p.clientStream.spec
	if sp.Explicit() && bytes.Equal(p.addr, sp.Admin) && (b.Kind == pb.Kind_ROSTER || b.Kind == pb.Kind_EOS) {
		// The admin's own stream never gets its rosters back: it takes
		// its roster from what it sends. An EOS is noted before the
		// write: the broker's close may come back at once.
		if pub, v := check(sp, b, &sender{addr: p.addr, challenge: p.challenge, admin: true}, anyPublisher{}); v == accepted && pub.service != nil {
			if pub.service.Ends() {
				d := Delivery{Kind: b.Kind, Index: b.Index, Challenge: b.Challenge, Address: swarm.NewAddress(pub.address), Owner: sp.Admin, Data: b.Soc, Service: pub.service}
				p.sentEnd.CompareAndSwap(nil, &d)
			} else {
				defer func() { _ = p.applyService(pub.service, nil) }()
			}
		}
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	select {
	case <-p.done:
		if err := p.Err(); err != nil {
			return fmt.Errorf("%w: %w", ErrClaimNotTaken, err)
		}
		return ErrClosed
	case <-p.quit:
		return ErrClosed
	default:
	}
	if b.Kind == pb.Kind_AUTH {
		p.auth = b
	}
	err := p.send(ctx, p.clientStream.s, outFrame{b: frame, kind: kindBroadcast})
	p.armBeat()
	return err
}

// heartbeatEvery is how long a publisher stream may send nothing before
// its AUTH is sent again (docs/protocol.md, "AUTH"): a third of the
// broker's inactivity deadline, so that an idle publisher keeps its cohort
// at any broker (upstream's form B takes it as its heartbeat).
func (p *Publisher) heartbeatEvery() time.Duration {
	return delay.Positive(p.clientStream.s.opts.Inactivity / 3)
}

// armBeat (re)starts the heartbeat after a frame was sent; the caller holds
// writeMu.
func (p *Publisher) armBeat() {
	if p.auth == nil {
		return
	}
	if p.beat != nil {
		p.beat.Reset(p.heartbeatEvery())
		return
	}
	p.beat = time.AfterFunc(p.heartbeatEvery(), p.heartbeat)
}

// heartbeat re-sends the stream's AUTH, byte for byte: no key is needed.
func (p *Publisher) heartbeat() {
	s := p.clientStream.s
	if !s.track() {
		return
	}
	defer s.done()
	select {
	case <-p.done:
		return
	case <-p.quit:
		return
	default:
	}
	if p.clientStream.spec.Explicit() && !p.isPublisher(p.addr) {
		// A roster this stream received revoked its address: past the
		// grace any frame of it is a violation (docs/protocol.md,
		// "Revocation"), a heartbeat too.
		return
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if p.send(s.ctx, s, outFrame{b: encodeFrame(p.auth), kind: kindBroadcast}) == nil {
		p.armBeat()
	}
}

// Update signs a chunk of kind at index wrapping payload with the
// stream's signer, under its challenge, and sends it.
func (p *Publisher) Update(ctx context.Context, kind pb.Kind, index uint64, payload []byte) error {
	if p.signer == nil {
		return errors.New("bps: this publisher has no signer: sign chunks under Challenge and Send them")
	}
	b, err := p.clientStream.spec.Chunk(p.signer, p.addr, kind, p.challenge, index, payload)
	if err != nil {
		return err
	}
	return p.Send(ctx, b)
}

// PublishUpdate signs DATA update index wrapping payload and sends it.
func (p *Publisher) PublishUpdate(ctx context.Context, index uint64, payload []byte) error {
	return p.Update(ctx, pb.Kind_DATA, index, payload)
}

// Close ends the publisher stream cleanly, after the frames already written.
func (p *Publisher) Close() error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	if p.beat != nil {
		p.beat.Stop()
	}
	return p.closeClean()
}

// Addr is the address this stream publishes as.
func (p *Publisher) Addr() []byte { return bytes.Clone(p.addr) }
