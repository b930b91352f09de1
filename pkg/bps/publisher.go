// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// FeedUpdate builds update index of signer's feed on topic as a frame ready
// to publish: the SOC is made and signed by bee's soc package under the feed
// id, and its id slot then carries the bare index (SWIP-74, SWIP-65).
func FeedUpdate(signer crypto.Signer, topic []byte, index uint64, payload []byte) (*pb.Message, error) {
	wrapped, err := cac.New(payload)
	if err != nil {
		return nil, fmt.Errorf("wrap payload: %w", err)
	}
	ch, err := soc.New(FeedID(topic, index), wrapped).Sign(signer)
	if err != nil {
		return nil, fmt.Errorf("sign update: %w", err)
	}
	data := bytes.Clone(ch.Data())
	clear(data[:bareIndexZeros])
	binary.BigEndian.PutUint64(data[bareIndexZeros:idSize], index)
	return &pb.Message{Address: ch.Address().Bytes(), Data: data}, nil
}

// with the publisher's key in the SOC convention. It returns r ‖ s ‖ v.
type ClaimSigner func(ctx context.Context, challenge []byte, broker swarm.Address, index uint64) ([]byte, error)

// KeyClaimSigner signs claims with a local key.
func KeyClaimSigner(signer Signer) ClaimSigner {
	return func(_ context.Context, challenge []byte, broker swarm.Address, index uint64) ([]byte, error) {
		return signer.Sign(ClaimDigest(challenge, broker, index))
	}
}

// PublishOptions describe a publisher stream.
type PublishOptions struct {
	// Addr is the 20-byte address the stream publishes as.
	Addr []byte
	// Sign signs the claim; the node never needs the key itself.
	Sign ClaimSigner
	// Index is the publisher's cursor: its next update has at least this
	// index. It is signed into the claim and moves the broker's cursor.
	Index uint64
	// Receive delivers, on C, what the broker sends this stream: the
	// messages of the cohort's other publishers (SWIP-60; under SWIP-74
	// there are none). Without it they are verified and discarded; with it
	// the caller must drain C, or the broker resets the stream when its
	// queue fills.
	Receive bool
	// Joined, if set, is called once the broker has taken the Join (its
	// Ack is OK), before the claim is signed — for a signer that should be
	// asked only once the join is known to succeed (a dApp behind a
	// WebSocket the node upgrades only then).
	Joined func()
}

