// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/proto"
)

// swarmChunk is the chunk data at addr, for bee's validators.
func swarmChunk(t *testing.T, addr, data []byte) swarm.Chunk {
	t.Helper()
	return swarm.NewChunk(swarm.NewAddress(addr), data)
}

// The singlehop broker's conformance to SWIP-74 Rev 8's items
// (docs/conformance.md, "SWIP-74 Rev 8 and SWIP-60 rev 14"). Items 1–3
// are in bps_test.go, 9–10 in bounds_test.go.

// expectOnly reads the frames r receives until the broker closes it at the
// cohort's end: want (ending with the EOS, unless r is a stream of the
// admin's, which is not sent its own EOS), then the broker's clean close —
// nothing else. The stream is FIFO and the broker closes it after the end,
// so a delivery queued on it before would show.
func expectOnly(t *testing.T, r *raw, what string, want ...*pb.Broadcast) {
	t.Helper()
	for i, w := range want {
		if got := r.recvMessage(); !proto.Equal(got, w) {
			t.Fatalf("%s: frame %d is kind %s index %d, want kind %s index %d", what, i, got.Kind, got.Index, w.Kind, w.Index)
		}
	}
	if err := r.expectEnd(); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: after %d frames: %v, want the broker's clean close", what, len(want), err)
	}
}

// claimed opens a raw stream of k's from c to broker, declaring k's
// address, and claims it with an AUTH; it returns the stream and its
// challenge once the broker took the claim.
func claimed(t *testing.T, c, broker *tnode, sp *bps.Spec, k key) (*raw, []byte) {
	t.Helper()
	r := openRaw(t, c, broker)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: k.addr})
	if ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
		t.Fatalf("join: %s, challenge %x", ack.Status, ack.Challenge)
	}
	n := broker.rec.count(kind(bps.EventClaim))
	r.send(auth(t, k, sp, ack.Challenge))
	broker.rec.waitN(t, n+1, "the claim", kind(bps.EventClaim))
	return r, ack.Challenge
}

// signWrapped is k's SOC under id wrapping the chunk whose span-prefixed
// data is spanData — any span, whatever the payload — built with bee's
// cac and soc packages.
func signWrapped(t *testing.T, k key, id, spanData []byte) []byte {
	t.Helper()
	wrapped, err := cac.NewWithDataSpan(spanData)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := k.signer.Sign(keccak(id, wrapped.Address().Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := soc.NewSigned(id, wrapped, k.addr, sig)
	if err != nil {
		t.Fatal(err)
	}
	ch, err := s.Chunk()
	if err != nil {
		t.Fatal(err)
	}
	return ch.Data()
}

// TestRev8_04_PendingClaimsByFirstFrame (Rev 8 item 4): a Join declaring
// the admin's addr is admitted as a pending stream that receives nothing;
// its first valid frame — an AUTH, or DATA above, at or below the cursor —
// claims and upgrades it, with no reply. A DATA below the cursor is
// validated first, upgrades the stream, and is then counted a retransmit
// and not delivered (docs/protocol.md "The claim: the first valid frame").
func TestRev8_04_PendingClaimsByFirstFrame(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		first     func(t *testing.T, admin key, sp *bps.Spec, ch []byte) *pb.Broadcast
		delivered int64 // the first frame's index delivered, -1 for none
	}{
		{"AUTH", func(t *testing.T, admin key, sp *bps.Spec, ch []byte) *pb.Broadcast { return auth(t, admin, sp, ch) }, -1},
		{"DATA above the cursor", func(t *testing.T, admin key, sp *bps.Spec, ch []byte) *pb.Broadcast {
			return update(t, admin, sp, ch, 9, "above")
		}, 9},
		{"DATA at the cursor", func(t *testing.T, admin key, sp *bps.Spec, ch []byte) *pb.Broadcast {
			return update(t, admin, sp, ch, 5, "at")
		}, 5},
		{"DATA below the cursor", func(t *testing.T, admin key, sp *bps.Spec, ch []byte) *pb.Broadcast {
			return update(t, admin, sp, ch, 2, "below")
		}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 3)
			admin := newKey(t)
			sp := feedSpec(t, "claim", admin)
			sub := subscribe(t, cl[0], broker, sp)

			// Another stream of the admin's moves the cursor to 5, the last
			// two while r is pending: r receives none of it. (It is
			// claimed first: one pending stream per address at a time.)
			p := publish(t, cl[2], broker, sp, admin, 0)
			broker.rec.wait(t, "the other stream's claim", kind(bps.EventClaim))
			r := openRaw(t, cl[1], broker)
			ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
			if ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
				t.Fatalf("ack %s challenge %x", ack.Status, ack.Challenge)
			}
			for i := range uint64(5) {
				sendUpdate(t, p, i, "before")
				if d := recv(t, sub); d.Index != i {
					t.Fatalf("delivered %d, want %d", d.Index, i)
				}
			}
			if c := cohortInfo(t, broker, sp); c.Publishers != 1 || c.Cursor != 5 {
				t.Fatalf("before the claim: publishers %d cursor %d, want 1 and 5", c.Publishers, c.Cursor)
			}

			r.send(tc.first(t, admin, sp, ack.Challenge))
			broker.rec.waitN(t, 2, "the pending stream's claim", kind(bps.EventClaim))
			if tc.delivered >= 0 {
				if d := recv(t, sub); d.Index != uint64(tc.delivered) || !bytes.Equal(d.Challenge, ack.Challenge) {
					t.Fatalf("delivered %d under %x, want %d under the claiming stream's", d.Index, d.Challenge, tc.delivered)
				}
			}
			if tc.name == "DATA below the cursor" {
				broker.rec.wait(t, "the claiming update counted a retransmit", dropped(bps.CounterRetransmit))
			}
			// Upgraded: it publishes like any publisher stream.
			next := uint64(max(tc.delivered+1, 5))
			r.send(update(t, admin, sp, ack.Challenge, next, "after the claim"))
			if d := recv(t, sub); d.Index != next || string(d.Payload()) != "after the claim" {
				t.Fatalf("delivered %d %q, want %d: the frame before it was delivered, or the claim not taken", d.Index, d.Payload(), next)
			}
			c := cohortInfo(t, broker, sp)
			if c.Publishers != 2 || c.Subscribers != 1 {
				t.Fatalf("publishers %d subscribers %d, want 2 and 1", c.Publishers, c.Subscribers)
			}
			for name, n := range c.Counters {
				if want := map[bool]uint64{true: 1}[name == "retransmit" && tc.name == "DATA below the cursor"]; n != want {
					t.Errorf("counter %s = %d, want %d", name, n, want)
				}
			}
			// No reply to the claim, and nothing to the pending stream
			// before it, nor to the publisher stream after it (SWIP-74: a
			// publisher stream receives nothing, not even the admin's EOS,
			// which is bound to its address): the broker's close at the
			// cohort's end is all it reads.
			send(t, p, eos(t, admin, sp, p.Challenge()))
			expectOnly(t, r, "the claiming stream")
			if bl := broker.Blocklists(); len(bl) != 0 {
				t.Fatalf("blocklisted %v", bl)
			}
		})
	}
}

