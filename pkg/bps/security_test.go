// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"sync/atomic"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/encoding/protodelim"
)

// The rows of SWIP-74 Rev 8's security table that can be exercised
// in-process (docs/conformance.md, "Rev 8's security table"). Rev 3's
// claim rows retire with the claim: a stale claim in a Join (the Join
// carries no credential: TestRev8_03), a SOC signature presented as a claim
// (the kinds' feeds are disjoint: TestRev8Security_AuthAsData), a claim
// over another broker's challenge (TestRev8Security_FramesReplayedOnAnotherStream).
// The admin's retransmits and two admin streams are in TestConcurrentAdminStreams.

// TestRev8Security_FramesReplayedOnAnotherStream: whoever saw the admin's
// frames — the node that bridged them, a relay, another broker's audience —
// cannot present them on a stream of its own, at this broker or another:
// each stream is issued a challenge of its own, in every chunk's id. The
// replay is dropped before any signature (wrong_challenge), never
// punished, and the replayer's stream stays pending: it claims nothing and
// is given nothing.
func TestRev8Security_FramesReplayedOnAnotherStream(t *testing.T) {
	t.Parallel()
	net, b1, cl := cluster(t, bps.Options{}, 3)
	b2 := newNode(t, net, bps.Options{})
	if err := net.Connect(cl[2].Node, b2.Node); err != nil {
		t.Fatal(err)
	}
	admin := newKey(t)
	sp := feedSpec(t, "replayed frames", admin)
	sub := subscribe(t, cl[0], b1, sp)
	a := publish(t, cl[1], b1, sp, admin, 0)
	frames := []*pb.Broadcast{auth(t, admin, sp, a.Challenge()), update(t, admin, sp, a.Challenge(), 0, "genuine")}
	send(t, a, frames[1])
	if d := recv(t, sub); d.Index != 0 {
		t.Fatalf("delivered %d", d.Index)
	}

	for _, at := range []*tnode{b1, b2} {
		r := openRaw(t, cl[2], at)
		ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
		if bytes.Equal(ack.Challenge, a.Challenge()) {
			t.Fatal("two streams were issued the same challenge")
		}
		for _, f := range frames {
			r.send(f)
		}
		at.rec.waitN(t, 2, "the replays dropped", dropped(bps.CounterWrongChallenge))
		if n := at.rec.count(kind(bps.EventClaim)); at == b1 && n != 1 || at == b2 && n != 0 {
			t.Fatalf("%d claims taken, want the admin's own only", n)
		}
		pubs := 0
		if at == b1 {
			pubs = 1
		}
		if c := cohortInfo(t, at, sp); c.Counters["invalid_soc"] != 0 || c.Counters["wrong_challenge"] != 2 || c.Publishers != pubs {
			t.Fatalf("counters %v, %d publishers", c.Counters, c.Publishers)
		}
	}
	if bl := append(b1.Blocklists(), b2.Blocklists()...); len(bl) != 0 {
		t.Fatalf("a replay dropped unchecked was penalised: %v", bl)
	}
	send(t, a, update(t, admin, sp, a.Challenge(), 1, "still the admin's"))
	if d := recv(t, sub); d.Index != 1 || string(d.Payload()) != "still the admin's" {
		t.Fatalf("delivered %d %q", d.Index, d.Payload())
	}
}

// TestRev8Security_ChallengeSubstituted: a replayer puts its own stream's
// challenge into a captured frame: the challenge is in the id's preimage,
// so the chunk does not have the id derived from the frame — invalid_soc,
// a violation — and nothing moves.
func TestRev8Security_ChallengeSubstituted(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "substituted", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a := publish(t, cl[1], broker, sp, admin, 0)
	broker.rec.wait(t, "the admin's claim", kind(bps.EventClaim)) // one pending stream per address at a time
	captured := update(t, admin, sp, a.Challenge(), 5, "captured")

	r := openRaw(t, cl[2], broker)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	if ack.Status != pb.Status_OK {
		t.Fatalf("ack %v", ack)
	}
	captured.Challenge = ack.Challenge
	r.send(captured)
	expectReset(t, r)
	waitBlocklisted(t, broker, cl[2])
	c := cohortInfo(t, broker, sp)
	if c.Counters["invalid_soc"] != 1 || c.Cursor != 0 {
		t.Fatalf("counters %v cursor %d", c.Counters, c.Cursor)
	}
	send(t, a, update(t, admin, sp, a.Challenge(), 0, "zero"))
	if d := recv(t, sub); d.Index != 0 {
		t.Fatalf("delivered %d, want 0: the substituted frame moved something", d.Index)
	}
}

