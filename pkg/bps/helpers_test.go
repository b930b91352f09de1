// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"
)

// waitTimeout bounds every wait for an event; it is a deadline for a test
// that has already failed, never a synchronisation.
const waitTimeout = 20 * time.Second

// recorder is a bps.Tracer that keeps every event and lets a test wait for
// one.
type recorder struct {
	mu     sync.Mutex
	events []bps.Event
	notify chan struct{}
}

func newRecorder() *recorder { return &recorder{notify: make(chan struct{})} }

func (r *recorder) Trace(e bps.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
}

// count returns how many events so far match.
func (r *recorder) count(match func(bps.Event) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, e := range r.events {
		if match(e) {
			n++
		}
	}
	return n
}

// waitN blocks until n events match, and returns the n-th.
func (r *recorder) waitN(t *testing.T, n int, what string, match func(bps.Event) bool) bps.Event {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		seen := 0
		for _, e := range r.events {
			if match(e) {
				if seen++; seen == n {
					r.mu.Unlock()
					return e
				}
			}
		}
		notify := r.notify
		r.mu.Unlock()
		select {
		case <-notify:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %d× %s", n, what)
		}
	}
}

func (r *recorder) wait(t *testing.T, what string, match func(bps.Event) bool) bps.Event {
	t.Helper()
	return r.waitN(t, 1, what, match)
}

func kind(k bps.EventKind) func(bps.Event) bool {
	return func(e bps.Event) bool { return e.Kind == k }
}

func dropped(c bps.Counter) func(bps.Event) bool {
	return func(e bps.Event) bool { return e.Kind == bps.EventDrop && e.Counter == c }
}

func acceptedIndex(n uint64) func(bps.Event) bool {
	return func(e bps.Event) bool { return e.Kind == bps.EventAccept && e.Index == n }
}

// tnode is a streamtest node running a BPS service.
type tnode struct {
	*streamtest.Node
	svc *bps.Service
	rec *recorder
}

func newNetwork(t *testing.T, opts ...streamtest.Option) *streamtest.Network {
	t.Helper()
	n := streamtest.New(opts...)
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close network: %v", err)
		}
	})
	return n
}

func newNode(t *testing.T, net *streamtest.Network, o bps.Options) *tnode {
	t.Helper()
	return newTracedNode(t, net, o, nil)
}

// newTracedNode is newNode whose service traces to what tracer makes of
// the node's recorder (nil: the recorder itself).
func newTracedNode(t *testing.T, net *streamtest.Network, o bps.Options, tracer func(*recorder) bps.Tracer) *tnode {
	t.Helper()
	nd := net.NewNode()
	rec := newRecorder()
	o.Tracer = rec
	if tracer != nil {
		o.Tracer = tracer(rec)
	}
	svc, err := bps.New(nd, nd.Overlay(), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range svc.Protocols() {
		if err := nd.AddProtocol(spec); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Errorf("close service: %v", err)
		}
	})
	return &tnode{Node: nd, svc: svc, rec: rec}
}