// TestRev8_04_PendingSeatNotSquatted (Rev 8 item 4 and "Resource
// bounds": the pending stream "is not a slot anyone can squat"): another
// overlay declaring the admin's address holds a pending stream it cannot
// claim; the admin joining meanwhile is admitted, its own pending stream
// replacing the squatter's — reset without penalty, since a stream of the
// admin's that the transport has not reaped looks the same — and claims
// and publishes at once.
func TestRev8_04_PendingSeatNotSquatted(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "squat", admin)
	sub := subscribe(t, cl[0], broker, sp) // the fan-out set is full
	squat := openRaw(t, cl[1], broker)
	if ack := squat.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr}); ack.Status != pb.Status_OK {
		t.Fatalf("the squatter: %s", ack.Status)
	}
	p := publish(t, cl[2], broker, sp, admin, 0)
	broker.rec.wait(t, "the admin's claim", kind(bps.EventClaim))
	expectReset(t, squat)
	broker.rec.wait(t, "the squatter left", func(e bps.Event) bool { return e.Kind == bps.EventLeave && e.Err != nil })
	sendUpdate(t, p, 0, "the admin's")
	if d := recv(t, sub); string(d.Payload()) != "the admin's" {
		t.Fatalf("delivered %q", d.Payload())
	}
	if c := cohortInfo(t, broker, sp); c.Publishers != 1 || c.Subscribers != 1 {
		t.Fatalf("publishers %d subscribers %d, want 1 1", c.Publishers, c.Subscribers)
	}
	if n := broker.rec.count(dropped(bps.CounterClaimTimeout)); n != 0 {
		t.Fatalf("claim_timeout %d: the replaced stream was counted", n)
	}
}