// hostileBroker is a node that answers every Join OK with a challenge of
// its own and sends the frames frames(n) gives for its n-th stream (from
// 0), then holds the stream until its peer ends it; ended receives, for
// each stream, why it ended.
func hostileBroker(t *testing.T, net *streamtest.Network, frames func(n int) []*pb.Broadcast) (evil *streamtest.Node, ended <-chan error) {
	t.Helper()
	out := make(chan error, 16)
	var streams atomic.Int64
	evil = net.NewNode()
	if err := evil.AddProtocol(p2p.ProtocolSpec{Name: bps.ProtocolName, Version: bps.ProtocolVersion,
		StreamSpecs: []p2p.StreamSpec{{Name: bps.StreamName, Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			r := bufio.NewReader(s)
			if err := protodelim.UnmarshalFrom(r, new(pb.Join)); err != nil {
				return err
			}
			b := bps.EncodeFrame(&pb.Ack{Status: pb.Status_OK, Challenge: keccak([]byte("the hostile broker's challenge"))})
			for _, m := range frames(int(streams.Add(1) - 1)) {
				b = append(b, bps.EncodeFrame(m)...)
			}
			if _, err := s.Write(b); err != nil {
				return err
			}
			_, err := io.Copy(io.Discard, r)
			if err == nil {
				err = io.EOF
			}
			select {
			case out <- err:
			default:
			}
			return s.Close()
		}}}}); err != nil {
		t.Fatal(err)
	}
	return evil, out
}