// Publisher is a claimed publisher stream to a broker.
type Publisher struct {
	clientStream
	receiver
	addr      []byte
	challenge []byte // the one this stream's Ack issued
	sign      ClaimSigner
	index     uint64
	writeMu   sync.Mutex
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

// Challenge is the challenge this stream's Ack issued (nil where the
// cohort takes no claim): a second local session that would share the
// stream proves its key by signing a claim over it.
func (p *Publisher) Challenge() []byte { return p.challenge }

// Reclaim sends the claim again on this stream: under SWIP-60 a claim by an
// address the roster does not yet name leaves the stream a spectator, and
// the grantee claims again once it sees itself in a roster.
func (p *Publisher) Reclaim(ctx context.Context) error {
	if !p.clientStream.spec.Explicit() {
		return nil
	}
	sig, err := p.sign(ctx, p.challenge, p.peer, p.index)
	if err != nil {
		return fmt.Errorf("sign claim: %w", err)
	}
	claim, err := ClaimFromSignature(p.addr, p.index, sig)
	if err != nil {
		return err
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	return p.send(ctx, p.clientStream.s, outFrame{b: encodeFrame(claim), kind: kindClaim})
}

// Publish joins sp at broker declaring o.Addr and claims the stream right
// after the Ack, over the challenge the Ack issued (random per stream:
// SWIP-74 Rev 7). There is no reply to a claim: a claim that was not taken
// shows as the stream being reset.
//
// A broker at capacity may answer with candidates in its subtree (SWIP-61):
// the stream then attaches at the first that takes it, a relay, and its
// publications travel rootward from there.
func (s *Service) Publish(ctx context.Context, broker swarm.Address, sp *Spec, o PublishOptions) (*Publisher, error) {
	p, err := s.publishAt(ctx, broker, nil, sp, o)
	var full *FullError
	if !errors.As(err, &full) {
		return p, err
	}
	for _, c := range full.Candidates {
		at := swarm.NewAddress(c.Overlay)
		if at.Equal(s.overlay) {
			continue
		}
		if p, err = s.publishAt(ctx, at, c.Underlays, sp, o); err == nil {
			return p, nil
		}
	}
	return nil, err
}

// publishAt joins sp at the node at as a publisher: the broker, or a relay
// a probe named (connected to at underlays first, if given).
func (s *Service) publishAt(ctx context.Context, broker swarm.Address, underlays [][]byte, sp *Spec, o PublishOptions) (*Publisher, error) {
	if err := s.dial(ctx, broker, underlays); err != nil {
		return nil, err
	}
	if len(o.Addr) != AddressSize {
		return nil, errors.New("bps: publish needs a 20-byte address")
	}
	if sp.Explicit() && o.Sign == nil {
		return nil, errors.New("bps: publishing in this cohort takes a claim: no claim signer given")
	}
	sign := func(challenge []byte) (*pb.Claim, error) {
		sig, err := o.Sign(ctx, challenge, broker, o.Index)
		if err != nil {
			return nil, fmt.Errorf("sign claim: %w", err)
		}
		return ClaimFromSignature(o.Addr, o.Index, sig)
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
	if o.Joined != nil {
		o.Joined()
	}
	p := &Publisher{
		clientStream: newClientStream(s, broker, sp, stream, ack.GetDepth()),
		addr:         bytes.Clone(o.Addr),
		challenge:    ack.Challenge,
		sign:         o.Sign,
		index:        o.Index,
	}
	p.codec = negotiated(join, ack)
	if sp.Explicit() {
		claim, err := sign(ack.Challenge)
		if err == nil {
			err = p.send(ctx, s, outFrame{b: encodeFrame(claim), kind: kindClaim})
		}
		if err != nil {
			_ = stream.Reset()
			return nil, fmt.Errorf("claim: %w", err)
		}
	}
	p.receiver.init(s, sp, o.Receive, p.quit)
	if err := p.run(p.read, fr, func() { close(p.c) }); err != nil {
		return nil, err
	}
	return p, nil
}

// Send publishes one whole SOC frame. It returns once the frame is written;
// a rejected frame produces no answer (SWIP-74: no loopback, no reply).
func (p *Publisher) Send(ctx context.Context, msg *pb.Message) error {
	frame := encodeFrame(msg)
	if len(frame) > MaxFrameSize {
		return fmt.Errorf("bps: frame of %d bytes exceeds %d", len(frame), MaxFrameSize)
	}
	if p.clientStream.spec.Explicit() && bytes.Equal(p.addr, p.clientStream.spec.Admin) {
		// The admin's own stream never gets its service SOCs back: it
		// takes its roster from what it sends.
		if len(msg.Data) >= socHeaderSize {
			if svc := asService(p.clientStream.spec, msg); svc != nil {
				defer func() { _ = p.applyService(svc, nil) }()
			}
		}
	}
	if !p.clientStream.spec.Implicit() && bytes.Equal(p.addr, p.clientStream.spec.Admin) && len(msg.Data) >= socHeaderSize {
		if svc := asService(p.clientStream.spec, msg); svc != nil && svc.Kind == pb.ServiceKind_END_OF_STREAM {
			// Before the write: the broker's close may come back at once.
			d := Delivery{Index: svc.Index, Address: swarm.NewAddress(msg.Address), Owner: p.clientStream.spec.Admin, Data: msg.Data, Service: svc}
			p.sentEnd.CompareAndSwap(nil, &d)
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
	return p.send(ctx, p.clientStream.s, outFrame{b: frame, kind: kindMessage})
}

// PublishUpdate signs update index of the feed with signer and sends it.
func (p *Publisher) PublishUpdate(ctx context.Context, signer crypto.Signer, index uint64, payload []byte) error {
	msg, err := FeedUpdate(signer, p.clientStream.spec.Topic, index, payload)
	if err != nil {
		return err
	}
	return p.Send(ctx, msg)
}

// Close ends the publisher stream cleanly, after the frames already written.
func (p *Publisher) Close() error {
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	return p.closeClean()
}

// Addr is the address this stream publishes as.
func (p *Publisher) Addr() []byte { return bytes.Clone(p.addr) }

// SOCUpdate builds a single-owner chunk with the given id wrapping payload,
// signed by signer with bee's soc package, as a frame ready to publish on a
// cohort whose binding carries full ids (ANCHOR: a GSOC update).
func SOCUpdate(signer crypto.Signer, id, payload []byte) (*pb.Message, error) {
	wrapped, err := cac.New(payload)
	if err != nil {
		return nil, fmt.Errorf("wrap payload: %w", err)
	}
	ch, err := soc.New(id, wrapped).Sign(signer)
	if err != nil {
		return nil, fmt.Errorf("sign soc: %w", err)
	}
	return &pb.Message{Address: ch.Address().Bytes(), Data: ch.Data()}, nil
}

// ServiceUpdate builds update svc.Index of the admin's service feed of the
// cohort on topic, signed by the admin's signer: a SOC under
// ServiceID(topic, index) wrapping the ServiceMessage.
func ServiceUpdate(signer crypto.Signer, topic []byte, svc *pb.ServiceMessage) (*pb.Message, error) {
	payload, err := proto.Marshal(svc)
	if err != nil {
		return nil, fmt.Errorf("marshal service message: %w", err)
	}
	return SOCUpdate(signer, ServiceID(topic, svc.Index), payload)
}