// TestRev8_05_Acceptance (Rev 8 item 5): a Broadcast is accepted iff on a
// publisher or pending stream, of kind DATA or AUTH, under its stream's
// challenge, DATA at or above the cursor, its chunk with the derived id
// and valid at keccak256(id ‖ admin). An accepted DATA sets the cursor and
// is delivered unchanged — the frame byte for byte — to every subscriber
// stream and to no publisher stream; an AUTH is never delivered; an AUTH
// with a payload or a nonzero span is invalid: a violation.
func TestRev8_05_Acceptance(t *testing.T) {
	t.Parallel()
	t.Run("delivered unchanged", func(t *testing.T) {
		t.Parallel()
		_, broker, cl := cluster(t, bps.Options{}, 4)
		admin := newKey(t)
		sp := feedSpec(t, "acceptance", admin)
		sub := subscribe(t, cl[0], broker, sp)
		rawSub := openRaw(t, cl[1], broker)
		if ack := rawSub.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress}); ack.Status != pb.Status_OK {
			t.Fatal(ack.Status)
		}
		pubA, chA := claimed(t, cl[2], broker, sp, admin)
		pubB, chB := claimed(t, cl[3], broker, sp, admin)

		first := update(t, admin, sp, chA, 0, "first")
		pubA.send(first)
		broker.rec.wait(t, "accept 0", acceptedIndex(0))
		pubA.send(auth(t, admin, sp, chA)) // activity, never delivered
		pubB.send(auth(t, admin, sp, chB))
		second := update(t, admin, sp, chB, 1, "second")
		pubB.send(second)
		broker.rec.wait(t, "accept 1", acceptedIndex(1))

		for i, want := range []*pb.Broadcast{first, second} {
			got := rawSub.recvMessage()
			if !bytes.Equal(bps.EncodeFrame(got), bps.EncodeFrame(want)) {
				t.Fatalf("raw delivery %d differs from the publication: %v", i, got)
			}
			d := recv(t, sub)
			if !proto.Equal(d.Broadcast(), want) || !bytes.Equal(d.Owner, admin.addr) {
				t.Fatalf("delivery %d: %v, want the publication", i, d.Broadcast())
			}
			if wantAddr := keccak(d.ID(), admin.addr); !bytes.Equal(d.Address.Bytes(), wantAddr) {
				t.Fatalf("delivery %d at %s, want keccak256(id ‖ admin) %x", i, d.Address, wantAddr)
			}
		}
		c := cohortInfo(t, broker, sp)
		if c.Cursor != 2 || c.Accepted != 2 {
			t.Fatalf("cursor %d accepted %d, want 2 2", c.Cursor, c.Accepted)
		}
		for name, n := range c.Counters {
			if n != 0 {
				t.Errorf("counter %s = %d, want 0", name, n)
			}
		}
		// Publisher streams received nothing; the subscriber nothing more
		// (no AUTH): the end the admin sends next is the next frame of
		// the subscriber's, and the broker's close the next of the
		// admin's other stream.
		end := eos(t, admin, sp, chA)
		pubA.send(end)
		expectOnly(t, pubB, "publisher stream B")
		expectOnly(t, rawSub, "the raw subscriber", end)
	})

	admin := newKey(t)
	for name, mk := range map[string]func(sp *bps.Spec, ch []byte) *pb.Broadcast{
		"an AUTH with a payload": func(sp *bps.Spec, ch []byte) *pb.Broadcast {
			data, _, err := bps.SignSOC(admin.signer, admin.addr, bps.SessionID(pb.Kind_AUTH, sp.Topic, ch, 0), []byte("not empty"))
			if err != nil {
				t.Fatal(err)
			}
			return &pb.Broadcast{Soc: data, Kind: pb.Kind_AUTH, Challenge: ch}
		},
		"an AUTH with a nonzero span": func(sp *bps.Spec, ch []byte) *pb.Broadcast {
			span := binary.LittleEndian.AppendUint64(nil, 4096)
			return &pb.Broadcast{Soc: signWrapped(t, admin, bps.SessionID(pb.Kind_AUTH, sp.Topic, ch, 0), span), Kind: pb.Kind_AUTH, Challenge: ch}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, pending := range []bool{true, false} {
				_, broker, cl := cluster(t, bps.Options{}, 3)
				sp := feedSpec(t, "bad auth", admin)
				sub := subscribe(t, cl[0], broker, sp)
				var r *raw
				var ch []byte
				if pending {
					r = openRaw(t, cl[1], broker)
					ch = r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr}).Challenge
				} else {
					r, ch = claimed(t, cl[1], broker, sp, admin)
				}
				r.send(mk(sp, ch))
				expectReset(t, r)
				waitBlocklisted(t, broker, cl[1])
				if got := cohortInfo(t, broker, sp).Counters["invalid_soc"]; got != 1 {
					t.Fatalf("pending %v: invalid_soc = %d, want 1", pending, got)
				}
				// Nothing lost for anyone else.
				sendUpdate(t, publish(t, cl[2], broker, sp, admin, 0), 0, "still served")
				if d := recv(t, sub); string(d.Payload()) != "still served" {
					t.Fatalf("pending %v: the subscriber got %q", pending, d.Payload())
				}
			}
		})
	}
}

