// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Bad input (issue 23): every frame a peer can send under SWIP-74 Rev 8 /
// SWIP-60 rev 14, the peer lying. Each test gets the answer
// docs/protocol.md ("Validation at the broker") gives, checks it is
// counted — and nothing else is — and that nothing is lost for anyone
// else: the admin's next update still reaches the audience.

package bps_test

import (
	"fmt"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// lies is a broker with a cohort in progress — a subscriber, the admin's
// publisher stream, updates flowing — for a liar to lie to.
type lies struct {
	t      *testing.T
	net    *streamtest.Network
	broker *tnode
	admin  key
	sp     *bps.Spec
	sub    *bps.Subscription
	a      *bps.Publisher
	next   uint64 // the admin's next DATA index
	roster uint64 // the admin's next ROSTER index
}

func newLies(t *testing.T, o bps.Options, spec func(admin key) *bps.Spec) *lies {
	t.Helper()
	net, broker, cl := cluster(t, o, 2)
	f := &lies{t: t, net: net, broker: broker, admin: newKey(t)}
	f.sp = spec(f.admin)
	f.sub = subscribe(t, cl[0], broker, f.sp)
	f.a = publish(t, cl[1], broker, f.sp, f.admin, 0)
	if f.sp.Explicit() {
		broker.rec.wait(t, "the admin's claim", kind(bps.EventClaim))
	}
	f.honest()
	return f
}

func liveStream(t *testing.T, name string) func(key) *bps.Spec {
	return func(admin key) *bps.Spec { return feedSpec(t, name, admin) }
}

// peer is a fresh node connected to the broker: a liar of its own, whose
// blocklisting costs nobody else.
func (f *lies) peer() *tnode {
	f.t.Helper()
	n := newNode(f.t, f.net, bps.Options{})
	if err := f.net.Connect(n.Node, f.broker.Node); err != nil {
		f.t.Fatal(err)
	}
	return n
}

// join opens a raw stream from a fresh peer declaring addr.
func (f *lies) join(addr []byte) (*raw, *pb.Ack, *tnode) {
	f.t.Helper()
	n := f.peer()
	r := openRaw(f.t, n, f.broker)
	ack := r.join(&pb.Join{Cohort: f.sp.PB(), Addr: addr})
	if ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
		f.t.Fatalf("ack %v", ack)
	}
	return r, ack, n
}

// honest publishes the admin's next update and checks that the subscriber
// receives it next (rosters aside): every valid update, in order, nothing
// lost.
func (f *lies) honest() {
	f.t.Helper()
	want := fmt.Sprint("honest ", f.next)
	send(f.t, f.a, update(f.t, f.admin, f.sp, f.a.Challenge(), f.next, want))
	if d := recvData(f.t, f.sub); d.Kind != pb.Kind_DATA || d.Index != f.next || string(d.Payload()) != want {
		f.t.Fatalf("the subscriber got %s %d %q, want the admin's update %d", d.Kind, d.Index, d.Payload(), f.next)
	}
	f.next++
}

// recvData is the next DATA delivery on sub, rosters skipped.
func recvData(t *testing.T, sub *bps.Subscription) bps.Delivery {
	t.Helper()
	for {
		if d := recv(t, sub); d.Kind != pb.Kind_ROSTER {
			return d
		}
	}
}

// grant has the admin send its next roster, naming keys, and waits until
// the broker took it.
func (f *lies) grant(keys ...key) {
	f.t.Helper()
	send(f.t, f.a, rosterMsg(f.t, f.admin, f.sp, f.a.Challenge(), f.roster, keys...))
	i := f.roster
	f.broker.rec.wait(f.t, "the roster", func(e bps.Event) bool { return e.Kind == bps.EventAccept && e.Service && e.Index == i })
	f.roster++
}

// counted checks the cohort's counters: want, and every other zero.
func (f *lies) counted(want map[bps.Counter]uint64) {
	f.t.Helper()
	got := cohortInfo(f.t, f.broker, f.sp).Counters
	names := make(map[string]uint64, len(want))
	for c, n := range want {
		names[c.String()] = n
	}
	for name, n := range got {
		if n != names[name] {
			f.t.Fatalf("counters %v, want %v", got, names)
		}
	}
}

// violated checks that r was reset and its peer blocklisted.
func (f *lies) violated(r *raw, n *tnode) {
	f.t.Helper()
	expectReset(f.t, r)
	waitBlocklisted(f.t, f.broker, n)
}