// subscribeAt is client's subscription to evil.
func subscribeAt(t *testing.T, client *tnode, evil *streamtest.Node, sp *bps.Spec) *bps.Subscription {
	t.Helper()
	sub, err := client.svc.Subscribe(ctxT(t), evil.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// TestRev8Security_FrameAlteredByBroker: a broker (or relay) that alters a
// frame it forwards gives the subscriber a chunk it re-verifies and
// refuses. One whose index or kind was changed does not have the id the
// frame derives: invalid_soc, and the subscriber ends that parent stream
// (a parent checks what it forwards: docs/protocol.md, "Receivers"). One
// whose payload was changed recovers another owner, whom the subscriber
// does not admit: dropped and counted wrong_owner, not held against the
// parent (it cannot be told from a publisher revoked by a roster the
// parent had not yet), and the parent's next valid frame is taken.
func TestRev8Security_FrameAlteredByBroker(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	sp := feedSpec(t, "altered", admin)
	ch := keccak([]byte("the admin's stream"))
	for _, tc := range []struct {
		name  string
		alter func(b *pb.Broadcast)
		why   bps.Counter
	}{
		{"index", func(b *pb.Broadcast) { b.Index++ }, bps.CounterInvalidSOC},
		{"kind", func(b *pb.Broadcast) { b.Kind = pb.Kind_ROSTER }, bps.CounterInvalidSOC},
		{"challenge", func(b *pb.Broadcast) { b.Challenge = keccak([]byte("another")) }, bps.CounterInvalidSOC},
		{"payload", func(b *pb.Broadcast) { b.Soc[len(b.Soc)-1] ^= 1 }, bps.CounterWrongOwner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			net := newNetwork(t)
			altered := update(t, admin, sp, ch, 1, "one")
			tc.alter(altered)
			evil, ended := hostileBroker(t, net, func(int) []*pb.Broadcast {
				return []*pb.Broadcast{update(t, admin, sp, ch, 0, "zero"), altered, update(t, admin, sp, ch, 2, "two")}
			})
			client := newNode(t, net, bps.Options{Timing: bps.Timing{BackoffMin: waitTimeout, BackoffMax: waitTimeout}})
			if err := net.Connect(client.Node, evil); err != nil {
				t.Fatal(err)
			}
			sub := subscribeAt(t, client, evil, sp)
			if d := recv(t, sub); d.Index != 0 {
				t.Fatalf("delivered %d first", d.Index)
			}
			client.rec.wait(t, "the altered frame refused", func(e bps.Event) bool {
				return e.Kind == bps.EventClientDrop && e.Counter == tc.why
			})
			if tc.why == bps.CounterWrongOwner {
				if d := recv(t, sub); d.Index != 2 {
					t.Fatalf("delivered %d, want 2", d.Index)
				}
				return
			}
			select {
			case err := <-ended:
				if err == nil {
					t.Fatal("the parent stream was not ended")
				}
			case <-ctxT(t).Done():
				t.Fatal("the subscriber kept the stream of a parent that forwarded an invalid chunk")
			}
			noDelivery(t, sub.C(), "the subscriber, after the altered frame,")
		})
	}
}

// TestRev8Security_ReusedIndexAcrossSessions: a DATA index of an earlier
// session of the admin's, reused under another session's challenge with
// another payload, is below the returning subscriber's cursor: the node's
// cursor per (topic, owner) spans its subscriptions, streams and sessions
// (docs/protocol.md, "Cursors"), so an earlier session's update never
// stands in for a later one, nor the other way round.
func TestRev8Security_ReusedIndexAcrossSessions(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	admin := newKey(t)
	sp := feedSpec(t, "reused index", admin)
	s1, s2 := keccak([]byte("session one")), keccak([]byte("session two"))
	evil, _ := hostileBroker(t, net, func(n int) []*pb.Broadcast {
		if n == 0 {
			return []*pb.Broadcast{update(t, admin, sp, s1, 0, "a"), update(t, admin, sp, s1, 1, "b")}
		}
		return []*pb.Broadcast{update(t, admin, sp, s2, 1, "b, rewritten"), update(t, admin, sp, s2, 2, "c")}
	})
	client := newNode(t, net, bps.Options{})
	if err := net.Connect(client.Node, evil); err != nil {
		t.Fatal(err)
	}
	first := subscribeAt(t, client, evil, sp)
	recv(t, first)
	if d := recv(t, first); d.Index != 1 {
		t.Fatalf("delivered %d", d.Index)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again := subscribeAt(t, client, evil, sp)
	if d := recv(t, again); d.Index != 2 || string(d.Payload()) != "c" {
		t.Fatalf("the returning subscriber got %d %q, want 2", d.Index, d.Payload())
	}
	if again.Dropped() != 1 {
		t.Fatalf("dropped %d, want the reused index", again.Dropped())
	}
}

// TestRev8Security_DeclaringTheAdminIsHarmless: anyone may declare the
// admin's address and is issued a challenge: a pending stream, outside the
// fan-out set, which receives nothing. Without the admin's key it cannot
// claim: the admin's frames replayed on it are under another challenge
// (dropped, wrong_challenge), and a chunk it signs itself is not valid at
// the admin's address (invalid_soc, a violation). The admin's cohort goes
// on.
func TestRev8Security_DeclaringTheAdminIsHarmless(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin, squatter := newKey(t), newKey(t)
	sp := feedSpec(t, "squat", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a := publish(t, cl[1], broker, sp, admin, 0)
	genuine := update(t, admin, sp, a.Challenge(), 0, "genuine")
	send(t, a, genuine)
	recv(t, sub)

	r := openRaw(t, cl[2], broker)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	if ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
		t.Fatalf("ack %v", ack)
	}
	r.send(genuine)
	broker.rec.wait(t, "the replay dropped", dropped(bps.CounterWrongChallenge))
	send(t, a, update(t, admin, sp, a.Challenge(), 1, "one"))
	if d := recv(t, sub); d.Index != 1 {
		t.Fatalf("delivered %d", d.Index)
	}
	r.send(update(t, squatter, sp, ack.Challenge, 2, "squatted"))
	expectReset(t, r) // read nothing before: a pending stream is given nothing
	waitBlocklisted(t, broker, cl[2])
	if c := cohortInfo(t, broker, sp); c.Counters["invalid_soc"] != 1 || c.Cursor != 2 || broker.rec.count(kind(bps.EventClaim)) != 1 {
		t.Fatalf("counters %v cursor %d", c.Counters, c.Cursor)
	}
	send(t, a, update(t, admin, sp, a.Challenge(), 2, "two"))
	if d := recv(t, sub); d.Index != 2 || string(d.Payload()) != "two" {
		t.Fatalf("delivered %d %q", d.Index, d.Payload())
	}
}

// TestRev8Security_ForwardedChallenge: a relay or impostor broker that
// hands the publisher an honest broker's challenge is a transparent hop:
// the admin's own chunks, signed by its key under that challenge, reach the
// audience as the admin's — the hop can withhold, not author (Rev 8's
// forwarded-challenge row). A chunk it alters on the way is invalid_soc,
// a violation.
func TestRev8Security_ForwardedChallenge(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "forwarded", admin)
	sub := subscribe(t, cl[1], broker, sp)
	hop := openRaw(t, cl[0], broker)
	ack := hop.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	// The hop hands the challenge to the admin, who signs under it.
	hop.send(auth(t, admin, sp, ack.Challenge))
	hop.send(update(t, admin, sp, ack.Challenge, 0, "through the hop"))
	if d := recv(t, sub); d.Index != 0 || !bytes.Equal(d.Owner, admin.addr) || string(d.Payload()) != "through the hop" {
		t.Fatalf("delivered %d %q from %x", d.Index, d.Payload(), d.Owner)
	}
	authored := update(t, admin, sp, ack.Challenge, 1, "the admin's words")
	copy(authored.Soc[len(authored.Soc)-5:], "hop's")
	hop.send(authored)
	expectReset(t, hop)
	waitBlocklisted(t, broker, cl[0])
	if c := cohortInfo(t, broker, sp); c.Counters["invalid_soc"] != 1 || c.Cursor != 1 {
		t.Fatalf("counters %v cursor %d", c.Counters, c.Cursor)
	}
	noDelivery(t, sub.C(), "the subscriber, of the altered chunk,")
}

// TestRev8Security_ChannelFeedUpdateOnStream: the update for storage, the
// same payload under the channel's own id keccak256(topic ‖ index), is
// valid as a SOC but no challenge gives its id: on a stream it is
// invalid_soc, a violation (docs/protocol.md, "The session feed").
func TestRev8Security_ChannelFeedUpdateOnStream(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "storage on the wire", admin)
	sub := subscribe(t, cl[1], broker, sp)
	r := openRaw(t, cl[0], broker)
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	r.send(auth(t, admin, sp, ack.Challenge))
	broker.rec.wait(t, "claimed", kind(bps.EventClaim))
	data, _, err := bps.SignSOC(admin.signer, admin.addr, bps.FeedID(sp.Topic, 0), []byte("stored"))
	if err != nil {
		t.Fatal(err)
	}
	r.send(&pb.Broadcast{Soc: data, Kind: pb.Kind_DATA, Challenge: ack.Challenge, Index: 0})
	expectReset(t, r)
	waitBlocklisted(t, broker, cl[0])
	if c := cohortInfo(t, broker, sp); c.Counters["invalid_soc"] != 1 || c.Cursor != 0 {
		t.Fatalf("counters %v cursor %d", c.Counters, c.Cursor)
	}
	noDelivery(t, sub.C(), "the subscriber")
}