// TestRev8_06_Violations (Rev 8 item 6): a frame from a subscriber
// (spectator) stream, and a chunk that does not validate on any stream —
// its kind swapped, its index changed, another challenge's chunk with the
// stream's put in the frame, another owner's, tampered — is a violation:
// counted, the stream reset, the peer blocklisted; nobody else loses
// anything.
func TestRev8_06_Violations(t *testing.T) {
	t.Parallel()
	admin, stranger := newKey(t), newKey(t)
	type tc struct {
		addr    []byte // what the violator's Join declares
		claim   bool   // it claims with an AUTH first
		frame   func(sp *bps.Spec, ch []byte) []byte
		counter string
	}
	enc := bps.EncodeFrame
	for name, c := range map[string]tc{
		"a spectator's DATA": {addr: bps.ZeroAddress, counter: "wrong_stream",
			frame: func(sp *bps.Spec, ch []byte) []byte { return enc(update(t, admin, sp, ch, 0, "not yours")) }},
		"a stranger's AUTH": {addr: stranger.addr, counter: "wrong_stream",
			frame: func(sp *bps.Spec, ch []byte) []byte { return enc(auth(t, stranger, sp, ch)) }},
		"a spectator's garbage": {addr: bps.ZeroAddress, counter: "invalid_soc",
			frame: func(*bps.Spec, []byte) []byte { return []byte{5, 0xff, 0xff, 0xff, 0xff, 0xff} }},
		"an oversized frame": {addr: admin.addr, claim: true, counter: "invalid_soc",
			frame: func(*bps.Spec, []byte) []byte { return append([]byte{0x81, 0x80, 0x01}, make([]byte, 64)...) }},
		"kind swapped": {addr: admin.addr, claim: true, counter: "invalid_soc",
			frame: func(sp *bps.Spec, ch []byte) []byte {
				b := update(t, admin, sp, ch, 0, "data")
				b.Kind = pb.Kind_ROSTER
				return enc(b)
			}},
		"index changed": {addr: admin.addr, claim: true, counter: "invalid_soc",
			frame: func(sp *bps.Spec, ch []byte) []byte {
				b := update(t, admin, sp, ch, 0, "zero")
				b.Index = 1
				return enc(b)
			}},
		"the stream's challenge put on another's chunk": {addr: admin.addr, claim: true, counter: "invalid_soc",
			frame: func(sp *bps.Spec, ch []byte) []byte {
				b := update(t, admin, sp, keccak([]byte("another stream")), 0, "elsewhere")
				b.Challenge = ch
				return enc(b)
			}},
		"another owner's chunk": {addr: admin.addr, claim: true, counter: "invalid_soc",
			frame: func(sp *bps.Spec, ch []byte) []byte { return enc(update(t, stranger, sp, ch, 0, "forged")) }},
		"another owner's chunk, pending": {addr: admin.addr, counter: "invalid_soc",
			frame: func(sp *bps.Spec, ch []byte) []byte { return enc(update(t, stranger, sp, ch, 0, "forged")) }},
		"tampered": {addr: admin.addr, claim: true, counter: "invalid_soc",
			frame: func(sp *bps.Spec, ch []byte) []byte {
				b := update(t, admin, sp, ch, 0, "tampered")
				b.Soc[len(b.Soc)-1] ^= 1
				return enc(b)
			}},
		"another cohort's chunk": {addr: admin.addr, claim: true, counter: "invalid_soc",
			frame: func(_ *bps.Spec, ch []byte) []byte {
				return enc(update(t, admin, feedSpec(t, "elsewhere", admin), ch, 0, "x"))
			}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 3)
			sp := feedSpec(t, "violations", admin)
			other := subscribe(t, cl[1], broker, sp)
			var r *raw
			var ch []byte
			if c.claim {
				r, ch = claimed(t, cl[0], broker, sp, admin)
			} else {
				r = openRaw(t, cl[0], broker)
				ch = r.join(&pb.Join{Cohort: sp.PB(), Addr: c.addr}).Challenge
			}
			r.sendBytes(c.frame(sp, ch))
			expectReset(t, r)
			waitBlocklisted(t, broker, cl[0])
			if got := cohortInfo(t, broker, sp).Counters[c.counter]; got != 1 {
				t.Fatalf("%s = %d, want 1", c.counter, got)
			}
			if n := cohortInfo(t, broker, sp).Accepted; n != 0 {
				t.Fatalf("%d accepted", n)
			}
			sendUpdate(t, publish(t, cl[2], broker, sp, admin, 0), 0, "still served")
			if d := recv(t, other); d.Index != 0 || string(d.Payload()) != "still served" {
				t.Fatalf("the other subscriber got %d %q", d.Index, d.Payload())
			}
		})
	}
}