// unpunished checks that nobody was blocklisted.
func (f *lies) unpunished() {
	f.t.Helper()
	if bl := f.broker.Blocklists(); len(bl) != 0 {
		f.t.Fatalf("penalised: %v", bl)
	}
}

// TestHostileRev8WrongChallenge: a frame under another challenge than its
// stream's — a captured frame of the admin's, replayed — is dropped and
// counted wrong_challenge before any signature; the stream stays pending
// and may still claim. Past 64 such frames on one stream it is reset,
// without penalty (docs/protocol.md, "Validation at the broker", 3).
func TestHostileRev8WrongChallenge(t *testing.T) {
	t.Parallel()
	f := newLies(t, bps.Options{}, liveStream(t, "wrong challenge"))
	r, ack, _ := f.join(f.admin.addr) // the admin's second node, or anyone
	captured := update(t, f.admin, f.sp, f.a.Challenge(), 0, "captured")
	for range 64 {
		r.send(captured)
	}
	f.broker.rec.waitN(t, 64, "64 dropped", dropped(bps.CounterWrongChallenge))
	f.honest()
	// Still pending, still served: its AUTH claims.
	r.send(auth(t, f.admin, f.sp, ack.Challenge))
	f.broker.rec.waitN(t, 2, "the claim after 64 foreign frames", kind(bps.EventClaim))
	r.send(captured) // the 65th
	expectReset(t, r)
	f.unpunished()
	f.counted(map[bps.Counter]uint64{bps.CounterWrongChallenge: 65})
	f.honest()
}

// TestHostileRev8OtherCohortChunk: a chunk the admin signed for another
// cohort (the same admin, another topic) presented on a stream of this one
// — as it was, or with this stream's challenge put in — never moves this
// cohort's cursor (issue 23's first hole: rev 3's claim did not cover the
// cohort). As it was it is under another challenge (wrong_challenge); with
// ours, the topic is in the id's preimage: invalid_soc, a violation.
func TestHostileRev8OtherCohortChunk(t *testing.T) {
	t.Parallel()
	f := newLies(t, bps.Options{}, liveStream(t, "this cohort"))
	other := feedSpec(t, "another cohort", f.admin)
	elsewhere := openRaw(t, f.peer(), f.broker)
	oack := elsewhere.join(&pb.Join{Cohort: other.PB(), Addr: f.admin.addr})
	far := update(t, f.admin, other, oack.Challenge, 1000, "for the other cohort")

	r, ack, n := f.join(f.admin.addr)
	r.send(far)
	f.broker.rec.wait(t, "as it was", dropped(bps.CounterWrongChallenge))
	far.Challenge = ack.Challenge
	r.send(far)
	f.violated(r, n)
	f.counted(map[bps.Counter]uint64{bps.CounterWrongChallenge: 1, bps.CounterInvalidSOC: 1})
	if c := cohortInfo(t, f.broker, f.sp); c.Cursor != f.next {
		t.Fatalf("cursor %d, want %d", c.Cursor, f.next)
	}
	f.honest() // index 1: had the chunk moved the cursor to 1001, this would be a retransmit
}

// TestHostileRev8OldSessionAfterReclaim: a cohort forgotten when its last
// stream left is made again, its cursors at 0; an update of the earlier
// session replayed to the new one would pass for new. Under its own
// challenge it is dropped (wrong_challenge); with the new stream's
// challenge put in, it is not the chunk its id says: invalid_soc, a
// violation. The admin's next update (its feed index never reused across
// sessions) is delivered.
func TestHostileRev8OldSessionAfterReclaim(t *testing.T) {
	t.Parallel()
	net, broker, cl := cluster(t, bps.Options{}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "an earlier session", admin)
	sub := subscribe(t, cl[0], broker, sp)
	a := publish(t, cl[1], broker, sp, admin, 0)
	var old []*pb.Broadcast
	for i := range uint64(3) {
		old = append(old, update(t, admin, sp, a.Challenge(), i, fmt.Sprint("session one, ", i)))
		send(t, a, old[i])
		recv(t, sub)
	}
	_ = sub.Close()
	_ = a.Close()
	broker.rec.waitN(t, 2, "both streams left", kind(bps.EventLeave))
	if n := len(broker.svc.Cohorts()); n != 0 {
		t.Fatalf("%d cohorts after the last stream left", n)
	}

	f := &lies{t: t, net: net, broker: broker, admin: admin, sp: sp, next: 3}
	f.sub = subscribe(t, cl[2], broker, sp) // a fresh node: its cursors know nothing
	f.a = publish(t, cl[1], broker, sp, admin, 0)
	broker.rec.waitN(t, 2, "the admin's second session", kind(bps.EventClaim))
	r, ack, n := f.join(admin.addr)
	r.send(old[0])
	broker.rec.wait(t, "under its own challenge", dropped(bps.CounterWrongChallenge))
	old[0].Challenge = ack.Challenge
	r.send(old[0])
	f.violated(r, n)
	f.counted(map[bps.Counter]uint64{bps.CounterWrongChallenge: 1, bps.CounterInvalidSOC: 1})
	f.honest()
}

