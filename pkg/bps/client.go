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
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// Delivery is a message received on a subscription, verified end to end.
type Delivery struct {
	Index   uint64        // FEED_TOPIC update or service SOC: its index
	Address swarm.Address // the SOC address
	Owner   []byte        // the SOC owner (the signer)
	Data    []byte        // as on the wire: id slot ‖ signature ‖ span ‖ payload
	// Service is set for a service SOC of the admin's service feed (roster,
	// end of stream); the subscription has already applied it.
	Service *pb.ServiceMessage
	// Gap reports service updates missed before this one: a liveness fault
	// (withholding), never a silent skip.
	Gap bool
}

// ID is the id slot of the SOC as carried (a bare index under FEED_TOPIC).
func (d Delivery) ID() []byte { return d.Data[:idSize] }

// Signature is the SOC signature of the update.
func (d Delivery) Signature() []byte { return d.Data[idSize : idSize+swarm.SocSignatureSize] }

// Span is the wrapped chunk's span (8 bytes, little-endian).
func (d Delivery) Span() []byte {
	return d.Data[idSize+swarm.SocSignatureSize : socHeaderSize]
}

// Payload is the wrapped chunk's payload.
func (d Delivery) Payload() []byte { return d.Data[socHeaderSize:] }

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

// handle is a client-side stream the Service closes on shutdown.
type handle interface{ abort() }

// handleSet tracks the open client handles; guarded by its mutex.
type handleSet struct {
	mu sync.Mutex
	m  map[handle]struct{}
}

func newHandleSet() *handleSet { return &handleSet{m: make(map[handle]struct{})} }

func (h *handleSet) add(x handle) {
	h.mu.Lock()
	h.m[x] = struct{}{}
	h.mu.Unlock()
}

func (h *handleSet) remove(x handle) {
	h.mu.Lock()
	delete(h.m, x)
	h.mu.Unlock()
}

func (h *handleSet) closeAll() {
	h.mu.Lock()
	all := make([]handle, 0, len(h.m))
	for x := range h.m {
		all = append(all, x)
	}
	h.mu.Unlock()
	for _, x := range all {
		x.abort()
	}
}