// TestRev8_06_WrongChallengeDropped (Rev 8 item 6): a frame under another
// challenge than its stream's is dropped before any signature check and
// counted, on a publisher stream and on a pending one (which stays
// pending); the broker resets a stream after 64 such frames, without
// penalty (docs/protocol.md "Validation", step 3).
func TestRev8_06_WrongChallengeDropped(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "wrong challenge", admin)
	sub := subscribe(t, cl[0], broker, sp)
	old := keccak([]byte("a previous stream's challenge"))

	// Pending: dropped, counted, still pending; its own challenge claims.
	pending := openRaw(t, cl[2], broker)
	ch2 := pending.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr}).Challenge
	pending.send(update(t, admin, sp, old, 0, "queued for the old stream"))
	broker.rec.wait(t, "dropped on the pending stream", dropped(bps.CounterWrongChallenge))
	if n := broker.rec.count(kind(bps.EventClaim)); n != 0 {
		t.Fatalf("%d claims: a frame under another challenge claimed", n)
	}
	pending.send(auth(t, admin, sp, ch2))
	broker.rec.wait(t, "the claim under its own", kind(bps.EventClaim))

	r, ch := claimed(t, cl[1], broker, sp, admin)
	for i := range uint64(10) {
		r.send(update(t, admin, sp, old, i, "queued for the old stream"))
	}
	r.send(update(t, admin, sp, ch, 0, "re-signed"))
	if d := recv(t, sub); d.Index != 0 || string(d.Payload()) != "re-signed" {
		t.Fatalf("delivered %d %q, want the re-signed 0", d.Index, d.Payload())
	}
	if got := cohortInfo(t, broker, sp).Counters["wrong_challenge"]; got != 11 {
		t.Fatalf("wrong_challenge = %d, want 11", got)
	}
	// 64 on a stream are tolerated; the 65th resets it, no penalty.
	for i := range uint64(55) {
		r.send(update(t, admin, sp, old, 10+i, "more"))
	}
	expectReset(t, r)
	leave := broker.rec.wait(t, "the stream reset", func(e bps.Event) bool { return e.Kind == bps.EventLeave && e.Err != nil })
	if leave.Err == nil {
		t.Fatal("no reason")
	}
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations: frames under another challenge are not one", n)
	}
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("blocklisted %v", bl)
	}
	if got := cohortInfo(t, broker, sp).Counters["wrong_challenge"]; got != 66 {
		t.Fatalf("wrong_challenge = %d, want 66", got)
	}
	if n := cohortInfo(t, broker, sp).Accepted; n != 1 {
		t.Fatalf("accepted %d, want 1", n)
	}
}

// TestRev8_06_UnknownKindDropped (Rev 8 item 6): a kind the broker does
// not know (above EOS: what a later SWIP's kind looks like here) is
// dropped and counted unknown_kind, on a pending and on a publisher
// stream — "not a violation", however many come (more than the
// MaxInvalidFrames allowance) — neither is reset, and the pending stream
// still claims.
func TestRev8_06_UnknownKindDropped(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "unknown kind", admin)
	sub := subscribe(t, cl[0], broker, sp)
	r := openRaw(t, cl[1], broker)
	ch := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr}).Challenge
	future := update(t, admin, sp, ch, 0, "a later SWIP's")
	future.Kind = 9
	r.send(future)
	broker.rec.wait(t, "dropped while pending", dropped(bps.CounterUnknownKind))
	r.send(auth(t, admin, sp, ch))
	broker.rec.wait(t, "claimed", kind(bps.EventClaim))
	n := bps.DefaultMaxInvalidFrames + 1
	for range n {
		r.send(future)
	}
	broker.rec.waitN(t, n+1, "dropped on the publisher stream", dropped(bps.CounterUnknownKind))
	r.send(update(t, admin, sp, ch, 0, "known"))
	if d := recv(t, sub); d.Index != 0 || string(d.Payload()) != "known" {
		t.Fatalf("delivered %d %q", d.Index, d.Payload())
	}
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations", n)
	}
}

// TestRev8_06_UnsetKindViolation: KIND_UNSPECIFIED, the proto3 zero, is a
// malformed frame: a violation counted unknown_kind (docs/protocol.md
// "Frames and fields").
func TestRev8_06_UnsetKindViolation(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "unset kind", admin)
	sub := subscribe(t, cl[1], broker, sp)
	r, ch := claimed(t, cl[0], broker, sp, admin)
	b := update(t, admin, sp, ch, 0, "no kind")
	b.Kind = pb.Kind_KIND_UNSPECIFIED
	r.send(b)
	expectReset(t, r)
	waitBlocklisted(t, broker, cl[0])
	if got := cohortInfo(t, broker, sp).Counters["unknown_kind"]; got != 1 {
		t.Fatalf("unknown_kind = %d, want 1", got)
	}
	select {
	case <-sub.Done():
		t.Fatalf("the subscriber's stream ended: %v", sub.Err())
	default:
	}
}