// TestHostileRev8KindNotItsOwn: ROSTER and EOS are the admin's stream's
// only: from a rostered publisher's stream, claimed or pending, or from a
// publisher stream under ALL, each is wrong_stream, a violation, checked
// before the challenge or the signature (docs/protocol.md, "Validation at
// the broker", 2). The roster stays; the cohort does not end.
func TestHostileRev8KindNotItsOwn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		all     bool
		claimed bool
		kind    pb.Kind
	}{
		{"roster from a publisher stream", false, true, pb.Kind_ROSTER},
		{"eos from a publisher stream", false, true, pb.Kind_EOS},
		{"roster from a pending stream", false, false, pb.Kind_ROSTER},
		{"eos from a pending stream", false, false, pb.Kind_EOS},
		{"roster under ALL", true, true, pb.Kind_ROSTER},
		{"eos under ALL", true, true, pb.Kind_EOS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec := liveStream(t, tc.name)
			if tc.all {
				spec = func(admin key) *bps.Spec { return mnemonicAll(t, tc.name, admin) }
			}
			f := newLies(t, bps.Options{}, spec)
			bob := newKey(t)
			if !tc.all {
				f.grant(bob)
			}
			r, ack, n := f.join(bob.addr)
			if tc.claimed && !tc.all {
				r.send(auth(t, bob, f.sp, ack.Challenge))
				f.broker.rec.waitN(t, 2, "bob's claim", kind(bps.EventClaim))
			}
			r.send(chunk(t, bob, f.sp, tc.kind, ack.Challenge, 1, nil))
			f.violated(r, n)
			f.counted(map[bps.Counter]uint64{bps.CounterWrongStream: 1})
			if c := cohortInfo(t, f.broker, f.sp); c.Ended || c.ServiceNext != f.roster {
				t.Fatalf("ended %v, roster cursor %d", c.Ended, c.ServiceNext)
			}
			f.honest()
		})
	}
}

// TestHostileRev8AuthWithPayload: an AUTH is the empty chunk (span 0, no
// payload): one that carries a payload, even signed by the stream's own
// address under its own challenge, is invalid_soc, a violation — on a
// pending stream (it claims nothing) and on a publisher stream (it is no
// heartbeat).
func TestHostileRev8AuthWithPayload(t *testing.T) {
	t.Parallel()
	for _, claimed := range []bool{false, true} {
		t.Run(fmt.Sprintf("claimed=%v", claimed), func(t *testing.T) {
			t.Parallel()
			f := newLies(t, bps.Options{}, liveStream(t, "auth with a payload"))
			bob := newKey(t)
			f.grant(bob)
			r, ack, n := f.join(bob.addr)
			claims := 1
			if claimed {
				r.send(auth(t, bob, f.sp, ack.Challenge))
				claims++
				f.broker.rec.waitN(t, claims, "bob's claim", kind(bps.EventClaim))
			}
			data, _, err := bps.SignSOC(bob.signer, bob.addr, bps.SessionID(pb.Kind_AUTH, f.sp.Topic, ack.Challenge, 0), []byte("not empty"))
			if err != nil {
				t.Fatal(err)
			}
			r.send(&pb.Broadcast{Soc: data, Kind: pb.Kind_AUTH, Challenge: ack.Challenge})
			f.violated(r, n)
			f.counted(map[bps.Counter]uint64{bps.CounterInvalidSOC: 1})
			if got := f.broker.rec.count(kind(bps.EventClaim)); got != claims {
				t.Fatalf("%d claims, want %d", got, claims)
			}
			f.honest()
		})
	}
}

