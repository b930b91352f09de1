// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build rev8todo

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

// TestOneHopRefusals: a Join the broker refuses — REJECTED for a spec
// outside the SWIPs, FULL at each bound — is answered with exactly one Ack
// and the stream closed; the handler returns nil, nobody is blocklisted.
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
	type pre struct {
		join  func(h *oneHop) *pb.Join
		state pb.Status
	}
	subscriberOf := func(c *pb.CohortSpec) func(*oneHop) *pb.Join {
		return func(*oneHop) *pb.Join { return &pb.Join{Cohort: c} }
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
		{name: "ALL on a feed topic", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Publishers = pb.PublisherRegime_ALL })), status: pb.Status_REJECTED},
		{name: "publisher regime unknown", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Publishers = 7 })), status: pb.Status_REJECTED},
		{name: "closed without admin", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Admin, c.Closed = nil, true })), status: pb.Status_REJECTED},
		{name: "closed with ALL", join: subscriberOf(with(func(c *pb.CohortSpec) {
			c.Binding, c.Publishers, c.Closed = pb.TopicBinding_MNEMONIC, pb.PublisherRegime_ALL, true
		})), status: pb.Status_REJECTED},
		{name: "history off a feed", join: subscriberOf(with(func(c *pb.CohortSpec) { c.Binding, c.History = pb.TopicBinding_ANCHOR, true })), status: pb.Status_REJECTED},
		{name: "addr of 19 bytes", join: func(*oneHop) *pb.Join { return &pb.Join{Cohort: feed, Addr: admin.addr[:19]} }, status: pb.Status_REJECTED},
		{name: "cohorts at the broker's bound", opts: bps.Options{Bounds: bps.Bounds{MaxCohorts: 1}},
			before: []func(*oneHop) *pb.Join{subscriberOf(other)}, join: subscriberOf(feed), status: pb.Status_FULL},
		{name: "cohorts of the peer at their bound", opts: bps.Options{Bounds: bps.Bounds{MaxCohortsPerPeer: 1}},
			before: []func(*oneHop) *pb.Join{subscriberOf(other)}, join: subscriberOf(feed), status: pb.Status_FULL},
		{name: "subscriber streams at their bound", opts: bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}},
			before: []func(*oneHop) *pb.Join{subscriberOf(feed)}, join: subscriberOf(feed), status: pb.Status_FULL},
		// SWIP-61: a multihop Join at capacity is answered by a probe of the
		// subtree; with no child that speaks the envelope there is nothing
		// to probe, and the answer is a bare FULL.
		{name: "multihop Join at capacity, no subtree", opts: bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}},
			before: []func(*oneHop) *pb.Join{subscriberOf(feed)},
			join:   func(*oneHop) *pb.Join { return &pb.Join{Cohort: feed, Multihop: true} }, status: pb.Status_FULL},
		// A Join asking only where else to attach (refer) never gets a
		// stream; with no cohort here there is nowhere: bare FULL.
		{name: "refer without a cohort", join: func(*oneHop) *pb.Join { return &pb.Join{Cohort: feed, Multihop: true, Refer: true} },
			status: pb.Status_FULL},
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
// Ack (and nothing after it). A claim that fails — after the Ack, or never
// made in a closed cohort — is one of them.
func TestOneHopViolations(t *testing.T) {
	t.Parallel()
	admin, bob := newKey(t), newKey(t)
	feed := &pb.CohortSpec{Topic: topicOf("violations"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	closed := &pb.CohortSpec{Topic: topicOf("violations"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true}
	chat := &pb.CohortSpec{Topic: topicOf("violations"), Binding: pb.TopicBinding_MNEMONIC, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL}
	frame := func(m proto.Message) []byte { return bps.EncodeFrame(m) }
	// claim is k's claim over the challenge the Ack issued.
	claim := func(h *oneHop, k key, a *pb.Ack) []byte {
		return frame(claimFor(t, k, a.Challenge, h.broker, 0))
	}
	type exchange struct {
		in    [][]byte               // what the peer writes first: the Join (and, with no Ack, the rest)
		after func(*pb.Ack) [][]byte // what it writes once it read the Ack; nil: the broker answers none
		addr  []byte                 // the address the Join declares: its Ack carries a challenge
		close bool                   // the peer closes its side after writing
	}
	then := func(f ...[]byte) func(*pb.Ack) [][]byte { return func(*pb.Ack) [][]byte { return f } }
	for _, tc := range []struct {
		name     string
		opts     bps.Options
		exchange func(h *oneHop) exchange
	}{
		{name: "a Join that does not decode", exchange: func(*oneHop) exchange {
			return exchange{in: [][]byte{{3, 0xff, 0xff, 0xff}}}
		}},
		{name: "a Join over the frame size", exchange: func(*oneHop) exchange {
			return exchange{in: [][]byte{{0x81, 0x40}}} // uvarint 8193
		}},
		{name: "the peer check fails", opts: bps.Options{
			Deps: bps.Deps{
				PeerCheck: func(context.Context, p2p.Peer, p2p.Stream) error {
					return errors.New("record names another peer")
				},
			},
		}, exchange: func(*oneHop) exchange {
			// The check runs as the stream opens, before the Join is
			// read: the peer writes nothing, or its write would race the
			// reset.
			return exchange{}
		}},
		{name: "a subscriber sends a publication", exchange: func(h *oneHop) exchange {
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: feed})}, after: then(frame(update(t, admin, specOf(t, feed), 0, "x")))}
		}},
		{name: "a subscriber under ALL sends a claim", exchange: func(h *oneHop) exchange {
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: chat})}, after: then(frame(claimFor(t, admin, make([]byte, 32), h.broker, 0)))}
		}},
		{name: "a claim after the Ack that does not verify", exchange: func(h *oneHop) exchange {
			bad := claimFor(t, admin, make([]byte, 32), h.broker, 0) // over another challenge
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: feed, Addr: admin.addr})}, after: then(frame(bad)), addr: admin.addr}
		}},
		{name: "a claim for another address than declared", exchange: func(h *oneHop) exchange {
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: feed, Addr: admin.addr})}, addr: admin.addr,
				after: func(a *pb.Ack) [][]byte { return [][]byte{claim(h, bob, a)} }}
		}},
		{name: "claims not taken past the bound", exchange: func(h *oneHop) exchange {
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: feed, Addr: bob.addr})}, addr: bob.addr, after: func(a *pb.Ack) [][]byte {
				var in [][]byte
				for range bps.MaxPendingClaims + 1 {
					in = append(in, claim(h, bob, a)) // bob is not rostered
				}
				return in
			}}
		}},
		{name: "invalid publications past the bound", opts: bps.Options{Bounds: bps.Bounds{MaxInvalidFrames: 2}}, exchange: func(h *oneHop) exchange {
			forged := frame(update(t, bob, specOf(t, feed), 0, "not the admin's"))
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: feed, Addr: admin.addr})}, addr: admin.addr,
				after: func(a *pb.Ack) [][]byte { return [][]byte{claim(h, admin, a), forged, forged} }}
		}},
		{name: "a publication over the frame size", exchange: func(h *oneHop) exchange {
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: feed, Addr: admin.addr})}, addr: admin.addr,
				after: func(a *pb.Ack) [][]byte { return [][]byte{claim(h, admin, a), {0x81, 0x40}} }}
		}},
		{name: "a publication cut short by the peer's close", exchange: func(h *oneHop) exchange {
			pub := frame(update(t, admin, specOf(t, feed), 0, "cut short"))
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: feed, Addr: admin.addr})}, addr: admin.addr, close: true,
				after: func(a *pb.Ack) [][]byte { return [][]byte{claim(h, admin, a), pub[:len(pub)/2]} }}
		}},
		{name: "a claim cut short by the peer's close", exchange: func(h *oneHop) exchange {
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: feed, Addr: admin.addr})}, addr: admin.addr, close: true,
				after: func(a *pb.Ack) [][]byte { c := claim(h, admin, a); return [][]byte{c[:len(c)/2]} }}
		}},
		{name: "no claim within the claim deadline in a closed cohort", opts: bps.Options{Timing: bps.Timing{ClaimDeadline: 10 * time.Millisecond}}, exchange: func(h *oneHop) exchange {
			return exchange{in: [][]byte{frame(&pb.Join{Cohort: closed})}, after: then()}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newOneHop(t, tc.opts)
			x := tc.exchange(h)
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
				if got := len(ack.Challenge); (x.addr != nil) != (got == 32) || (x.addr == nil && got != 0) {
					t.Fatalf("a challenge of %d bytes; the Join declared %x", got, x.addr)
				}
				out = []proto.Message{&pb.Ack{Status: pb.Status_OK, Challenge: ack.Challenge}}
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

// TestOneHopEndsWithoutPenalty: exchanges that end cleanly. A claim in the
// Join is treated as absent (it cannot name a challenge not yet issued):
// Ack OK with the stream's challenge, no penalty. A
// late Join to a cohort its admin ended is told: Ack OK, END_OF_STREAM as
// the first delivery, then the close; the handler returns nil.
func TestOneHopEndsWithoutPenalty(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	feed := &pb.CohortSpec{Topic: topicOf("clean ends"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	sp := specOf(t, feed)
	end := endMsg(t, admin, sp, 0)

	t.Run("a stale claim in the Join", func(t *testing.T) {
		t.Parallel()
		h := newOneHop(t, bps.Options{})
		stale := claimFor(t, admin, make([]byte, 32), h.broker, 0)
		join := &pb.Join{Cohort: feed, Addr: admin.addr, Claim: stale}
		s, ack := h.join(join)
		_ = s.Close()
		recs := h.records()
		checkFrames(t, "in", recs[0].In(), join)
		checkFrames(t, "out", recs[0].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: issued(t, ack)})
		checkBlock(t, recs[0].Err(), false)
	})

	for _, late := range []struct {
		name string
		join func(h *oneHop) *pb.Join
		ack  func(out []byte) *pb.Ack
	}{
		{name: "a late subscriber", join: func(*oneHop) *pb.Join { return &pb.Join{Cohort: feed} },
			ack: func([]byte) *pb.Ack { return &pb.Ack{Status: pb.Status_OK} }},
		{name: "a late publisher", join: func(*oneHop) *pb.Join { return &pb.Join{Cohort: feed, Addr: admin.addr} },
			ack: func(out []byte) *pb.Ack {
				return &pb.Ack{Status: pb.Status_OK, Challenge: issued(t, firstAck(t, out))}
			}},
	} {
		t.Run(late.name, func(t *testing.T) {
			t.Parallel()
			h := newOneHop(t, bps.Options{})
			// The admin ends the cohort: its stream, not sent its own end,
			// is closed by the broker.
			adminJoin := &pb.Join{Cohort: feed, Addr: admin.addr}
			a, aack := h.join(adminJoin)
			adminClaim := claimFor(t, admin, issued(t, aack), h.broker, 0)
			if _, err := a.Write(append(bps.EncodeFrame(adminClaim), bps.EncodeFrame(end)...)); err != nil {
				t.Fatal(err)
			}
			if b, err := io.ReadAll(a); err != nil || len(b) != 0 {
				t.Fatalf("the admin's stream after its end: %x, %v", b, err)
			}
			join := late.join(h)
			h.open(bps.EncodeFrame(join))
			recs := h.records()
			if len(recs) != 2 {
				t.Fatalf("%d records", len(recs))
			}
			checkFrames(t, "the admin's in", recs[0].In(), adminJoin, adminClaim, end)
			checkFrames(t, "the admin's out", recs[0].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: aack.Challenge})
			checkBlock(t, recs[0].Err(), false)
			checkFrames(t, "in", recs[1].In(), join)
			checkFrames(t, "out", recs[1].Out(), late.ack(recs[1].Out()), end)
			checkBlock(t, recs[1].Err(), false)
			if n := len(h.svc.Cohorts()); n != 0 {
				t.Fatalf("%d cohorts after the late Join", n)
			}
		})
	}
}

// TestOneHopPublicationAfterRevocation: a publisher whose stream was
// written the roster revoking it, and that publishes after it, is reset
// and blocklisted (SWIP-60's second phase); the admin's stream, which
// carried the grant and the revocation, ends cleanly.
func TestOneHopPublicationAfterRevocation(t *testing.T) {
	t.Parallel()
	admin, bob := newKey(t), newKey(t)
	feed := &pb.CohortSpec{Topic: topicOf("revoked"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	sp := specOf(t, feed)
	rec := newRecorder()
	h := newOneHop(t, bps.Options{Deps: bps.Deps{Tracer: rec}})
	grant, revoke := rosterMsg(t, admin, sp, 0, bob), rosterMsg(t, admin, sp, 1)
	adminJoin := &pb.Join{Cohort: feed, Addr: admin.addr}
	a, aack := h.join(adminJoin)
	adminClaim := claimFor(t, admin, issued(t, aack), h.broker, 0)
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
	write(a, adminClaim, grant)
	rec.wait(t, "grant accepted", kind(bps.EventAccept))

	bobJoin := &pb.Join{Cohort: feed, Addr: bob.addr}
	b := h.open(bps.EncodeFrame(bobJoin))
	r := bufio.NewReader(b)
	back := new(pb.Ack)
	for _, m := range []proto.Message{back, new(pb.Message)} { // the Ack, the grant
		if err := protodelim.UnmarshalFrom(r, m); err != nil {
			t.Fatal(err)
		}
	}
	bobClaim := claimFor(t, bob, issued(t, back), h.broker, 0)
	write(b, bobClaim)
	rec.waitN(t, 2, "the admin's and bob's claims taken", kind(bps.EventClaim))
	write(a, revoke)
	if err := protodelim.UnmarshalFrom(r, new(pb.Message)); err != nil { // told
		t.Fatal(err)
	}
	// The first may be read before the broker noted the revocation as
	// written (tolerated); the next is a violation.
	pubs := []proto.Message{update(t, bob, sp, 0, "after 0"), update(t, bob, sp, 1, "after 1"), update(t, bob, sp, 2, "after 2")}
	write(b, pubs...)
	rec.wait(t, "bob blocklisted", kind(bps.EventViolation))
	_ = a.Close()

	recs := h.records()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	checkFrames(t, "the admin's in", recs[0].In(), adminJoin, adminClaim, grant, revoke)
	checkFrames(t, "the admin's out", recs[0].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: aack.Challenge})
	checkBlock(t, recs[0].Err(), false)
	checkFrames(t, "bob's in", recs[1].In(), append([]proto.Message{bobJoin, bobClaim}, pubs...)...)
	checkFrames(t, "bob's out", recs[1].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: back.Challenge}, grant, revoke)
	checkBlock(t, recs[1].Err(), true)
}

// TestOneHopPublisherBound: claimed publisher streams are bounded per
// cohort. A claim comes after the Ack, so the bound answers the claim,
// not the Join: past it the claim is not taken and the stream is reset,
// with no penalty (the broker's bound, not the peer's fault).
func TestOneHopPublisherBound(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	feed := &pb.CohortSpec{Topic: topicOf("publisher bound"), Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}
	rec := newRecorder()
	h := newOneHop(t, bps.Options{Bounds: bps.Bounds{MaxPublisherStreams: 1}, Deps: bps.Deps{Tracer: rec}})
	claimOn := func(s p2p.Stream, ack *pb.Ack) *pb.Claim {
		t.Helper()
		c := claimFor(t, admin, issued(t, ack), h.broker, 0)
		if _, err := s.Write(bps.EncodeFrame(c)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	join := &pb.Join{Cohort: feed, Addr: admin.addr}
	a, aack := h.join(join)
	first := claimOn(a, aack)
	rec.wait(t, "the first claim taken", kind(bps.EventClaim))
	b, back := h.join(join)
	second := claimOn(b, back)
	if rest, _ := io.ReadAll(b); len(rest) != 0 { // ends, the broker's reset
		t.Fatalf("the stream past the bound was sent %x", rest)
	}
	_ = a.Close()

	recs := h.records()
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	checkFrames(t, "the first's in", recs[0].In(), join, first)
	checkBlock(t, recs[0].Err(), false)
	checkFrames(t, "the second's in", recs[1].In(), join, second)
	checkFrames(t, "the second's out", recs[1].Out(), &pb.Ack{Status: pb.Status_OK, Challenge: back.Challenge})
	var be *p2p.BlockPeerError
	if err := recs[1].Err(); err == nil || errors.As(err, &be) {
		t.Fatalf("the second stream's handler returned %v, want an error that blocks nobody", err)
	}
	if n := rec.count(kind(bps.EventClaim)); n != 1 {
		t.Fatalf("%d claims taken, want 1", n)
	}
}