// TestRev8_07_Cursor (Rev 8 item 7): n < cursor is a retransmit, counted,
// not a violation; gaps are accepted; index 0 is accepted on a fresh
// cohort.
func TestRev8_07_Cursor(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "cursor", admin)
	sub := subscribe(t, cl[0], broker, sp)
	p := publish(t, cl[1], broker, sp, admin, 0)
	ctx := ctxT(t)
	for _, n := range []uint64{0, 10, 3, 10, 11} {
		if err := p.PublishUpdate(ctx, n, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []uint64{0, 10, 11} {
		if d := recv(t, sub); d.Index != want {
			t.Fatalf("delivered %d, want %d", d.Index, want)
		}
	}
	c := cohortInfo(t, broker, sp)
	if c.Counters["retransmit"] != 2 || c.Cursor != 12 {
		t.Fatalf("retransmit %d cursor %d, want 2 12", c.Counters["retransmit"], c.Cursor)
	}
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("retransmits blocklisted %v", bl)
	}
}

// TestRev8_07_TwoAdminStreams (Rev 8 item 7): two streams of the admin's,
// each signing under its own challenge, share the admin's one cursor: the
// same index from both is delivered once (the second copy a retransmit,
// though its chunk differs), and each update once, in index order.
func TestRev8_07_TwoAdminStreams(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "two admin streams", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a, chA := claimed(t, cl[1], broker, sp, admin)
	b, chB := claimed(t, cl[2], broker, sp, admin)
	if bytes.Equal(chA, chB) {
		t.Fatal("two streams share a challenge")
	}
	a.send(update(t, admin, sp, chA, 0, "zero from A"))
	broker.rec.wait(t, "0 accepted", acceptedIndex(0))
	b.send(update(t, admin, sp, chB, 0, "zero from B"))
	broker.rec.wait(t, "B's 0 a retransmit", dropped(bps.CounterRetransmit))
	b.send(update(t, admin, sp, chB, 1, "one from B"))
	broker.rec.wait(t, "1 accepted", acceptedIndex(1))
	a.send(update(t, admin, sp, chA, 2, "two from A"))
	for i, want := range []string{"zero from A", "one from B", "two from A"} {
		if d := recv(t, sub); d.Index != uint64(i) || string(d.Payload()) != want {
			t.Fatalf("delivered %d %q, want %d %q", d.Index, d.Payload(), i, want)
		}
	}
	if c := cohortInfo(t, broker, sp); c.Cursor != 3 || c.Accepted != 3 || c.Publishers != 2 {
		t.Fatalf("cursor %d accepted %d publishers %d, want 3 3 2", c.Cursor, c.Accepted, c.Publishers)
	}
	end := eos(t, admin, sp, chA)
	a.send(end)
	expectOnly(t, b, "the admin's stream B")
}

// TestRev8_08_PublisherLeaving (Rev 8 item 8): a publisher stream going
// away does not end the cohort; the admin returns on a new stream, with a
// new challenge, and the cursor it left.
func TestRev8_08_PublisherLeaving(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "leaving", admin)
	sub := subscribe(t, cl[0], broker, sp)
	p := publish(t, cl[1], broker, sp, admin, 0)
	sendUpdate(t, p, 0, "a")
	recv(t, sub)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	broker.rec.wait(t, "publisher left", kind(bps.EventLeave))
	if c := cohortInfo(t, broker, sp); c.Cursor != 1 || c.Publishers != 0 || c.Subscribers != 1 {
		t.Fatalf("after the publisher left: cursor %d publishers %d subscribers %d", c.Cursor, c.Publishers, c.Subscribers)
	}
	p2 := publish(t, cl[1], broker, sp, admin, 1)
	if bytes.Equal(p2.Challenge(), p.Challenge()) {
		t.Fatal("the returning stream was issued the old challenge")
	}
	sendUpdate(t, p2, 0, "a again") // below the cursor it left
	sendUpdate(t, p2, 1, "b")
	if d := recv(t, sub); d.Index != 1 || string(d.Payload()) != "b" {
		t.Fatalf("delivered %d %q, want 1 b", d.Index, d.Payload())
	}
}

