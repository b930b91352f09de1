// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"

	"io"
	"slices"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	beestreamtest "github.com/ethersphere/bee/v2/pkg/p2p/streamtest"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/encoding/protodelim"
	"google.golang.org/protobuf/proto"
)

// oneHop is a broker behind bee's streamtest recorder: each stream a test
// opens runs the broker's handler on its own goroutine, with
// context.Background() and the recorder's base address as the peer, and
// Records waits for every handler to return. It suits exchanges that end;
// long-lived streams and networks use pkg/bps/streamtest.
type oneHop struct {
	t      *testing.T
	svc    *bps.Service
	rec    *beestreamtest.Recorder
	broker swarm.Address
}

func newOneHop(t *testing.T, o bps.Options) *oneHop {
	t.Helper()
	broker := swarm.RandAddress(t)
	svc, err := bps.New(beestreamtest.New(), broker, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	rec := beestreamtest.New(beestreamtest.WithProtocols(svc.Protocol()), beestreamtest.WithBaseAddr(swarm.RandAddress(t)))
	return &oneHop{t: t, svc: svc, rec: rec, broker: broker}
}

// open opens a stream to the broker and writes frames on it in one write:
// after a violation the broker's reset fails any later write.
func (h *oneHop) open(frames ...[]byte) p2p.Stream {
	h.t.Helper()
	s, err := h.rec.NewStream(context.Background(), h.broker, nil, bps.ProtocolName, bps.ProtocolVersion, bps.StreamName)
	if err != nil {
		h.t.Fatal(err)
	}
	if b := bytes.Join(frames, nil); len(b) > 0 {
		if _, err := s.Write(b); err != nil {
			h.t.Fatalf("write: %v", err)
		}
	}
	return s
}

// join opens a stream, sends j and reads the Ack the broker answered.
func (h *oneHop) join(j *pb.Join, more ...[]byte) (p2p.Stream, *pb.Ack) {
	h.t.Helper()
	s := h.open(append([][]byte{bps.EncodeFrame(j)}, more...)...)
	ack := new(pb.Ack)
	if err := protodelim.UnmarshalFrom(bufio.NewReader(s), ack); err != nil {
		h.t.Fatalf("read ack: %v", err)
	}
	return s, ack
}

// issued is the challenge ack issued: 32 bytes, or the test fails.
func issued(t *testing.T, ack *pb.Ack) []byte {
	t.Helper()
	if len(ack.Challenge) != 32 {
		t.Fatalf("the Ack issued a %d-byte challenge, want 32", len(ack.Challenge))
	}
	return ack.Challenge
}

// firstAck decodes the Ack b, one direction of a stream, starts with.
func firstAck(t *testing.T, b []byte) *pb.Ack {
	t.Helper()
	ack := new(pb.Ack)
	if err := protodelim.UnmarshalFrom(bufio.NewReader(bytes.NewReader(b)), ack); err != nil {
		t.Fatalf("read ack: %v", err)
	}
	return ack
}

// records waits for every handler and returns the records of the streams
// opened so far, in order.
func (h *oneHop) records() []*beestreamtest.Record {
	h.t.Helper()
	recs, err := h.rec.Records(h.broker, bps.ProtocolName, bps.ProtocolVersion, bps.StreamName)
	if err != nil {
		h.t.Fatal(err)
	}
	return recs
}

// frames decodes b, the bytes one direction of a stream carried, into
// frames of the types of want, and checks they are want exactly, with
// nothing after them.
func checkFrames(t *testing.T, dir string, b []byte, want ...proto.Message) {
	t.Helper()
	r := bufio.NewReader(bytes.NewReader(b))
	for i, w := range want {
		got := w.ProtoReflect().New().Interface()
		if err := (protodelim.UnmarshalOptions{MaxSize: -1}).UnmarshalFrom(r, got); err != nil {
			t.Fatalf("%s frame %d (%T): %v; bytes %x", dir, i, w, err, b)
		}
		if !proto.Equal(got, w) {
			t.Fatalf("%s frame %d: got %v, want %v", dir, i, got, w)
		}
	}
	if rest, _ := io.ReadAll(r); len(rest) > 0 {
		t.Fatalf("%s: %d bytes after the %d frames wanted: %x", dir, len(rest), len(want), rest)
	}
}

// checkBlock checks that the handler returned a *p2p.BlockPeerError (the
// peer provably misbehaved), or nothing if !block.
func checkBlock(t *testing.T, err error, block bool) {
	t.Helper()
	var be *p2p.BlockPeerError
	switch {
	case block && !errors.As(err, &be):
		t.Fatalf("handler returned %v, want a BlockPeerError", err)
	case !block && err != nil:
		t.Fatalf("handler returned %v, want nil", err)
	}
}

// len is how many events the recorder holds.
func (r *recorder) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// waitFrom blocks until an event from the from-th on matches, and returns
// it.
func (r *recorder) waitFrom(t *testing.T, from int, what string, match func(bps.Event) bool) bps.Event {
	t.Helper()
	deadline := time.NewTimer(waitTimeout)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		for _, e := range r.events[from:] {
			if match(e) {
				r.mu.Unlock()
				return e
			}
		}
		notify := r.notify
		r.mu.Unlock()
		select {
		case <-notify:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestOneHopRefusals: a Join the broker refuses — REJECTED for a spec
// outside the SWIPs or an addr that is not 20 bytes (Rev 8), FULL at each
// bound — is answered with exactly one Ack and the stream closed; the
// handler returns nil, nobody is blocklisted.
func TestOneHopRefusals(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	topic := topicOf("one hop")
	feed := &pb.CohortSpec{Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	with := func(f func(c *pb.CohortSpec)) *pb.CohortSpec {
		c := proto.Clone(feed).(*pb.CohortSpec)
		f(c)
		return c
	}
	subscriberOf := func(c *pb.CohortSpec) func(*oneHop) *pb.Join {
		return func(*oneHop) *pb.Join { return &pb.Join{Cohort: c, Addr: bps.ZeroAddress} }
	}
	declaring := func(c *pb.CohortSpec, addr []byte) func(*oneHop) *pb.Join {
		return func(*oneHop) *pb.Join { return &pb.Join{Cohort: c, Addr: addr} }
	}
	other := with(func(c *pb.CohortSpec) { c.Topic = topicOf("another") })
	for _, tc := range []struct {
		name   string
		opts   bps.Options
		before []func(h *oneHop) *pb.Join // streams that stay open while the Join is refused
		join   func(h *oneHop) *pb.Join
		status pb.Status
	}{
		{name: "no cohort spec", join: subscriberOf(nil), status: pb.Status_REJECTED},
		{name: "topic of 31 bytes", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Topic = topic[:31] })), status: pb.Status_REJECTED},
		{name: "admin of 19 bytes", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Admin = admin.addr[:19] })), status: pb.Status_REJECTED},
		{name: "binding unspecified", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Binding = 0 })), status: pb.Status_REJECTED},
		{name: "binding unknown", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Binding = 9 })), status: pb.Status_REJECTED},
		{name: "ALL without admin", join: subscriberOf(with(func(c *pb.CohortSpec) {
			c.Binding, c.Admin, c.Publishers = pb.TopicBinding_MNEMONIC, nil, pb.PublisherRegime_ALL
		})), status: pb.Status_REJECTED},
		{name: "publisher regime unknown", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Publishers = 7 })), status: pb.Status_REJECTED},
		{name: "closed without admin", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Admin, c.Closed = nil, true })), status: pb.Status_REJECTED},
		{name: "closed with ALL", join: subscriberOf(with(func(c *pb.CohortSpec) {
			c.Binding, c.Publishers, c.Closed = pb.TopicBinding_MNEMONIC, pb.PublisherRegime_ALL, true
		})), status: pb.Status_REJECTED},
		{name: "history off a feed", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Binding, c.History = pb.TopicBinding_ANCHOR, true })), status: pb.Status_REJECTED},
		{name: "no addr", join: declaring(feed, nil), status: pb.Status_REJECTED},
		{name: "addr of 19 bytes", join: declaring(feed, admin.addr[:19]), status: pb.Status_REJECTED},
		{name: "addr of 21 bytes", join: declaring(feed, append(bytes.Clone(admin.addr), 0)), status: pb.Status_REJECTED},
		{name: "cohorts at the broker's bound", opts: bps.Options{Bounds: bps.Bounds{MaxCohorts: 1}},
			before: []func(*oneHop) *pb.Join{subscriberOf(other)}, join: subscriberOf(feed), status: pb.Status_FULL},
		{name: "cohorts of the peer at their bound", opts: bps.Options{Bounds: bps.Bounds{MaxCohortsPerPeer: 1}},
			before: []func(*oneHop) *pb.Join{subscriberOf(other)}, join: subscriberOf(feed), status: pb.Status_FULL},
		{name: "subscriber streams at their bound", opts: bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}},
			before: []func(*oneHop) *pb.Join{subscriberOf(feed)}, join: subscriberOf(feed), status: pb.Status_FULL},
		// Rev 8: the streams of one peer connection in one cohort,
		// counting every stream whatever it declares.
		{name: "streams of the peer in the cohort at their bound",
			before: []func(*oneHop) *pb.Join{subscriberOf(feed), declaring(feed, admin.addr), declaring(feed, newKey(t).addr), subscriberOf(feed)},
			join:   declaring(feed, newKey(t).addr), status: pb.Status_FULL},
		// SWIP-61: a multihop Join at capacity is answered by a probe of the
		// subtree; with no child that speaks the envelope there is nothing
		// to probe, and the answer is a bare FULL.
		{name: "multihop Join at capacity, no subtree", opts: bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}},
			before: []func(*oneHop) *pb.Join{subscriberOf(feed)},
			join: func(*oneHop) *pb.Join {
				return &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true}
			}, status: pb.Status_FULL},
		// A Join asking only where else to attach (refer) never gets a
		// stream; with no cohort here there is nowhere: bare FULL.
		{name: "refer without a cohort", join: func(*oneHop) *pb.Join {
			return &pb.Join{Cohort: feed, Addr: bps.ZeroAddress, Listen: true, Multihop: true, Refer: true}
		}, status: pb.Status_FULL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newOneHop(t, tc.opts)
			var open []p2p.Stream
			for _, b := range tc.before {
				s, ack := h.join(b(h))
				if ack.Status != pb.Status_OK {
					t.Fatalf("a stream before: %s", ack.Status)
				}
				open = append(open, s)
			}
			join := tc.join(h)
			h.join(join) // answered before the streams before close
			// The refused stream's handler returns on its own; the streams
			// before end when their peer closes.
			for _, s := range open {
				_ = s.Close()
			}
			recs := h.records()
			if len(recs) != len(open)+1 {
				t.Fatalf("%d records, want %d", len(recs), len(open)+1)
			}
			r := recs[len(open)]
			checkFrames(t, "in", r.In(), join)
			checkFrames(t, "out", r.Out(), &pb.Ack{Status: tc.status})
			checkBlock(t, r.Err(), false)
			for i, r := range recs[:len(open)] {
				if err := r.Err(); err != nil {
					t.Errorf("stream %d before ended with %v", i, err)
				}
			}
		})
	}
}