// TestHostileRev8BelowCursorPending: a DATA below its owner's cursor on a
// pending stream — a returning admin that does not know the cursor — is
// validated first, upgrades the stream, and is then counted a retransmit
// and not delivered (Rev 8's order); the stream then publishes. The same
// frame not valid at the declared address is a violation: on a pending
// stream the signature comes before the cursor.
func TestHostileRev8BelowCursorPending(t *testing.T) {
	t.Parallel()
	f := newLies(t, bps.Options{}, liveStream(t, "below the cursor"))
	f.honest()
	f.honest() // the cursor is at 3

	r, ack, _ := f.join(f.admin.addr)
	r.send(update(t, f.admin, f.sp, ack.Challenge, 1, "an old one, re-signed"))
	f.broker.rec.waitN(t, 2, "the returning admin's claim", kind(bps.EventClaim))
	f.broker.rec.wait(t, "counted", dropped(bps.CounterRetransmit))
	r.send(update(t, f.admin, f.sp, ack.Challenge, f.next, "from the returning stream"))
	if d := recv(t, f.sub); d.Index != f.next || string(d.Payload()) != "from the returning stream" {
		t.Fatalf("delivered %d %q", d.Index, d.Payload())
	}
	f.next++

	liar, lack, n := f.join(f.admin.addr)
	liar.send(update(t, newKey(t), f.sp, lack.Challenge, 1, "not the admin's"))
	f.violated(liar, n)
	f.counted(map[bps.Counter]uint64{bps.CounterRetransmit: 1, bps.CounterInvalidSOC: 1})
	if got := f.broker.rec.count(kind(bps.EventClaim)); got != 2 {
		t.Fatalf("%d claims, want 2", got)
	}
	f.honest()
}

// TestHostileRev8SpectatorFrame: a spectator — a made-up address in an open
// cohort, or a listener declaring the zero address — may send nothing:
// any frame, even a valid chunk of its own or an AUTH, is wrong_stream, a
// violation, checked before anything else.
func TestHostileRev8SpectatorFrame(t *testing.T) {
	t.Parallel()
	f := newLies(t, bps.Options{}, liveStream(t, "spectators"))
	stranger := newKey(t)
	for i, tc := range []struct {
		addr  []byte
		frame func(ch []byte) *pb.Broadcast
	}{
		{stranger.addr, func(ch []byte) *pb.Broadcast { return update(t, stranger, f.sp, ch, 0, "mine") }},
		{stranger.addr, func(ch []byte) *pb.Broadcast { return auth(t, stranger, f.sp, ch) }},
		{bps.ZeroAddress, func(ch []byte) *pb.Broadcast { return update(t, f.admin, f.sp, f.a.Challenge(), 0, "a replay") }},
		{bps.ZeroAddress, func(ch []byte) *pb.Broadcast { return &pb.Broadcast{Kind: pb.Kind(9)} }},
	} {
		r, ack, n := f.join(tc.addr)
		r.send(tc.frame(ack.Challenge))
		f.violated(r, n)
		f.counted(map[bps.Counter]uint64{bps.CounterWrongStream: uint64(i + 1)})
		f.honest()
	}
}

// TestHostileRev8RevokedGrace: a publisher a roster revoked is told that
// roster first; its frames are dropped and tolerated, counted revoked, for
// RevocationGrace (5 s, rev 14's value) after the roster was written to its
// stream; the first frame past the grace is a violation (wrong_stream).
// Runs on synctest's fake clock.
func TestHostileRev8RevokedGrace(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		f := newLies(t, bps.Options{}, liveStream(t, "revoked"))
		bob := newKey(t)
		f.grant(bob)
		bnode := f.peer()
		b := publishOpts(t, bnode, f.broker, f.sp, bob, true)
		f.broker.rec.waitN(t, 2, "bob's claim", kind(bps.EventClaim))
		recvC(t, b.C(), "bob's first delivery") // the roster naming him
		send(t, b, update(t, bob, f.sp, b.Challenge(), 0, "bob, granted"))
		if d := recvData(t, f.sub); d.Index != 0 || string(d.Payload()) != "bob, granted" {
			t.Fatalf("delivered %d %q", d.Index, d.Payload())
		}

		f.grant() // revokes bob
		if d := recvC(t, b.C(), "the revoking roster"); !isRoster(d, 1) {
			t.Fatalf("bob got %s %d", d.Kind, d.Index)
		}
		send(t, b, update(t, bob, f.sp, b.Challenge(), 1, "at once"))
		f.broker.rec.waitN(t, 1, "tolerated", dropped(bps.CounterRevoked))
		time.Sleep(bps.DefaultRevocationGrace - time.Millisecond)
		send(t, b, update(t, bob, f.sp, b.Challenge(), 2, "just within the grace"))
		f.broker.rec.waitN(t, 2, "tolerated", dropped(bps.CounterRevoked))
		f.unpunished()
		time.Sleep(time.Millisecond)
		send(t, b, update(t, bob, f.sp, b.Challenge(), 3, "past the grace"))
		<-b.Done()
		waitBlocklisted(t, f.broker, bnode)
		f.counted(map[bps.Counter]uint64{bps.CounterRevoked: 2, bps.CounterWrongStream: 1})
		f.honest()
	})
}

