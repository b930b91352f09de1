// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bufio"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"google.golang.org/protobuf/proto"
)

// Upstream's habits (docs/protocol.md, "Interop: where upstream's
// implementation and the texts disagree"): bee PR #5626 speaks SWIP-74
// Rev 8 on /swarm/pubsub/1.0.0/pubsub (form A) and /swarm/bps/1.0.0/bps
// (form B). Each test below plays one of its habits against our broker
// with hand-written frames, as that implementation writes them.

// upstreamIDs are the ids upstream's two forms use.
var upstreamIDs = []struct{ name, version, stream string }{
	{"pubsub", "1.0.0", "pubsub"}, // form A
	{"bps", "1.0.0", "bps"},       // form B
}

// openRawOn is a raw stream to a broker on the given protocol id.
func openRawOn(t *testing.T, from, to *tnode, name, version, stream string) *raw {
	t.Helper()
	s, err := from.NewStream(ctxT(t), to.Overlay(), nil, name, version, stream)
	if err != nil {
		t.Fatalf("open stream on /swarm/%s/%s/%s: %v", name, version, stream, err)
	}
	t.Cleanup(func() { _ = s.Reset() })
	return &raw{t: t, s: s, r: bufio.NewReader(s)}
}

// TestUpstreamServedOnItsIDs: our broker serves upstream's two ids with the
// one handler: an upstream publisher joins on its id, claims with an AUTH
// at index 0 (form B's only claim), and its DATA reaches our subscriber;
// an upstream subscriber on the other id receives it too, as a bare
// Broadcast carrying kind, challenge and index.
func TestUpstreamServedOnItsIDs(t *testing.T) {
	t.Parallel()
	for _, id := range upstreamIDs {
		t.Run(id.name+"/"+id.stream, func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 3)
			admin := newKey(t)
			sp := feedSpec(t, "upstream "+id.stream, admin)
			sub := subscribe(t, cl[0], broker, sp)

			listener := openRawOn(t, cl[2], broker, id.name, id.version, id.stream)
			if ack := listener.join(&pb.Join{Cohort: sp.PB(), Addr: newKey(t).addr}); ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
				t.Fatalf("upstream subscriber's Ack: %v", ack)
			}
			r := openRawOn(t, cl[1], broker, id.name, id.version, id.stream)
			ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
			if ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
				t.Fatalf("upstream publisher's Ack: %v", ack)
			}
			r.send(auth(t, admin, sp, ack.Challenge))
			broker.rec.wait(t, "the AUTH claimed", kind(bps.EventClaim))
			want := update(t, admin, sp, ack.Challenge, 0, "from upstream")
			r.send(want)
			if d := recv(t, sub); d.Index != 0 || string(d.Payload()) != "from upstream" || !proto.Equal(d.Broadcast(), want) {
				t.Fatalf("our subscriber got %+v", d)
			}
			if got := listener.recvMessage(); !proto.Equal(got, want) {
				t.Fatalf("upstream subscriber got %v, want %v", got, want)
			}
		})
	}
}

// TestUpstreamAuthHeartbeat: form B re-sends its AUTH on a publisher
// stream as a heartbeat. A byte-identical repeat is taken as activity
// without a signature check, delivered to nobody, and never a violation;
// an AUTH at another index (the texts: any index) claims too.
func TestUpstreamAuthHeartbeat(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "heartbeat", admin)
	sub := subscribe(t, cl[0], broker, sp)
	r := openRawOn(t, cl[1], broker, "bps", "1.0.0", "bps")
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	a := auth(t, admin, sp, ack.Challenge)
	for range 5 {
		r.send(a)
	}
	r.send(chunk(t, admin, sp, pb.Kind_AUTH, ack.Challenge, 7, nil))
	r.send(update(t, admin, sp, ack.Challenge, 0, "after the heartbeats"))
	if d := recv(t, sub); string(d.Payload()) != "after the heartbeats" {
		t.Fatalf("first delivery %q: an AUTH was delivered", d.Payload())
	}
	if n := broker.rec.count(kind(bps.EventViolation)); n != 0 {
		t.Fatalf("%d violations for heartbeats", n)
	}
	if c := cohortInfo(t, broker, sp); c.Accepted != 1 {
		t.Fatalf("accepted %d, want the one update", c.Accepted)
	}
}