// TestRev8Security_AuthAsData: each kind has a feed of its own (the kind is
// in the id's prefix), so a chunk signed for one kind is not one of
// another: an AUTH sent as DATA, a DATA sent as AUTH, are invalid_soc, a
// violation — the signature of an AUTH never publishes anything.
func TestRev8Security_AuthAsData(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	for name, f := range map[string]func(sp *bps.Spec, ch []byte) *pb.Broadcast{
		"auth as data": func(sp *bps.Spec, ch []byte) *pb.Broadcast {
			b := auth(t, admin, sp, ch)
			b.Kind = pb.Kind_DATA
			return b
		},
		"data as auth": func(sp *bps.Spec, ch []byte) *pb.Broadcast {
			b := update(t, admin, sp, ch, 0, "")
			b.Kind = pb.Kind_AUTH
			return b
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 2)
			sp := feedSpec(t, "kinds apart", admin)
			sub := subscribe(t, cl[1], broker, sp)
			r := openRaw(t, cl[0], broker)
			ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
			r.send(f(sp, ack.Challenge))
			expectReset(t, r)
			waitBlocklisted(t, broker, cl[0])
			if c := cohortInfo(t, broker, sp); c.Counters["invalid_soc"] != 1 || c.Publishers != 0 {
				t.Fatalf("counters %v, %d publishers", c.Counters, c.Publishers)
			}
			noDelivery(t, sub.C(), "the subscriber")
		})
	}
}