// TestOneHopViolations: each violation ends the exchange with the stream
// reset and the handler returning a *p2p.BlockPeerError; what crossed the
// wire is exactly the peer's frames and, where the Join was taken, the
// Ack with the stream's challenge (every stream gets one, Rev 8), and
// nothing after it. A claim that fails — a frame that does not validate
// on a pending stream, any frame from a stream that may send none, no
// claim within the claim deadline — is one of them.
func TestOneHopViolations(t *testing.T) {
	t.Parallel()
	admin, bob := newKey(t), newKey(t)
	feed := &pb.CohortSpec{Topic: topicOf("violations"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	closed := &pb.CohortSpec{Topic: topicOf("violations"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true}
	chat := &pb.CohortSpec{Topic: topicOf("violations"), Binding: pb.TopicBinding_MNEMONIC, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL}
	frame := func(m proto.Message) []byte { return bps.EncodeFrame(m) }
	// authBy is k's AUTH under the challenge the Ack issued, in feed.
	authBy := func(k key) func(a *pb.Ack) []byte {
		return func(a *pb.Ack) []byte { return frame(auth(t, k, specOf(t, feed), a.Challenge)) }
	}
	type exchange struct {
		in    [][]byte               // what the peer writes first: the Join (and, with no Ack, the rest)
		after func(*pb.Ack) [][]byte // what it writes once it read the Ack; nil: the broker answers none
		close bool                   // the peer closes its side after writing
	}
	then := func(f ...func(*pb.Ack) []byte) func(*pb.Ack) [][]byte {
		return func(a *pb.Ack) [][]byte {
			out := make([][]byte, 0, len(f))
			for _, g := range f {
				out = append(out, g(a))
			}
			return out
		}
	}
	fixed := func(b []byte) func(*pb.Ack) []byte { return func(*pb.Ack) []byte { return b } }
	join := func(c *pb.CohortSpec, addr []byte) [][]byte { return [][]byte{frame(&pb.Join{Cohort: c, Addr: addr})} }
	for _, tc := range []struct {
		name     string
		opts     bps.Options
		exchange exchange
	}{
		{name: "a Join that does not decode", exchange: exchange{in: [][]byte{{3, 0xff, 0xff, 0xff}}}},
		{name: "a Join over the frame size", exchange: exchange{in: [][]byte{{0x81, 0x40}}}}, // uvarint 8193
		{name: "the peer check fails", opts: bps.Options{
			Deps: bps.Deps{
				PeerCheck: func(context.Context, p2p.Peer, p2p.Stream) error {
					return errors.New("record names another peer")
				},
			},
			// The check runs as the stream opens, before the Join is
			// read: the peer writes nothing, or its write would race the
			// reset.
		}, exchange: exchange{}},
		{name: "a spectator sends a publication", exchange: exchange{in: join(feed, bps.ZeroAddress),
			after: then(func(a *pb.Ack) []byte { return frame(update(t, admin, specOf(t, feed), a.Challenge, 0, "x")) })}},
		{name: "a stranger's stream sends its AUTH", exchange: exchange{in: join(feed, bob.addr), after: then(authBy(bob))}},
		{name: "a listening stream under ALL sends an AUTH", exchange: exchange{in: join(chat, bps.ZeroAddress),
			after: then(func(a *pb.Ack) []byte { return frame(auth(t, admin, specOf(t, chat), a.Challenge)) })}},
		{name: "a pending stream's AUTH signed by another key", exchange: exchange{in: join(feed, admin.addr), after: then(authBy(bob))}},
		{name: "a pending stream's AUTH for another stream's challenge, its own put in", exchange: exchange{in: join(feed, admin.addr),
			after: then(func(a *pb.Ack) []byte {
				b := auth(t, admin, specOf(t, feed), make([]byte, 32))
				b.Challenge = a.Challenge
				return frame(b)
			})}},
		{name: "an invalid publication after the claim", exchange: exchange{in: join(feed, admin.addr),
			after: then(authBy(admin), func(a *pb.Ack) []byte {
				return frame(update(t, bob, specOf(t, feed), a.Challenge, 0, "not the admin's"))
			})}},
		{name: "an unset kind after the claim", exchange: exchange{in: join(feed, admin.addr),
			after: then(authBy(admin), func(a *pb.Ack) []byte {
				b := update(t, admin, specOf(t, feed), a.Challenge, 0, "no kind")
				b.Kind = pb.Kind_KIND_UNSPECIFIED
				return frame(b)
			})}},
		{name: "a ROSTER from a stream not the admin's", exchange: exchange{in: join(chat, bob.addr),
			after: then(func(a *pb.Ack) []byte { return frame(roster(t, bob, specOf(t, chat), a.Challenge, 0)) })}},
		{name: "a publication over the frame size", exchange: exchange{in: join(feed, admin.addr),
			after: then(authBy(admin), fixed([]byte{0x81, 0x40}))}},
		{name: "a publication cut short by the peer's close", exchange: exchange{in: join(feed, admin.addr), close: true,
			after: then(authBy(admin), func(a *pb.Ack) []byte {
				pub := frame(update(t, admin, specOf(t, feed), a.Challenge, 0, "cut short"))
				return pub[:len(pub)/2]
			})}},
		{name: "a claim cut short by the peer's close", exchange: exchange{in: join(feed, admin.addr), close: true,
			after: then(func(a *pb.Ack) []byte { c := authBy(admin)(a); return c[:len(c)/2] })}},
		{name: "no claim within the claim deadline, pending", opts: bps.Options{Timing: bps.Timing{ClaimDeadline: 10 * time.Millisecond}},
			exchange: exchange{in: join(feed, admin.addr), after: then()}},
		{name: "no claim within the claim deadline, silent in a closed cohort", opts: bps.Options{Timing: bps.Timing{ClaimDeadline: 10 * time.Millisecond}},
			exchange: exchange{in: join(closed, bps.ZeroAddress), after: then()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newOneHop(t, tc.opts)
			x := tc.exchange
			var out []proto.Message
			in := x.in
			if x.after == nil {
				h.open(x.in...)
			} else {
				// A peer that waits for the Ack before it goes on, so that
				// the Ack is on the wire before the broker's reset.
				s := h.open(x.in[0])
				ack := new(pb.Ack)
				if err := protodelim.UnmarshalFrom(bufio.NewReader(s), ack); err != nil {
					t.Fatalf("read ack: %v", err)
				}
				out = []proto.Message{&pb.Ack{Status: pb.Status_OK, Challenge: issued(t, ack)}}
				rest := x.after(ack)
				in = append(slices.Clone(x.in), rest...)
				if b := bytes.Join(rest, nil); len(b) > 0 {
					if _, err := s.Write(b); err != nil {
						t.Fatalf("write: %v", err)
					}
				}
				if x.close {
					_ = s.Close()
				}
			}
			recs := h.records()
			if len(recs) != 1 {
				t.Fatalf("%d records", len(recs))
			}
			if got, want := recs[0].In(), bytes.Join(in, nil); !bytes.Equal(got, want) {
				t.Fatalf("in: %x, want %x", got, want)
			}
			checkFrames(t, "out", recs[0].Out(), out...)
			checkBlock(t, recs[0].Err(), true)
		})
	}
}

// TestOneHopEndsWithoutPenalty: exchanges that end cleanly. A Join carrying
// field 3 (rev 3's claim, rev 11's auth: Rev 8 has no credential in a Join)
// is answered as without it: Ack OK with the stream's challenge, no
// penalty. A late Join to a cohort its admin ended is told: Ack OK with a
// challenge, the EOS as the first delivery, then the close; the handler
// returns nil.
func TestOneHopEndsWithoutPenalty(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	feed := &pb.CohortSpec{Topic: topicOf("clean ends"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	sp := specOf(t, feed)

	t.Run("a credential in the Join", func(t *testing.T) {
		t.Parallel()
		h := newOneHop(t, bps.Options{})
		join := bps.EncodeFrame(&pb.Join{Cohort: feed, Addr: admin.addr})[1:]
		join = append(append(join, 0x1a, 32), make([]byte, 32)...) // field 3, 32 bytes
		join = append([]byte{byte(len(join))}, join...)
		s := h.open(join)
		ack := new(pb.Ack)
		if err := protodelim.UnmarshalFrom(bufio.NewReader(s), ack); err != nil {
			t.Fatalf("read ack: %v", err)
		}
		_ = s.Close()
		recs := h.records()
		if !bytes.Equal(recs[0].In(), join) {
			t.Fatalf("in: %x, want %x", recs[0].In(), join)
		}
		checkFrames(t, "out", recs[0].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: issued(t, ack)})
		checkBlock(t, recs[0].Err(), false)
	})

	for _, late := range []struct {
		name string
		join *pb.Join
	}{
		{name: "a late subscriber", join: &pb.Join{Cohort: feed, Addr: bps.ZeroAddress}},
		{name: "a late publisher", join: &pb.Join{Cohort: feed, Addr: admin.addr}},
	} {
		t.Run(late.name, func(t *testing.T) {
			t.Parallel()
			h := newOneHop(t, bps.Options{})
			// The admin ends the cohort: its stream, not sent its own end,
			// is closed by the broker.
			adminJoin := &pb.Join{Cohort: feed, Addr: admin.addr}
			a, aack := h.join(adminJoin)
			adminAuth := auth(t, admin, sp, issued(t, aack))
			end := eos(t, admin, sp, aack.Challenge)
			if _, err := a.Write(append(bps.EncodeFrame(adminAuth), bps.EncodeFrame(end)...)); err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(a); err != nil || len(b) != 0 {
				t.Fatalf("the admin's stream after its end: %x, %v", b, err)
			}
			h.open(bps.EncodeFrame(late.join))
			recs := h.records()
			if len(recs) != 2 {
				t.Fatalf("%d records", len(recs))
			}
			checkFrames(t, "the admin's in", recs[0].In(), adminJoin, adminAuth, end)
			checkFrames(t, "the admin's out", recs[0].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: aack.Challenge})
			checkBlock(t, recs[0].Err(), false)
			checkFrames(t, "in", recs[1].In(), late.join)
			checkFrames(t, "out", recs[1].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: issued(t, firstAck(t, recs[1].Out()))}, end)
			checkBlock(t, recs[1].Err(), false)
			if n := len(h.svc.Cohorts()); n != 0 {
				t.Fatalf("%d cohorts after the late Join", n)
			}
		})
	}
}

// TestOneHopPublicationAfterRevocation: a publisher whose stream was
// written the roster revoking it, and that publishes after it, is
// tolerated within the revocation grace (counted revoked) and reset and
// blocklisted past it (SWIP-60 rev 14; docs/protocol.md "Revocation, with
// a grace"); the admin's stream, which carried the grant and the
// revocation, ends cleanly. The grace is a nanosecond here: the frames
// the broker reads before it noted the revocation as written are
// tolerated, the first after it is the violation.
func TestOneHopPublicationAfterRevocation(t *testing.T) {
	t.Parallel()
	admin, bob := newKey(t), newKey(t)
	feed := &pb.CohortSpec{Topic: topicOf("revoked"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	sp := specOf(t, feed)
	rec := newRecorder()
	h := newOneHop(t, bps.Options{Timing: bps.Timing{RevocationGrace: time.Nanosecond}, Deps: bps.Deps{Tracer: rec}})
	adminJoin := &pb.Join{Cohort: feed, Addr: admin.addr}
	a, aack := h.join(adminJoin)
	adminAuth := auth(t, admin, sp, issued(t, aack))
	grant, revoke := rosterMsg(t, admin, sp, aack.Challenge, 0, bob), rosterMsg(t, admin, sp, aack.Challenge, 1)
	write := func(s p2p.Stream, ms ...proto.Message) {
		t.Helper()
		var b []byte
		for _, m := range ms {
			b = append(b, bps.EncodeFrame(m)...)
		}
		if _, err := s.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	write(a, adminAuth, grant)
	rec.wait(t, "grant accepted", kind(bps.EventAccept))

	bobJoin := &pb.Join{Cohort: feed, Addr: bob.addr}
	b := h.open(bps.EncodeFrame(bobJoin))
	r := bufio.NewReader(b)
	back, told := new(pb.Ack), new(pb.Broadcast)
	for _, m := range []proto.Message{back, told} { // the Ack; the grant, its cue
		if err := protodelim.UnmarshalFrom(r, m); err != nil {
			t.Fatal(err)
		}
	}
	if !proto.Equal(told, grant) {
		t.Fatalf("bob's first delivery is kind %s, want the grant", told.Kind)
	}
	bobAuth := auth(t, bob, sp, issued(t, back))
	write(b, bobAuth)
	rec.waitN(t, 2, "the admin's and bob's claims taken", kind(bps.EventClaim))
	write(a, revoke)
	if err := protodelim.UnmarshalFrom(r, told); err != nil || !proto.Equal(told, revoke) { // told
		t.Fatalf("bob was told %v (%v), want the revocation", told, err)
	}
	var pubs []proto.Message
	for i := range uint64(64) {
		pub := update(t, bob, sp, back.Challenge, i, "after the revocation")
		pubs = append(pubs, pub)
		from := rec.len()
		write(b, pub)
		e := rec.waitFrom(t, from, "the broker's verdict", func(e bps.Event) bool {
			return e.Kind == bps.EventViolation || (e.Kind == bps.EventDrop && e.Counter == bps.CounterRevoked)
		})
		if e.Kind == bps.EventViolation {
			break
		}
	}
	if n := rec.count(kind(bps.EventViolation)); n != 1 {
		t.Fatalf("%d violations after %d publications past the revocation", n, len(pubs))
	}
	if n := rec.count(kind(bps.EventAccept)); n != 2 {
		t.Fatalf("%d accepted, want the two rosters alone", n)
	}
	_ = a.Close()

	recs := h.records()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	checkFrames(t, "the admin's in", recs[0].In(), adminJoin, adminAuth, grant, revoke)
	checkFrames(t, "the admin's out", recs[0].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: aack.Challenge})
	checkBlock(t, recs[0].Err(), false)
	checkFrames(t, "bob's in", recs[1].In(), append([]proto.Message{bobJoin, bobAuth}, pubs...)...)
	checkFrames(t, "bob's out", recs[1].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: back.Challenge}, grant, revoke)
	checkBlock(t, recs[1].Err(), true)
}

// TestOneHopPublisherBound: publisher streams are bounded per cohort —
// claimed and pending together (MaxPublisherStreams), answered at the
// Join, FULL, since a pending stream is admitted outside the fan-out bound
// — and per address (rev 14: 2 claimed streams; the claim of a third is
// taken and the oldest of the address's streams reset, without penalty).
func TestOneHopPublisherBound(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	feed := &pb.CohortSpec{Topic: topicOf("publisher bound"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	sp := specOf(t, feed)
	claimOn := func(rec *recorder, s p2p.Stream, ack *pb.Ack) *pb.Broadcast {
		t.Helper()
		n := rec.count(kind(bps.EventClaim))
		c := auth(t, admin, sp, issued(t, ack))
		if _, err := s.Write(bps.EncodeFrame(c)); err != nil {
			t.Fatal(err)
		}
		rec.waitN(t, n+1, "the claim taken", kind(bps.EventClaim))
		return c
	}
	join := &pb.Join{Cohort: feed, Addr: admin.addr}

	t.Run("per cohort", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder()
		h := newOneHop(t, bps.Options{Bounds: bps.Bounds{MaxPublisherStreams: 1}, Deps: bps.Deps{Tracer: rec}})
		a, aack := h.join(join)
		first := claimOn(rec, a, aack)
		b, back := h.join(join)
		if back.Status != pb.Status_FULL {
			t.Fatalf("a publisher stream past the bound: %s, want FULL", back.Status)
		}
		_ = b.Close()
		_ = a.Close()
		recs := h.records()
		if len(recs) != 2 {
			t.Fatalf("%d records", len(recs))
		}
		checkFrames(t, "the first's in", recs[0].In(), join, first)
		checkBlock(t, recs[0].Err(), false)
		checkFrames(t, "the second's in", recs[1].In(), join)
		checkFrames(t, "the second's out", recs[1].Out(), &pb.Ack{Status: pb.Status_FULL})
		checkBlock(t, recs[1].Err(), false)
	})

	t.Run("per address", func(t *testing.T) {
		t.Parallel()
		rec := newRecorder()
		h := newOneHop(t, bps.Options{Deps: bps.Deps{Tracer: rec}})
		var streams []p2p.Stream
		var claims []*pb.Broadcast
		for range 3 {
			s, ack := h.join(join)
			streams = append(streams, s)
			claims = append(claims, claimOn(rec, s, ack))
		}
		// The third claim reset the oldest stream: it reads nothing
		// more, and its handler ended (records, below, with an error).
		if rest, _ := io.ReadAll(streams[0]); len(rest) != 0 {
			t.Fatalf("the oldest stream was sent %x", rest)
		}
		rec.wait(t, "the oldest stream left", func(e bps.Event) bool { return e.Kind == bps.EventLeave && e.Err != nil })
		if n := len(h.svc.Cohorts()); n != 1 || h.svc.Cohorts()[0].Publishers != 2 {
			t.Fatalf("cohorts %d, want 1 with 2 publisher streams", n)
		}
		for _, s := range streams[1:] {
			_ = s.Close()
		}
		recs := h.records()
		if len(recs) != 3 {
			t.Fatalf("%d records", len(recs))
		}
		for i, r := range recs {
			checkFrames(t, "in", r.In(), join, claims[i])
		}
		var be *p2p.BlockPeerError
		if err := recs[0].Err(); err == nil || errors.As(err, &be) {
			t.Fatalf("the oldest stream's handler returned %v, want an error that blocks nobody", err)
		}
		for _, r := range recs[1:] {
			checkBlock(t, r.Err(), false)
		}
		if n := rec.count(kind(bps.EventViolation)); n != 0 {
			t.Fatalf("%d violations", n)
		}
	})
}