// cluster is a broker and n client nodes connected to it.
func cluster(t *testing.T, o bps.Options, n int, nopts ...streamtest.Option) (*streamtest.Network, *tnode, []*tnode) {
	t.Helper()
	net := newNetwork(t, nopts...)
	broker := newNode(t, net, o)
	clients := make([]*tnode, n)
	for i := range clients {
		clients[i] = newNode(t, net, bps.Options{Timing: bps.Timing{BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond}})
		if err := net.Connect(clients[i].Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	return net, broker, clients
}

// key is a publisher identity.
type key struct {
	signer crypto.Signer
	addr   []byte
}

func newKey(t testing.TB) key {
	t.Helper()
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(pk)
	addr, err := signer.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	return key{signer: signer, addr: addr.Bytes()}
}

func topicOf(name string) []byte {
	h, _ := crypto.LegacyKeccak256([]byte(name))
	return h
}

func feedSpec(t testing.TB, topic string, admin key) *bps.Spec {
	t.Helper()
	sp, err := bps.NewFeedSpec(topicOf(topic), admin.addr)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// update is DATA update index of k's session feed on the stream whose
// challenge is challenge (SWIP-74 Rev 8), wrapping payload.
func update(t testing.TB, k key, sp *bps.Spec, challenge []byte, index uint64, payload string) *pb.Broadcast {
	t.Helper()
	return chunk(t, k, sp, pb.Kind_DATA, challenge, index, []byte(payload))
}

// chunk is the Broadcast of kind at index on k's session feed under
// challenge, wrapping payload.
func chunk(t testing.TB, k key, sp *bps.Spec, kind pb.Kind, challenge []byte, index uint64, payload []byte) *pb.Broadcast {
	t.Helper()
	b, err := sp.Chunk(k.signer, k.addr, kind, challenge, index, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// auth is k's AUTH at index 0 under challenge: what claims a pending stream.
func auth(t testing.TB, k key, sp *bps.Spec, challenge []byte) *pb.Broadcast {
	t.Helper()
	return chunk(t, k, sp, pb.Kind_AUTH, challenge, 0, nil)
}

// roster is the admin's ROSTER at index naming publishers, under challenge.
func roster(t testing.TB, admin key, sp *bps.Spec, challenge []byte, index uint64, publishers ...[]byte) *pb.Broadcast {
	t.Helper()
	payload, err := bps.RosterPayload(publishers)
	if err != nil {
		t.Fatal(err)
	}
	return chunk(t, admin, sp, pb.Kind_ROSTER, challenge, index, payload)
}

// eos is the admin's EOS under challenge.
func eos(t testing.TB, admin key, sp *bps.Spec, challenge []byte) *pb.Broadcast {
	t.Helper()
	return chunk(t, admin, sp, pb.Kind_EOS, challenge, 0, nil)
}

// sendUpdate signs update index of p's key under p's challenge and sends it.
func sendUpdate(t testing.TB, p *bps.Publisher, index uint64, payload string) {
	t.Helper()
	if err := p.PublishUpdate(context.Background(), index, []byte(payload)); err != nil {
		t.Fatalf("publish %d: %v", index, err)
	}
}

func ctxT(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func subscribe(t *testing.T, c *tnode, broker *tnode, sp *bps.Spec) *bps.Subscription {
	t.Helper()
	sub, err := c.svc.Subscribe(ctxT(t), broker.Overlay(), sp)
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

func publish(t *testing.T, c *tnode, broker *tnode, sp *bps.Spec, k key, index uint64) *bps.Publisher {
	t.Helper()
	_ = index // the broker's cursor moves on the updates themselves (Rev 8)
	p, err := c.svc.Publish(ctxT(t), broker.Overlay(), sp, bps.PublishOptions{Addr: k.addr, Signer: k.signer})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// recv waits for the next delivery on sub.
func recv(t *testing.T, sub *bps.Subscription) bps.Delivery {
	t.Helper()
	select {
	case d, ok := <-sub.C():
		if !ok {
			t.Fatalf("subscription ended: %v", sub.Err())
		}
		return d
	case <-time.After(waitTimeout):
		t.Fatal("timed out waiting for a delivery")
	}
	return bps.Delivery{}
}

// raw is a hand-driven stream to a broker, for sending exactly the frames a
// test needs.
type raw struct {
	t *testing.T
	s p2p.Stream
	r *bufio.Reader
}

func openRaw(t *testing.T, from, to *tnode) *raw {
	t.Helper()
	s, err := from.NewStream(ctxT(t), to.Overlay(), nil, bps.ProtocolName, bps.ProtocolVersion, bps.StreamName)
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	t.Cleanup(func() { _ = s.Reset() })
	return &raw{t: t, s: s, r: bufio.NewReader(s)}
}

func (r *raw) send(m proto.Message) {
	r.t.Helper()
	if _, err := r.s.Write(bps.EncodeFrame(m)); err != nil {
		r.t.Fatalf("write %T: %v", m, err)
	}
}

func (r *raw) sendBytes(b []byte) {
	r.t.Helper()
	if _, err := r.s.Write(b); err != nil {
		r.t.Fatalf("write: %v", err)
	}
}

// readTimeout is how long a raw peer waits for one frame: past it the read
// fails (errNoFrame) and the stream is reset, so that a test whose rule was
// removed fails in seconds instead of hanging until the binary's timeout.
const readTimeout = 10 * time.Second

// errNoFrame is a read that no frame answered within readTimeout: never a
// reset the peer made.
var errNoFrame = errors.New("no frame within the read deadline")

// read reads one frame, within readTimeout. p2p.Stream has no deadline of
// its own, so the read runs beside the timer and a timeout resets the
// stream, which ends it; read waits for it either way.
func (r *raw) read(m proto.Message) error {
	done := make(chan error, 1)
	go func() { done <- protodelim.UnmarshalOptions{MaxSize: bps.MaxFrameSize}.UnmarshalFrom(r.r, m) }()
	deadline := time.NewTimer(readTimeout)
	defer deadline.Stop()
	select {
	case err := <-done:
		return err
	case <-deadline.C:
		_ = r.s.Reset()
		<-done
		return fmt.Errorf("read %T: %w", m, errNoFrame)
	}
}

func (r *raw) join(j *pb.Join) *pb.Ack {
	r.t.Helper()
	r.send(j)
	ack := new(pb.Ack)
	if err := r.read(ack); err != nil {
		r.t.Fatalf("read ack: %v", err)
	}
	return ack
}

func (r *raw) recvMessage() *pb.Broadcast {
	r.t.Helper()
	m := new(pb.Broadcast)
	if err := r.read(m); err != nil {
		r.t.Fatalf("read broadcast: %v", err)
	}
	return m
}

// expectEnd reads until the stream fails and returns why (io.EOF for a clean
// end), within waitTimeout in all: a stream that a root's heartbeat keeps
// busy (a frame every period) never goes quiet for readTimeout, so each
// read's own deadline alone would let a test whose rule was removed read
// until the binary's timeout. Past it the stream is reset and the error is
// errNoFrame.
func (r *raw) expectEnd() error {
	r.t.Helper()
	end := time.Now().Add(waitTimeout)
	for {
		m := new(pb.Broadcast)
		if err := r.read(m); err != nil {
			return err
		}
		if time.Now().After(end) {
			_ = r.s.Reset()
			return fmt.Errorf("the stream did not end within %s: %w", waitTimeout, errNoFrame)
		}
	}
}

func expectReset(t *testing.T, r *raw) {
	t.Helper()
	if err := r.expectEnd(); err == nil || errors.Is(err, io.EOF) || errors.Is(err, errNoFrame) {
		t.Fatalf("stream ended with %v, want a reset", err)
	}
}

func waitBlocklisted(t *testing.T, broker, peer *tnode) {
	t.Helper()
	if err := broker.WaitBlocklisted(ctxT(t), peer.Overlay()); err != nil {
		t.Fatalf("peer %s not blocklisted: %v", peer.Overlay(), err)
	}
}

func cohortInfo(t *testing.T, broker *tnode, sp *bps.Spec) bps.CohortInfo {
	t.Helper()
	for _, c := range broker.svc.Cohorts() {
		if string(c.Spec.Canonical()) == string(sp.Canonical()) {
			return c
		}
	}
	t.Fatalf("no cohort %s at broker", sp)
	return bps.CohortInfo{}
}

func keccak(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	h, _ := crypto.LegacyKeccak256(b)
	return h
}

// newByteReader wraps r for protodelim.
func newByteReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// subscribeToHostile joins a hostile broker that answers OK, sends frames and
// closes, and returns the subscription of a fresh client node to it.
func subscribeToHostile(t *testing.T, net *streamtest.Network, sp *bps.Spec, frames []*pb.Broadcast) *bps.Subscription {
	t.Helper()
	evil := net.NewNode()
	if err := evil.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			if err := protodelim.UnmarshalFrom(newByteReader(s), new(pb.Join)); err != nil {
				return err
			}
			if _, err := s.Write(bps.EncodeFrame(&pb.Ack{Status: pb.Status_OK, Challenge: make([]byte, 32)})); err != nil {
				return err
			}
			for _, m := range frames {
				if _, err := s.Write(bps.EncodeFrame(m)); err != nil {
					return err
				}
			}
			return s.FullClose()
		}}}}); err != nil {
		t.Fatal(err)
	}
	client := newNode(t, net, bps.Options{})
	if err := net.Connect(client.Node, evil); err != nil {
		t.Fatal(err)
	}
	sub, err := client.svc.Subscribe(ctxT(t), evil.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}

// rosterMsg is the admin's ROSTER at index naming pubs, signed under
// challenge (the admin's stream's).
func rosterMsg(t testing.TB, admin key, sp *bps.Spec, challenge []byte, index uint64, pubs ...key) *pb.Broadcast {
	t.Helper()
	addrs := make([][]byte, 0, len(pubs))
	for _, p := range pubs {
		addrs = append(addrs, p.addr)
	}
	return roster(t, admin, sp, challenge, index, addrs...)
}

// endMsg is the admin's EOS, signed under challenge.
func endMsg(t testing.TB, admin key, sp *bps.Spec, challenge []byte) *pb.Broadcast {
	t.Helper()
	return eos(t, admin, sp, challenge)
}

// socMsg is k's SOC under id wrapping payload, as an implicit cohort's
// DATA frame.
func socMsg(t testing.TB, k key, id []byte, payload string) *pb.Broadcast {
	t.Helper()
	data, _, err := bps.SignSOC(k.signer, k.addr, id, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Broadcast{Soc: data, Kind: pb.Kind_DATA}
}

func send(t *testing.T, p *bps.Publisher, m *pb.Broadcast) {
	t.Helper()
	if err := p.Send(ctxT(t), m); err != nil {
		t.Fatal(err)
	}
}

// lazyFakeParent is a node that answers every Join OK over the envelope at
// depth, speaking lazy push (its Ack echoes the Join's mode), writes each
// frame sent on down, and passes each frame its child sends up to up
// (dropped when up is full); it holds the stream until its peer closes it.
func lazyFakeParent(t *testing.T, net *streamtest.Network, depth uint32, down <-chan *pb.Frame, up chan<- *pb.Frame) *streamtest.Node {
	t.Helper()
	evil := net.NewNode()
	if err := evil.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(ctx context.Context, _ p2p.Peer, s p2p.Stream) error {
			r := bufio.NewReader(s)
			join := new(pb.Join)
			if err := protodelim.UnmarshalFrom(r, join); err != nil {
				return err
			}
			if _, err := s.Write(bps.EncodeFrame(&pb.Ack{Status: pb.Status_OK, Multihop: true, Depth: depth, Push: join.Push})); err != nil {
				return err
			}
			closed := make(chan struct{})
			go func() {
				defer close(closed)
				for {
					f := new(pb.Frame)
					if err := protodelim.UnmarshalFrom(r, f); err != nil {
						return
					}
					select {
					case up <- f:
					default:
					}
				}
			}()
			for {
				select {
				case f := <-down:
					if _, err := s.Write(bps.EncodeFrame(f)); err != nil {
						<-closed
						return err
					}
				case <-closed:
					return s.Close()
				}
			}
		}}}}); err != nil {
		t.Fatal(err)
	}
	return evil
}

// joinFirstAt is a new node of mt's tree whose parents are first and then
// second (a fake origin refers it to both, in that order), with options o.
func (mt *mtree) joinFirstAt(first, second *streamtest.Node, o bps.Options) (*tnode, *bps.Subscription) {
	mt.t.Helper()
	origin := referrer(mt.t, mt.net, first.Overlay(), second.Overlay())
	joiner := newNode(mt.t, mt.net, o)
	for _, nd := range []*streamtest.Node{first, second, origin, mt.broker.Node} {
		if err := mt.net.Connect(joiner.Node, nd); err != nil {
			mt.t.Fatal(err)
		}
	}
	sub, err := joiner.svc.Subscribe(ctxT(mt.t), origin.Overlay(), mt.sp)
	if err != nil {
		mt.t.Fatal(err)
	}
	mt.t.Cleanup(func() { _ = sub.Close() })
	if ps := sub.Parents(); len(ps) != 2 || !ps[0].Equal(first.Overlay()) || !ps[1].Equal(second.Overlay()) {
		mt.t.Fatalf("parents %v, want %s then %s", ps, first.Overlay(), second.Overlay())
	}
	return joiner, sub
}

// hostileParent is a node that answers every Join OK over the envelope,
// stating depth, then writes each frame sent on down, and holds the stream
// until its peer closes it.
func hostileParent(t *testing.T, net *streamtest.Network, depth uint32, down <-chan *pb.Frame) *streamtest.Node {
	t.Helper()
	evil := net.NewNode()
	if err := evil.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(ctx context.Context, _ p2p.Peer, s p2p.Stream) error {
			if err := protodelim.UnmarshalFrom(newByteReader(s), new(pb.Join)); err != nil {
				return err
			}
			if _, err := s.Write(bps.EncodeFrame(&pb.Ack{Status: pb.Status_OK, Multihop: true, Depth: depth})); err != nil {
				return err
			}
			closed := make(chan struct{})
			go func() { _, _ = io.Copy(io.Discard, s); close(closed) }()
			for {
				select {
				case f := <-down:
					if _, err := s.Write(bps.EncodeFrame(f)); err != nil {
						return err
					}
				case <-closed:
					return s.Close()
				}
			}
		}}}}); err != nil {
		t.Fatal(err)
	}
	return evil
}