// TestHostileRev8UnsetKind: KIND_UNSPECIFIED, the proto3 zero, is a
// malformed frame: a violation, counted unknown_kind — unlike a defined
// kind above EOS, which is what a later SWIP's kind looks like here:
// dropped and counted, the stream kept (it still claims).
func TestHostileRev8UnsetKind(t *testing.T) {
	t.Parallel()
	f := newLies(t, bps.Options{}, liveStream(t, "unset kind"))
	r, ack, n := f.join(f.admin.addr)
	later := auth(t, f.admin, f.sp, ack.Challenge)
	later.Kind = pb.Kind(5)
	r.send(later)
	f.broker.rec.wait(t, "a later kind dropped", dropped(bps.CounterUnknownKind))
	r.send(auth(t, f.admin, f.sp, ack.Challenge))
	f.broker.rec.waitN(t, 2, "the claim after it", kind(bps.EventClaim))
	unset := update(t, f.admin, f.sp, ack.Challenge, f.next, "no kind")
	unset.Kind = pb.Kind_KIND_UNSPECIFIED
	r.send(unset)
	f.violated(r, n)
	f.counted(map[bps.Counter]uint64{bps.CounterUnknownKind: 2})
	f.honest()
}

// TestHostileRev8LastIndex: index 2⁶⁴−1 would wrap the cursor: invalid_soc,
// a violation, even from a publisher stream whose chunk is otherwise valid
// (docs/protocol.md: decided with upstream's form B); the cursor does not
// move.
func TestHostileRev8LastIndex(t *testing.T) {
	t.Parallel()
	f := newLies(t, bps.Options{}, liveStream(t, "the last index"))
	bob := newKey(t)
	f.grant(bob)
	r, ack, n := f.join(bob.addr)
	r.send(auth(t, bob, f.sp, ack.Challenge))
	f.broker.rec.waitN(t, 2, "bob's claim", kind(bps.EventClaim))
	r.send(update(t, bob, f.sp, ack.Challenge, math.MaxUint64, "the end of the feed"))
	f.violated(r, n)
	f.counted(map[bps.Counter]uint64{bps.CounterInvalidSOC: 1})
	if c := cohortInfo(t, f.broker, f.sp); len(c.Cursors) != 1 {
		t.Fatalf("cursors %v: want the admin's only", c.Cursors)
	}
	f.honest()
}

// TestHostileRev8OnePeerFillsCohort: one peer connection declaring made-up
// addresses (issue 23's second hole: rev 3 bounded only the streams that
// declared none) holds MaxPeerStreams seats of an open cohort, not all of
// them: every further Join of it is FULL, without penalty, and honest
// joiners take the rest.
func TestHostileRev8OnePeerFillsCohort(t *testing.T) {
	t.Parallel()
	const seats = 8
	f := newLies(t, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: seats}}, liveStream(t, "one peer"))
	squatter := f.peer()
	held := 0
	for range seats {
		ack := openRaw(t, squatter, f.broker).join(&pb.Join{Cohort: f.sp.PB(), Addr: newKey(t).addr})
		if ack.Status == pb.Status_OK {
			held++
		}
	}
	if held != bps.MaxPeerStreams {
		t.Fatalf("one peer holds %d seats, want %d", held, bps.MaxPeerStreams)
	}
	subs := []*bps.Subscription{f.sub}
	for range seats - 1 - held { // the fixture's subscriber holds one
		subs = append(subs, subscribe(t, f.peer(), f.broker, f.sp))
	}
	f.unpunished()
	send(t, f.a, update(t, f.admin, f.sp, f.a.Challenge(), f.next, "to everyone"))
	for i, s := range subs {
		if d := recv(t, s); d.Index != f.next {
			t.Fatalf("subscriber %d got %d", i, d.Index)
		}
	}
	f.counted(nil)
}
