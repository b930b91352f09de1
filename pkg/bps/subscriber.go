// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
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
	// Recovered marks a feed update retrieved from storage after a gap
	// (SWIP-65), verified as a live delivery is.
	Recovered bool
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
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return mayPublish(sub.spec, sub.roster, owner)
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
	stream, fr, ack, err := s.join(ctx, broker, sp, &pb.Join{Cohort: sp.PB()})
	if err != nil {
		return nil, err
	}
	sub := &Subscription{clientStream: newClientStream(s, broker, sp, stream, ack.GetDepth())}
	sub.receiver.init(&sub.clientStream, true)
	if err := sub.run(sub.readOne, fr, func() { close(sub.c) }); err != nil {
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
	b, err := fr.readRaw()
	if err != nil {
		return err
	}
	f, err := sub.codec.decodeDown(b)
	if err != nil {
		return err
	}
	msg := f.GetMessage()
	if msg == nil {
		// Probes and reparents are a relay's to answer; this node
		// negotiates no envelope before it relays.
		return fmt.Errorf("%w: a %T frame from the parent: this node takes deliveries only", errMalformed, f.Kind)
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
		s.trace(Event{Kind: EventClientDrop, Cohort: sub.spec.String(), Peer: sub.peer, Counter: v.counter(), Index: pub.index})
		return nil
	}
	if d.Gap {
		sub.faults.Add(1)
	}
	sub.received.Add(1)
	s.metrics.ClientReceived.Inc()
	s.trace(Event{Kind: EventDeliver, Cohort: sub.spec.String(), Peer: sub.peer, Index: pub.index, Service: pub.service != nil})
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
		sub.roster = rosterOf(svc)
	}
	return contiguous
}