// ackingParent is a raw node that answers every Join with ack, writes
// first after it, then reads and drops what it is sent until the joiner
// ends the stream: the fixed parent the depth, publisher and reparent tests
// put a node under.
func ackingParent(t *testing.T, net *streamtest.Network, ack *pb.Ack, first ...*pb.Frame) *streamtest.Node {
	t.Helper()
	nd := net.NewNode()
	if err := nd.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			r := newByteReader(s)
			if err := protodelim.UnmarshalFrom(r, new(pb.Join)); err != nil {
				return err
			}
			if _, err := s.Write(bps.EncodeFrame(ack)); err != nil {
				return err
			}
			for _, f := range first {
				if _, err := s.Write(bps.EncodeFrame(f)); err != nil {
					return err
				}
			}
			if _, err := io.Copy(io.Discard, r); err != nil {
				return s.Reset()
			}
			return s.FullClose()
		}}}}); err != nil {
		t.Fatal(err)
	}
	return nd
}

var testPrices = bps.Prices{Delivery: 7, Publish: 100}

// specOf is the Spec of c, which the test expects to be served.
func specOf(t testing.TB, c *pb.CohortSpec) *bps.Spec {
	t.Helper()
	sp, err := bps.NewSpec(c)
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

// publishOpts is a publisher stream of k's that claims with its AUTH at
// once; receive: its deliveries are on C.
func publishOpts(t *testing.T, c, broker *tnode, sp *bps.Spec, k key, receive bool) *bps.Publisher {
	t.Helper()
	p, err := c.svc.Publish(ctxT(t), broker.Overlay(), sp, bps.PublishOptions{Addr: k.addr, Signer: k.signer, Receive: receive})
	if err != nil {
		t.Fatalf("publish: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// recvC waits for the next delivery on c.
func recvC(t *testing.T, c <-chan bps.Delivery, what string) bps.Delivery {
	t.Helper()
	select {
	case d, ok := <-c:
		if !ok {
			t.Fatalf("%s: stream ended", what)
		}
		return d
	case <-time.After(waitTimeout):
		t.Fatalf("%s: timed out", what)
	}
	return bps.Delivery{}
}