// join opens a stream to broker, sends join and reads the Ack, honouring the
// mandatory backoff for (broker, cohort). On OK it returns the open stream.
func (s *Service) join(ctx context.Context, broker swarm.Address, sp *Spec, join *pb.Join) (_ p2p.Stream, _ *frameReader, _ *pb.Ack, err error) {
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
	stream, err := s.streamer.NewStream(ctx, broker, nil, protocolName, protocolVersion, streamName)
	if err != nil {
		s.backoff.fail(key)
		return nil, nil, nil, fmt.Errorf("open stream: %w", err)
	}
	defer func() {
		if err != nil {
			_ = stream.Reset()
		}
	}()
	if join.Addr != nil && sp.explicit() && s.opts.PeerCheck != nil {
		// A publisher stream claims, signing over the broker's overlay:
		// the peer must be the one that overlay's record names (SWIP-74
		// item 11).
		if err := s.opts.PeerCheck(ctx, p2p.Peer{Address: broker, FullNode: true}, stream); err != nil {
			s.backoff.fail(key)
			return nil, nil, nil, fmt.Errorf("bps: will not claim against broker %s: %w", broker, err)
		}
	}

	fr := newFrameReader(stream)
	ack := new(pb.Ack)
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
	switch ack.Status {
	case pb.Status_OK:
		return stream, fr, ack, nil
	case pb.Status_FULL:
		s.backoff.fail(key)
		return nil, nil, nil, ErrFull
	case pb.Status_REJECTED:
		s.backoff.fail(key)
		return nil, nil, nil, ErrRejected
	default:
		s.backoff.fail(key)
		return nil, nil, nil, fmt.Errorf("bps: broker answered with status %d", ack.Status)
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

// clientStream is what subscriptions and publishers share: the stream, its
// reader goroutine, and the end-of-life signalling.
type clientStream struct {
	s       *Service
	broker  swarm.Address
	spec    *Spec
	stream  p2p.Stream
	started time.Time

	quit     chan struct{} // closed by Close or abort
	quitOnce sync.Once
	done     chan struct{} // closed when the reader has ended
	err      error         // why it ended; read after done
}

func (cs *clientStream) abort() {
	cs.quitOnce.Do(func() {
		close(cs.quit)
		_ = cs.stream.Reset()
	})
}

// closeWait bounds how long a clean close waits for the broker's side.
const closeWait = 5 * time.Second

// closeClean ends the stream cleanly: our side closes, the broker sees EOF
// and closes its own. It waits for the reader to end, at most closeWait,
// then resets.
func (cs *clientStream) closeClean() error {
	cs.quitOnce.Do(func() {
		close(cs.quit)
		_ = cs.stream.Close()
	})
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-cs.done:
		return nil
	case <-t.C:
		_ = cs.stream.Reset()
		<-cs.done
		return fmt.Errorf("bps: close: broker did not end the stream within %s", closeWait)
	}
}

// Done is closed when the stream has ended.
func (cs *clientStream) Done() <-chan struct{} { return cs.done }

// Err is why the stream ended: nil if it was closed by us or ended cleanly by
// the broker. Valid after Done is closed.
func (cs *clientStream) Err() error {
	select {
	case <-cs.done:
		return cs.err
	default:
		return nil
	}
}

// Broker is the overlay of the broker this stream is attached to.
func (cs *clientStream) Broker() swarm.Address { return cs.broker }

// Spec is the cohort this stream joined.
func (cs *clientStream) Spec() *Spec { return cs.spec }

// run starts the reader on a goroutine owned by the Service; read handles one
// frame and returns false to stop.
func (cs *clientStream) run(h handle, read func(fr *frameReader) error, fr *frameReader, onEnd func()) error {
	s := cs.s
	s.handles.add(h)
	ok := s.goOwned(func() {
		defer close(cs.done)
		defer s.handles.remove(h)
		defer onEnd()
		var err error
		for err == nil {
			err = read(fr)
		}
		select {
		case <-cs.quit:
			cs.err = nil // we ended it
		default:
			if errors.Is(err, ErrEndOfStream) {
				cs.err = err
				_ = cs.stream.Close()
				return
			}
			if errors.Is(err, io.EOF) {
				cs.err = nil
				_ = cs.stream.FullClose()
			} else {
				cs.err = err
				_ = cs.stream.Reset()
			}
		}
		s.streamEnded(cs.broker, cs.spec, cs.started, cs.err)
	})
	if !ok {
		s.handles.remove(h)
		_ = cs.stream.Reset()
		close(cs.done)
		return ErrClosed
	}
	return nil
}

// ErrEndOfStream ends a subscription whose admin published END_OF_STREAM.
var ErrEndOfStream = errors.New("bps: the admin ended the cohort")

// receiver verifies what a broker delivers on a client stream and hands it
// to the stream's owner: a subscription's every delivery, a publisher's
// deliveries from other publishers (SWIP-60: publishers receive).
type receiver struct {
	*clientStream
	c        chan Delivery
	keep     bool // deliver on c; false: verify and discard
	received atomic.Uint64
	dropped  atomic.Uint64
	faults   atomic.Uint64

	seen *Window // dedup bindings; reader goroutine only

	mu      sync.Mutex // the service feed as this stream knows it
	svcNext uint64
	svcSeen bool
	roster  map[string]struct{}
}

func (rc *receiver) init(cs *clientStream, keep bool) {
	rc.clientStream, rc.keep, rc.c = cs, keep, make(chan Delivery, cs.s.opts.QueueLen)
	if !(cs.spec.Binding == pb.TopicBinding_FEED_TOPIC && cs.spec.explicit()) {
		rc.seen = NewWindow(cs.s.opts.DedupWindow)
	}
}

// Subscription is a subscriber stream to a broker.
type Subscription struct {
	clientStream
	receiver
}

// authority of a subscription: the admin and the roster it has received.
func (sub *receiver) isPublisher(owner []byte) bool {
	if bytes.Equal(owner, sub.spec.Admin) {
		return true
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	_, ok := sub.roster[string(owner)]
	return ok
}

func (sub *receiver) feedCursor(owner []byte) uint64 {
	return sub.s.cursors.get(sub.spec.feedKey(owner))
}

func (sub *receiver) serviceNext() uint64 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.svcNext
}

// Roster is the publisher set the subscription holds (admin excluded).
func (sub *receiver) Roster() [][]byte {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	out := make([][]byte, 0, len(sub.roster))
	for p := range sub.roster {
		out = append(out, []byte(p))
	}
	slices.SortFunc(out, bytes.Compare)
	return out
}

// LivenessFaults counts gaps seen in the service feed.
func (sub *receiver) LivenessFaults() uint64 { return sub.faults.Load() }

// Subscribe joins the cohort sp at broker as a subscriber. Deliveries that
// pass re-verification against sp and this node's cursor for (topic, admin)
// arrive on C, which is closed when the subscription ends. ctx bounds the
// join only; the subscription lives until Close, the broker ends it, or the
// Service closes.
func (s *Service) Subscribe(ctx context.Context, broker swarm.Address, sp *Spec) (*Subscription, error) {
	stream, fr, _, err := s.join(ctx, broker, sp, &pb.Join{Cohort: sp.PB()})
	if err != nil {
		return nil, err
	}
	sub := &Subscription{clientStream: clientStream{s: s, broker: broker, spec: sp, stream: stream, started: time.Now(),
		quit: make(chan struct{}), done: make(chan struct{})}}
	sub.receiver.init(&sub.clientStream, true)
	if err := sub.run(sub, sub.readOne, fr, func() { close(sub.c) }); err != nil {
		return nil, err
	}
	return sub, nil
}

// C delivers verified feed updates in the order the broker sent them; it is
// closed when the subscription ends.
func (sub *receiver) C() <-chan Delivery { return sub.c }

// Close ends the subscription cleanly and waits for it.
func (sub *Subscription) Close() error { return sub.closeClean() }

// Received and Dropped count deliveries accepted and dropped (stale, or
// failing verification) by this subscription.
func (sub *receiver) Received() uint64 { return sub.received.Load() }

// Dropped counts deliveries this subscription dropped.
func (sub *receiver) Dropped() uint64 { return sub.dropped.Load() }

// feedKey names the subscriber cursor of a publisher feed: (topic, owner).
func (sp *Spec) feedKey(owner []byte) string { return string(sp.Topic) + string(owner) }

// readOne reads and re-verifies one delivery (SWIP-74 item 10, SWIP-60): the
// binding's SOC shape, an owner the subscription admits (the admin and the
// roster it holds under explicit authorship), and under FEED_TOPIC an index at
// or past this node's cursor for that publisher's feed, else a chunk not seen
// within the dedup window. Service SOCs update the roster; a gap in the
// service feed is reported; END_OF_STREAM ends the subscription after it is
// delivered.
func (sub *receiver) readOne(fr *frameReader) error {
	s := sub.s
	msg := new(pb.Message)
	if err := fr.read(msg); err != nil {
		return err
	}
	if !sub.keep && !mayBeService(sub.spec, msg) {
		// Nobody takes it: no signature check, and no move of the node's
		// feed cursors, which a subscription on this node may need.
		return nil
	}
	pub, v := check(sub.spec, msg, nil, sub)
	d := Delivery{Index: pub.index, Address: swarm.NewAddress(msg.Address), Owner: pub.owner, Data: msg.Data, Service: pub.service}
	if v == accepted {
		switch {
		case pub.service != nil:
			d.Gap = !sub.applyService(pub.service)
		case sub.seen != nil:
			if !sub.seen.Add(pub.dedup) {
				v = retransmit
			}
		default:
			if !s.cursors.advance(sub.spec.feedKey(pub.owner), pub.index) {
				v = retransmit
			}
		}
	}
	if v != accepted {
		sub.dropped.Add(1)
		s.metrics.ClientDropped.Inc()
		s.trace(Event{Kind: EventClientDrop, Cohort: sub.spec.String(), Peer: sub.broker, Counter: v.counter(), Index: pub.index})
		return nil
	}
	if d.Gap {
		sub.faults.Add(1)
	}
	sub.received.Add(1)
	s.metrics.ClientReceived.Inc()
	s.trace(Event{Kind: EventDeliver, Cohort: sub.spec.String(), Peer: sub.broker, Index: pub.index, Service: pub.service != nil})
	if sub.keep {
		select {
		case sub.c <- d:
		case <-sub.quit:
			return ErrClosed
		}
	}
	if pub.service != nil && pub.service.Kind == pb.ServiceKind_END_OF_STREAM {
		return ErrEndOfStream
	}
	return nil
}

// applyService moves the service cursor and takes a roster. It reports
// false if updates were missed before this one (a gap).
func (sub *receiver) applyService(svc *pb.ServiceMessage) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	contiguous := !sub.svcSeen || svc.Index <= sub.svcNext
	sub.svcSeen = true
	sub.svcNext = max(sub.svcNext, svc.Index+1)
	if svc.Kind == pb.ServiceKind_ROSTER {
		roster := make(map[string]struct{}, len(svc.Publishers))
		for _, p := range svc.Publishers {
			roster[string(p)] = struct{}{}
		}
		sub.roster = roster
	}
	return contiguous
}