// TestRev8_08_Inactivity (Rev 8 item 8): a cohort with nothing accepted
// for the inactivity deadline is reclaimed, every stream in it reset; an
// accepted update restarts the deadline, and so does an AUTH (activity:
// the heartbeat). The publisher is a raw stream, which sends nothing the
// test does not (a Publisher beats by itself: TestPublisherHeartbeat).
// Runs on synctest's fake clock.
func TestRev8_08_Inactivity(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const deadline = bps.DefaultInactivity
		_, broker, cl := cluster(t, bps.Options{}, 2)
		admin := newKey(t)
		sp := feedSpec(t, "idle", admin)
		sub := subscribe(t, cl[0], broker, sp)
		p, ch := claimed(t, cl[1], broker, sp, admin)

		time.Sleep(deadline / 2)
		p.send(update(t, admin, sp, ch, 0, "a"))
		recv(t, sub)
		time.Sleep(deadline - time.Second) // the update's deadline, less a second
		synctest.Wait()
		if n := broker.rec.count(kind(bps.EventReclaim)); n != 0 {
			t.Fatal("reclaimed before the deadline counted from the last accepted update")
		}
		p.send(auth(t, admin, sp, ch)) // a heartbeat: the stream's AUTH again
		synctest.Wait()
		time.Sleep(deadline - time.Second) // past the update's deadline
		synctest.Wait()
		if n := broker.rec.count(kind(bps.EventReclaim)); n != 0 {
			t.Fatal("reclaimed although an AUTH came within the deadline")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := broker.rec.count(kind(bps.EventReclaim)); n != 1 {
			t.Fatalf("%d reclaims at the heartbeat's deadline, want 1", n)
		}
		if _, ok := <-sub.C(); ok {
			t.Fatal("delivery after reclaim")
		}
		<-sub.Done()
		if sub.Err() == nil {
			t.Fatal("a reclaim must reset the stream, not close it cleanly")
		}
		expectReset(t, p)
		if n := len(broker.svc.Cohorts()); n != 0 {
			t.Fatalf("%d cohorts after reclaim", n)
		}
		if bl := broker.Blocklists(); len(bl) != 0 {
			t.Fatalf("a reclaim blocklisted %v", bl)
		}
	})
}

// TestRev8_12_LitePeersAtFullBroker (Rev 8 item 12): a BPS-lite publisher
// and subscriber — raw Rev 8 frames only, nothing of SWIP-60 — interoperate
// with this full broker: the publisher claims with an AUTH at index 0
// (upstream's form B) or with a DATA first (form A), the subscriber
// declares an arbitrary 20-byte identity, and every frame it reads is a
// DATA it can verify by Rev 8's rules alone — the id from the frame's
// kind, challenge and index, the chunk valid at keccak256(id ‖ admin).
func TestRev8_12_LitePeersAtFullBroker(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 4)
	admin := newKey(t)
	sp := feedSpec(t, "lite", admin)
	full := subscribe(t, cl[3], broker, sp)
	lite := openRaw(t, cl[0], broker)
	if ack := lite.join(&pb.Join{Cohort: &pb.CohortSpec{Topic: sp.Topic, Binding: pb.TopicBinding_FEED_TOPIC, Admin: admin.addr}, Addr: newKey(t).addr}); ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
		t.Fatalf("the lite subscriber: %s", ack.Status)
	}

	formB, chB := claimed(t, cl[1], broker, sp, admin) // AUTH at 0
	formA := openRaw(t, cl[2], broker)
	chA := formA.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr}).Challenge
	formB.send(update(t, admin, sp, chB, 0, "form B"))
	broker.rec.wait(t, "0 accepted", acceptedIndex(0))
	formA.send(update(t, admin, sp, chA, 1, "form A, its claim"))
	broker.rec.wait(t, "1 accepted", acceptedIndex(1))
	formB.send(update(t, admin, sp, chB, 2, "form B again"))

	for i, want := range []string{"form B", "form A, its claim", "form B again"} {
		b := lite.recvMessage()
		id := b.Soc[:32]
		if b.Kind != pb.Kind_DATA || b.Index != uint64(i) || !bytes.Equal(id, bps.SessionID(pb.Kind_DATA, sp.Topic, b.Challenge, b.Index)) {
			t.Fatalf("lite frame %d: kind %s index %d, id not the session feed's", i, b.Kind, b.Index)
		}
		ch := swarmChunk(t, keccak(id, admin.addr), b.Soc)
		if !soc.Valid(ch) {
			t.Fatalf("lite frame %d: not valid at keccak256(id ‖ admin)", i)
		}
		if got := string(b.Soc[32+65+8:]); got != want {
			t.Fatalf("lite frame %d: %q, want %q", i, got, want)
		}
		if d := recv(t, full); d.Index != uint64(i) || string(d.Payload()) != want {
			t.Fatalf("the full subscriber's %d: %d %q", i, d.Index, d.Payload())
		}
	}
	if c := cohortInfo(t, broker, sp); c.Publishers != 2 || c.Accepted != 3 {
		t.Fatalf("publishers %d accepted %d, want 2 3", c.Publishers, c.Accepted)
	}
	if n := broker.rec.count(kind(bps.EventDrop)) + broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d drops and violations", n)
	}
}