// TestUpstreamIndexWraps: upstream's form A accepts an update at index
// 2^64-1 (its cursor wraps to 0); ours treats it as invalid_soc, a
// violation, as form B does: the cursor never wraps.
func TestUpstreamIndexWraps(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "wrap", admin)
	subscribe(t, cl[0], broker, sp)
	r := openRawOn(t, cl[1], broker, "pubsub", "1.0.0", "pubsub")
	ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	r.send(auth(t, admin, sp, ack.Challenge))
	r.send(update(t, admin, sp, ack.Challenge, math.MaxUint64, "the last index"))
	expectReset(t, r)
	waitBlocklisted(t, broker, cl[1])
	if got := cohortInfo(t, broker, sp).Counters["invalid_soc"]; got != 1 {
		t.Fatalf("invalid_soc = %d, want 1", got)
	}
}

// upstreamBroker is a broker reachable only on upstream's later id,
// /swarm/bps/1.0.0/bps: our handler registered there alone, as a node
// running upstream's implementation answers.
func upstreamBroker(t *testing.T, net *streamtest.Network) *tnode {
	t.Helper()
	nd := net.NewNode()
	rec := newRecorder()
	svc, err := bps.New(nd, nd.Overlay(), bps.Options{Deps: bps.Deps{Tracer: rec}})
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.AddProtocol(svc.Protocols()[1]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	return &tnode{Node: nd, svc: svc, rec: rec}
}

// TestJoinFallsBackToUpstream: a node joins a broker that speaks only
// upstream's id: our id and form A's are refused by the multistream
// negotiation (no frame, no backoff), form B's is taken, and the
// subscription and a publisher work there. A spec upstream does not serve
// (ALL) is refused locally, never sent.
func TestJoinFallsBackToUpstream(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	broker := upstreamBroker(t, net)
	sub, pubNode := newNode(t, net, bps.Options{}), newNode(t, net, bps.Options{})
	for _, nd := range []*tnode{sub, pubNode} {
		if err := net.Connect(nd.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	admin := newKey(t)
	sp := feedSpec(t, "fallback", admin)
	s := subscribe(t, sub, broker, sp)
	p := publish(t, pubNode, broker, sp, admin, 0)
	sendUpdate(t, p, 0, "through upstream's id")
	if d := recv(t, s); string(d.Payload()) != "through upstream's id" {
		t.Fatalf("delivered %q", d.Payload())
	}

	all, err := bps.NewSpec(&pb.CohortSpec{Topic: topicOf("chat"), Binding: pb.TopicBinding_MNEMONIC, Admin: admin.addr, Publishers: pb.PublisherRegime_ALL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = sub.svc.Subscribe(ctxT(t), broker.Overlay(), all)
	if err == nil || errors.Is(err, bps.ErrFull) {
		t.Fatalf("a group chat at an upstream broker: %v, want a local refusal", err)
	}
	if n := broker.rec.count(kind(bps.EventJoin)); n != 2 {
		t.Fatalf("the broker answered %d Joins, want the 2 it serves: the chat was sent", n)
	}
}

// TestServedOnEveryID: an id this node does not serve is refused by the
// negotiation, before any frame: bee's IncompatibleStreamError.
func TestServedOnEveryID(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 1)
	for _, id := range bps.DefaultProtocolIDs {
		parts := strings.Split(id, "/") // "", "swarm", name, version, stream
		if len(parts) != 5 {
			t.Fatalf("id %q", id)
		}
		s, err := cl[0].NewStream(ctxT(t), broker.Overlay(), nil, parts[2], parts[3], parts[4])
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		_ = s.Reset()
	}
	var ie *p2p.IncompatibleStreamError
	if _, err := cl[0].NewStream(ctxT(t), broker.Overlay(), nil, "pubsub", "2.0.0", "stream"); !errors.As(err, &ie) {
		t.Fatalf("an id not served: %v, want IncompatibleStreamError", err)
	}
}

// TestPublisherHeartbeat: our publisher re-sends its stream's AUTH when it
// sent nothing for a third of the inactivity deadline, so that an idle
// publisher keeps its cohort: with the broker reclaiming after 250 ms and
// the publisher beating every 100 ms, the claim and four beats (past 400
// ms) reach the cohort they kept alive (were a beat not activity, the
// cohort would be reclaimed at 250 ms, the stream reset, and no later beat
// would come).
func TestPublisherHeartbeat(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	broker := newNode(t, net, bps.Options{Timing: bps.Timing{Inactivity: 250 * time.Millisecond}})
	pubNode := newNode(t, net, bps.Options{Timing: bps.Timing{Inactivity: 300 * time.Millisecond}})
	if err := net.Connect(pubNode.Node, broker.Node); err != nil {
		t.Fatal(err)
	}
	admin := newKey(t)
	sp := feedSpec(t, "heartbeat", admin)
	publish(t, pubNode, broker, sp, admin, 0)
	broker.rec.wait(t, "the claim", kind(bps.EventClaim))
	broker.rec.waitN(t, 5, "the claim and four heartbeats", kind(bps.EventActivity))
	if n := broker.rec.count(kind(bps.EventReclaim)); n != 0 {
		t.Fatalf("the cohort was reclaimed %d times under a beating publisher", n)
	}
	if got := cohortInfo(t, broker, sp).Publishers; got != 1 {
		t.Fatalf("%d publisher streams, want the one", got)
	}
}

// TestPublisherRevokedStopsBeating: a publisher whose address a roster it
// received revoked sends no heartbeat: past the revocation grace any frame
// of its stream is a violation (docs/protocol.md, "Revocation, with a
// grace"), and a beat would get its node blocklisted at the broker. Bob
// beats every 50 ms, the admin every 100 ms; once the admin has beaten
// four times after bob's revocation, bob would have beaten about eight.
func TestPublisherRevokedStopsBeating(t *testing.T) {
	t.Parallel()
	net := newNetwork(t)
	broker := newNode(t, net, bps.Options{Timing: bps.Timing{Inactivity: time.Second, RevocationGrace: time.Nanosecond, ClaimDeadline: time.Minute}})
	adminNode := newNode(t, net, bps.Options{Timing: bps.Timing{Inactivity: 300 * time.Millisecond}})
	bobNode := newNode(t, net, bps.Options{Timing: bps.Timing{Inactivity: 150 * time.Millisecond}})
	for _, n := range []*tnode{adminNode, bobNode} {
		if err := net.Connect(n.Node, broker.Node); err != nil {
			t.Fatal(err)
		}
	}
	admin, bob := newKey(t), newKey(t)
	sp := specOf(t, &pb.CohortSpec{Topic: topicOf("revoked, beating"), Binding: pb.TopicBinding_ANCHOR, Admin: admin.addr, Closed: true})
	a := publishOpts(t, adminNode, broker, sp, admin, true)
	ch := a.Challenge()
	send(t, a, rosterMsg(t, admin, sp, ch, 0, bob))
	broker.rec.wait(t, "the grant", kind(bps.EventAccept))
	b := publishOpts(t, bobNode, broker, sp, bob, true)
	recvC(t, b.C(), "bob's first delivery")
	broker.rec.waitN(t, 2, "two claims", kind(bps.EventClaim))

	send(t, a, rosterMsg(t, admin, sp, ch, 1))
	if d := recvC(t, b.C(), "bob told his revocation"); !isRoster(d, 1) {
		t.Fatalf("bob got %+v, want the revoking roster", d)
	}
	fromAdmin := func(e bps.Event) bool {
		return e.Kind == bps.EventActivity && e.Peer.Equal(adminNode.Overlay())
	}
	seen := broker.rec.count(fromAdmin)
	broker.rec.waitN(t, seen+4, "four of the admin's beats after the revocation", fromAdmin)
	if n := broker.rec.count(func(e bps.Event) bool {
		return e.Kind == bps.EventViolation && e.Peer.Equal(bobNode.Overlay())
	}); n != 0 {
		t.Fatalf("%d violations by the revoked publisher's node: it beat past the grace", n)
	}
}