// ClaimSigner signs a claim: the bytes ClaimDigest(challenge, broker, index)
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
	// Ack is OK), before the claim is signed; the claim is then always
	// signed after the Ack, never sent in the Join with a challenge held —
	// for a signer that should be asked only once the join is known to
	// succeed (a dApp behind a WebSocket the node upgrades only then).
	Joined func()
}

// Publisher is a claimed publisher stream to a broker.
type Publisher struct {
	clientStream
	receiver
	addr    []byte
	sign    ClaimSigner
	index   uint64
	writeMu sync.Mutex
	sentEnd atomic.Pointer[Delivery] // the admin's END_OF_STREAM, once this stream sent it
}

// read is a publisher stream's reader. A broker closes every stream of a
// cohort its admin ended, the admin's own without sending it its
// END_OF_STREAM back: a clean end after this stream sent the end is that
// end, delivered as every other stream of the cohort received it.
func (p *Publisher) read(fr *frameReader) error {
	err := p.readOne(fr)
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

// Reclaim sends the claim again on this stream: under SWIP-60 a claim by an
// address the roster does not yet name leaves the stream a spectator, and
// the grantee claims again once it sees itself in a roster.
func (p *Publisher) Reclaim(ctx context.Context) error {
	if !p.spec.explicit() {
		return nil
	}
	held := p.s.challenges.get(p.broker.ByteString() + p.spec.key + string(p.addr))
	if held == nil {
		return errors.New("bps: no challenge held for this stream")
	}
	sig, err := p.sign(ctx, held, p.broker, p.index)
	if err != nil {
		return fmt.Errorf("sign claim: %w", err)
	}
	claim, err := ClaimFromSignature(p.addr, p.index, sig)
	if err != nil {
		return err
	}
	p.writeMu.Lock()
	defer p.writeMu.Unlock()
	return p.s.withDeadline(ctx, p.stream, p.s.opts.WriteTimeout, func() error {
		_, err := p.stream.Write(encodeFrame(claim))
		return err
	})
}

// Publish joins sp at broker declaring o.Addr and claims the stream: in the
// Join with the challenge this node already holds for (broker, cohort,
// address), else right after the Ack. There is no reply to a claim: a claim
// that was not taken shows as the stream being reset.
func (s *Service) Publish(ctx context.Context, broker swarm.Address, sp *Spec, o PublishOptions) (*Publisher, error) {
	if len(o.Addr) != AddressSize {
		return nil, errors.New("bps: publish needs a 20-byte address")
	}
	if sp.explicit() && o.Sign == nil {
		return nil, errors.New("bps: publishing in this cohort takes a claim: no claim signer given")
	}
	sign := func(challenge []byte) (*pb.Claim, error) {
		sig, err := o.Sign(ctx, challenge, broker, o.Index)
		if err != nil {
			return nil, fmt.Errorf("sign claim: %w", err)
		}
		return ClaimFromSignature(o.Addr, o.Index, sig)
	}

	ckey := broker.ByteString() + sp.key + string(o.Addr)
	join := &pb.Join{Cohort: sp.PB(), Addr: bytes.Clone(o.Addr)}
	var held []byte
	if sp.explicit() && o.Joined == nil {
		held = s.challenges.get(ckey)
	}
	if held != nil {
		claim, err := sign(held)
		if err != nil {
			return nil, err
		}
		join.Claim = claim
	}
	stream, fr, ack, err := s.join(ctx, broker, sp, join)
	if err != nil {
		return nil, err
	}
	if len(ack.Challenge) != 32 {
		_ = stream.Reset()
		return nil, fmt.Errorf("bps: broker issued a %d-byte challenge", len(ack.Challenge))
	}
	if o.Joined != nil {
		o.Joined()
	}
	if sp.explicit() && (held == nil || !bytes.Equal(held, ack.Challenge)) {
		s.challenges.put(ckey, ack.Challenge)
		claim, err := sign(ack.Challenge)
		if err == nil {
			err = s.withDeadline(ctx, stream, s.opts.WriteTimeout, func() error {
				_, err := stream.Write(encodeFrame(claim))
				return err
			})
		}
		if err != nil {
			_ = stream.Reset()
			return nil, fmt.Errorf("claim: %w", err)
		}
	}

	p := &Publisher{
		clientStream: clientStream{s: s, broker: broker, spec: sp, stream: stream, started: time.Now(),
			quit: make(chan struct{}), done: make(chan struct{})},
		addr:  bytes.Clone(o.Addr),
		sign:  o.Sign,
		index: o.Index,
	}
	p.receiver.init(&p.clientStream, o.Receive)
	if err := p.run(p, p.read, fr, func() { close(p.c) }); err != nil {
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
	if p.spec.explicit() && bytes.Equal(p.addr, p.spec.Admin) {
		// The admin's own stream never gets its service SOCs back: it
		// takes its roster from what it sends.
		if len(msg.Data) >= socHeaderSize {
			if svc := asService(p.spec, msg); svc != nil {
				defer p.applyService(svc)
			}
		}
	}
	if !p.spec.Implicit() && bytes.Equal(p.addr, p.spec.Admin) && len(msg.Data) >= socHeaderSize {
		if svc := asService(p.spec, msg); svc != nil && svc.Kind == pb.ServiceKind_END_OF_STREAM {
			// Before the write: the broker's close may come back at once.
			d := Delivery{Index: svc.Index, Address: swarm.NewAddress(msg.Address), Owner: p.spec.Admin, Data: msg.Data, Service: svc}
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
	return p.s.withDeadline(ctx, p.stream, p.s.opts.WriteTimeout, func() error {
		_, err := p.stream.Write(frame)
		return err
	})
}

// PublishUpdate signs update index of the feed with signer and sends it.
func (p *Publisher) PublishUpdate(ctx context.Context, signer crypto.Signer, index uint64, payload []byte) error {
	msg, err := FeedUpdate(signer, p.spec.Topic, index, payload)
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