// TestRev8_Counters (Rev 8's counters, rev 14's invalid_roster, ours
// revoked): each silent outcome is counted once in the cohort's counters
// (GET /pubsub/) and in the node-wide Prometheus twin. Runs on synctest's
// clock: the claim deadline passes when the test says so, and only then.
func TestRev8_Counters(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{QueueLen: 4}}, 7, streamtest.WithBufferSize(2048))
		admin, bob := newKey(t), newKey(t)
		sp := feedSpec(t, "counters", admin)
		sub := subscribe(t, cl[0], broker, sp)
		a, ch := claimed(t, cl[1], broker, sp, admin)
		drop := func(c bps.Counter) { t.Helper(); broker.rec.wait(t, c.String(), dropped(c)) }

		a.send(update(t, admin, sp, ch, 0, "zero"))
		recv(t, sub)
		a.send(update(t, admin, sp, ch, 0, "zero again"))
		drop(bps.CounterRetransmit)
		a.send(update(t, admin, sp, keccak([]byte("old stream")), 1, "queued for another stream"))
		drop(bps.CounterWrongChallenge)
		future := update(t, admin, sp, ch, 1, "a later kind")
		future.Kind = 9
		a.send(future)
		drop(bps.CounterUnknownKind)
		a.send(chunk(t, admin, sp, pb.Kind_ROSTER, ch, 0, []byte{0x0a, 0x05, 1, 2, 3, 4, 5})) // a 5-byte entry
		drop(bps.CounterInvalidRoster)

		// queue_reset: a subscriber that never reads past its Ack.
		slow := openRaw(t, cl[2], broker)
		slow.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress})
		for i := uint64(1); broker.rec.count(dropped(bps.CounterQueueReset)) == 0; i++ {
			if i > 200 {
				t.Fatal("no queue reset after 200 updates")
			}
			a.send(update(t, admin, sp, ch, i, string(make([]byte, 1000))))
			if d := recv(t, sub); d.Index != i {
				t.Fatalf("delivered %d, want %d", d.Index, i)
			}
		}

		// claim_timeout: a pending stream that never claims.
		openRaw(t, cl[3], broker).join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
		time.Sleep(bps.DefaultClaimDeadline)
		synctest.Wait()
		drop(bps.CounterClaimTimeout)

		// revoked: bob, a spectator named by a roster, claims; revoked,
		// it sends within the grace.
		b := openRaw(t, cl[4], broker)
		bch := b.join(&pb.Join{Cohort: sp.PB(), Addr: bob.addr}).Challenge
		a.send(rosterMsg(t, admin, sp, ch, 0, bob))
		if m := b.recvMessage(); m.Kind != pb.Kind_ROSTER || m.Index != 0 {
			t.Fatalf("bob was sent kind %s index %d, want the grant", m.Kind, m.Index)
		}
		claims := broker.rec.count(kind(bps.EventClaim))
		b.send(auth(t, bob, sp, bch))
		broker.rec.waitN(t, claims+1, "bob's claim", kind(bps.EventClaim))
		a.send(rosterMsg(t, admin, sp, ch, 1))
		if m := b.recvMessage(); m.Kind != pb.Kind_ROSTER || m.Index != 1 {
			t.Fatalf("bob was told kind %s index %d, want the revocation", m.Kind, m.Index)
		}
		b.send(update(t, bob, sp, bch, 0, "within the grace"))
		drop(bps.CounterRevoked)

		// wrong_stream: a spectator's frame; invalid_soc: the admin's
		// stream sends another owner's chunk. Both violations.
		spec := openRaw(t, cl[5], broker)
		sch := spec.join(&pb.Join{Cohort: sp.PB(), Addr: bps.ZeroAddress}).Challenge
		spec.send(update(t, admin, sp, sch, 100, "a spectator's"))
		drop(bps.CounterWrongStream)
		a.send(update(t, bob, sp, ch, 100, "not the admin's"))
		drop(bps.CounterInvalidSOC)

		c := cohortInfo(t, broker, sp)
		for _, name := range []string{"wrong_stream", "unknown_kind", "wrong_challenge", "invalid_soc", "claim_timeout", "retransmit", "queue_reset", "invalid_roster", "revoked"} {
			if got := c.Counters[name]; got != 1 {
				t.Errorf("cohort counter %s = %d, want 1", name, got)
			}
			if got := metricValue(t, broker.svc, name); got != 1 {
				t.Errorf("bee_bps_%s = %v, want 1", name, got)
			}
		}
		for _, name := range []string{"wrong_owner", "rate_limited"} {
			if got := c.Counters[name]; got != 0 {
				t.Errorf("cohort counter %s = %d, want 0", name, got)
			}
		}
	})
}
