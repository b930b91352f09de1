// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/gorilla/websocket"
)

// The five configurations of SWIP-60, each round-tripped through the bridge
// (SWIP-60 conformance item 5): sessions on two client nodes, one broker,
// every message and claim signed by the test's "dApp".

// TestSWIP60Jam: a closed cohort over ANCHOR with explicit authorship. The
// admin grants a seat with a roster its dApp signs under its stream's
// challenge, posted through the bridge; the seat on another node is told
// the roster naming it (its stream's first delivery: the cue), claims with
// an AUTH and talks with the admin. A third seat on the admin's node, not
// yet rostered, waits and receives nothing; when the admin grants it, the
// roster reaches it (a service frame), its dApp sends its AUTH on the
// stream it holds, and it joins the talk.
func TestSWIP60Jam(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	alice, bob, carol := newKey(t), newKey(t), newKey(t)
	topic := keccak([]byte("jam-tuesday"))
	q := spec(c.broker.addr, "anchor", &alice, "closed", "true")
	broker := c.broker.Overlay()

	sa := dial(t, a, "jam-tuesday", as(q, alice), nil)
	claim(t, sa, alice.signer, broker, 0)
	if r := sa.control("ready"); r["role"] != "publisher" || r["binding"] != "anchor" || r["index"] != nil || r["seq"] != float64(1) {
		t.Fatalf("ready %v", r)
	}
	relay(t, a, "jam-tuesday", q, sa.serviceBody(pb.Kind_ROSTER, 0, bob), 0)
	sa.service("ROSTER", 0, bob)

	sb := dial(t, b, "jam-tuesday", as(q, bob), nil)
	sb.takeChallenge(bob)
	sb.awaitControl("service")
	sb.auth()
	sb.awaitControl("ready")

	sc := dial(t, a, "jam-tuesday", as(q, carol), nil)
	sc.takeChallenge(carol)
	if w := sc.control("waiting"); !strings.Contains(w["reason"].(string), "not in the roster") || w["addr"] != hex.EncodeToString(carol.addr) {
		t.Fatalf("waiting %v", w)
	}

	sb.data(1, "bob plays")
	sa.payload("bob plays")
	sa.data(1, "alice plays")
	sb.payload("alice plays")

	// The grant: carol's session is told the roster naming her, and her
	// dApp claims on the stream she holds. She heard nothing of the talk.
	relay(t, a, "jam-tuesday", q, sa.serviceBody(pb.Kind_ROSTER, 1, bob, carol), 1)
	sa.service("ROSTER", 1, bob, carol)
	sb.service("ROSTER", 1, bob, carol)
	sc.service("ROSTER", 1, bob, carol)
	sc.auth()
	sc.awaitControl("ready")
	sc.data(1, "carol plays")
	sa.payload("carol plays")
	sb.payload("carol plays")
	sb.data(2, "bob again")
	sa.payload("bob again")
	sc.payload("bob again")

	ci := cohortBy(t, c.broker, topic, alice.addr)
	if ci.Publishers != 3 || ci.Subscribers != 0 || len(ci.Roster) != 2 || ci.ServiceNext != 2 || ci.Counters["claim_timeout"] != 0 {
		t.Fatalf("cohort at the broker: %+v", ci)
	}
	e := topicEntry(t, b, topic, "publisher")
	if e["taken"] != true || e["serviceNext"] != float64(2) || len(e["roster"].([]any)) != 2 || e["ended"] != false {
		t.Fatalf("B's entry %v", e)
	}
	notBlocklisted(t, c.broker, a)
	notBlocklisted(t, c.broker, b)
}

// topicID is a SOC id a dApp picks for its message: any 32 bytes.
func topicID(who string, n int) []byte { return keccak([]byte(fmt.Sprint(who, n))) }

// TestSWIP60ClosedIntruders: nobody attends a closed cohort but its
// publishers. A session without addr is refused up front (its stream would
// be silent, then cut off at the claim deadline as a violation). A session
// whose address is not in the roster waits, hears nothing of the cohort,
// and the node closes its silent stream before the broker's claim
// deadline: the node is not blocklisted.
func TestSWIP60ClosedIntruders(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{SilentWait: 500 * time.Millisecond})
	a, b := c.clients[0], c.clients[1]
	alice, bob, dave := newKey(t), newKey(t), newKey(t)
	topic := keccak([]byte("private-jam"))
	q := spec(c.broker.addr, "anchor", &alice, "closed", "true")
	broker := c.broker.Overlay()

	_, resp, err := websocket.DefaultDialer.Dial(wsURL(b, "private-jam", q), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a spectator of a closed cohort: %v %v, want 400", err, resp)
	}
	_ = resp.Body.Close()

	sa := dial(t, a, "private-jam", as(q, alice), nil)
	claim(t, sa, alice.signer, broker, 0)
	sa.control("ready")
	relay(t, a, "private-jam", q, sa.serviceBody(pb.Kind_ROSTER, 0, bob), 0)
	sa.service("ROSTER", 0, bob)
	sb := dial(t, b, "private-jam", as(q, bob), nil)
	sb.takeChallenge(bob)
	sb.awaitControl("service")
	sb.auth()
	sb.awaitControl("ready")

	sd := dial(t, b, "private-jam", as(q, dave), nil)
	sd.takeChallenge(dave)
	sd.control("waiting")
	sa.data(1, "for the seats only")
	sb.payload("for the seats only")
	// Dave's next frame is the end of his wait, not the message.
	if e := sd.control("error"); !strings.Contains(e["reason"].(string), "no roster named") {
		t.Fatalf("error %v", e)
	}
	sd.expectClose(websocket.ClosePolicyViolation, "closed cohort")

	notBlocklisted(t, c.broker, b)
	if ci := cohortBy(t, c.broker, topic, alice.addr); ci.Counters["claim_timeout"] != 0 || ci.Publishers != 2 {
		t.Fatalf("cohort at the broker: %+v", ci)
	}
	// B still publishes in the cohort: its seat was not punished for dave.
	sb.data(1, "still here")
	sa.payload("still here")
}

// TestSWIP60SpectatorJam: FEED_TOPIC with an admin, before an audience. A
// grantee's session holds a spectator stream while the roster does not name
// it (waiting), receiving the cohort; it is told of its grant (a service
// frame), its dApp claims with an AUTH on that stream, and publishes on its
// own feed; the audience receives both publishers, and each publisher the
// other. Revocation after the announcement: the grantee's session is told
// (a service frame, then waiting) and its next frame ends it — refused by
// the node, which would otherwise be blocklisted.
func TestSWIP60SpectatorJam(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	alice, bob := newKey(t), newKey(t)
	topic := keccak([]byte("spectator-jam"))
	q := spec(c.broker.addr, "feed", &alice)
	broker := c.broker.Overlay()

	audience := dial(t, b, "spectator-jam", q, nil)
	audience.control("ready")
	sa := dial(t, a, "spectator-jam", as(q, alice), nil)
	claim(t, sa, alice.signer, broker, 0)
	sa.control("ready")
	sb := dial(t, b, "spectator-jam", as(q, bob), nil)
	sb.takeChallenge(bob)
	if w := sb.control("waiting"); !strings.Contains(w["reason"].(string), "not in the roster") {
		t.Fatalf("waiting %v", w)
	}

	sa.data(0, "alice 0")
	audience.payload("alice 0")
	sb.payload("alice 0") // a waiting session watches, on its spectator stream

	relay(t, a, "spectator-jam", q, sa.serviceBody(pb.Kind_ROSTER, 0, bob), 0)
	sa.service("ROSTER", 0, bob)
	audience.service("ROSTER", 0, bob)
	sb.service("ROSTER", 0, bob)
	sb.auth()
	if r := sb.control("ready"); r["role"] != "publisher" || r["addr"] != hex.EncodeToString(bob.addr) {
		t.Fatalf("ready %v", r)
	}

	sb.data(0, "bob 0")
	audience.payload("bob 0")
	sa.payload("bob 0")
	sa.data(1, "alice 1")
	audience.payload("alice 1")
	sb.payload("alice 1")

	if ci := cohortBy(t, c.broker, topic, alice.addr); ci.Publishers != 2 || len(ci.Roster) != 1 || ci.Cursors[hex.EncodeToString(bob.addr)] != 1 {
		t.Fatalf("cohort at the broker: %+v", ci)
	}
	// One entry for the cohort at B: the audience's subscriber stream and
	// bob's publisher stream.
	e := topicEntry(t, b, topic, "publisher")
	if e["streams"] != float64(2) || e["serviceNext"] != float64(1) || e["roster"].([]any)[0] != hex.EncodeToString(bob.addr) ||
		e["taken"] != true || e["addr"] != hex.EncodeToString(bob.addr) {
		t.Fatalf("B's entry %v", e)
	}
	if e := topicEntry(t, c.broker, topic, "broker"); e["serviceNext"] != float64(1) || len(e["roster"].([]any)) != 1 {
		t.Fatalf("broker's entry %v", e)
	}

	// Revocation, announced: the reduced roster reaches everyone.
	relay(t, a, "spectator-jam", q, sa.serviceBody(pb.Kind_ROSTER, 1), 1)
	sa.service("ROSTER", 1)
	audience.service("ROSTER", 1)
	sb.service("ROSTER", 1)
	if w := sb.control("waiting"); !strings.Contains(w["reason"].(string), "revoked") {
		t.Fatalf("waiting %v", w)
	}
	sb.data(1, "after revocation")
	if e := sb.control("error"); !strings.Contains(e["reason"].(string), "revoked") {
		t.Fatalf("error %v", e)
	}
	sb.expectClose(websocket.ClosePolicyViolation, "not a publisher now")
	notBlocklisted(t, c.broker, b)
	if ci := cohortBy(t, c.broker, topic, alice.addr); ci.Counters["wrong_owner"]+ci.Counters["revoked"] != 0 || len(ci.Roster) != 0 {
		t.Fatalf("cohort at the broker: %+v", ci)
	}
	// The audience goes on.
	sa.data(2, "alice 2")
	audience.payload("alice 2")
}

// TestSWIP60LiveStream: FEED_TOPIC with the admin alone (SWIP-74's cohort):
// the audience receives its updates in the layout each asked for, the
// streamer receives nothing (no other publisher), and EOS closes
// every session of the cohort, attributably — a viewer whose writer is
// behind first gets the frames queued before the end.
func TestSWIP60LiveStream(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	alice := newKey(t)
	topic := keccak([]byte("live"))
	q := spec(c.broker.addr, "feed", &alice)

	v1 := dial(t, b, "live", q, nil)
	v1.control("ready")
	v2 := dial(t, b, "live", q, http.Header{"Swarm-Soc-Fields": {"index,payload"}})
	v2.control("ready")
	sa := dial(t, a, "live", as(q, alice), nil)
	claim(t, sa, alice.signer, c.broker.Overlay(), 0)
	sa.control("ready")
	for i := range uint64(3) {
		payload := fmt.Sprint("frame ", i)
		sa.data(i, payload)
		v1.payload(payload)
		if got := v2.binary(); !bytes.Equal(got, append(binary.BigEndian.AppendUint64(nil, i), payload...)) {
			t.Fatalf("v2 got %x", got)
		}
	}
	if ci := cohortBy(t, c.broker, topic, alice.addr); ci.Cursor != 3 || ci.Subscribers != 1 || ci.Publishers != 1 {
		t.Fatalf("cohort at the broker: %+v", ci)
	}

	// v2's writer stalls on the next frame; the one after waits in its
	// queue when the end comes.
	gate := b.ln.conn(t, v2.ws)
	gate.hold()
	sa.data(3, "frame 3")
	sa.data(4, "the last frame")
	v1.payload("frame 3")
	v1.payload("the last frame")
	relay(t, a, "live", q, sa.serviceBody(pb.Kind_EOS, 0), 0)
	v1.service("EOS", 0)
	v1.expectClose(websocket.CloseNormalClosure, "end of stream: the admin ended the cohort")
	// The streamer's next frame is the end: it received nothing before.
	sa.service("EOS", 0)
	sa.expectClose(websocket.CloseNormalClosure, "end of stream: the admin ended the cohort")

	gate.release()
	for i, payload := range []string{"frame 3", "the last frame"} {
		if got := v2.binary(); !bytes.Equal(got, append(binary.BigEndian.AppendUint64(nil, uint64(3+i)), payload...)) {
			t.Fatalf("v2 got %q, want %q", got, payload)
		}
	}
	v2.service("EOS", 0)
	v2.expectClose(websocket.CloseNormalClosure, "end of stream: the admin ended the cohort")
}

// TestSWIP60GroupChat: MNEMONIC with an admin and publishers=all. Three
// members on two nodes declare their addresses (no claim: each is handed
// its stream's challenge, then ready) and each hears the two others, never
// itself; every frame is a session-feed chunk under its stream's challenge.
// The admin ends the chat.
func TestSWIP60GroupChat(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	alice, bob, carol := newKey(t), newKey(t), newKey(t)
	topic := keccak([]byte("chat"))
	q := spec(c.broker.addr, "mnemonic", &alice, "publishers", "all")

	listener := dial(t, b, "chat", q, http.Header{"Swarm-Soc-Fields": {"address,payload"}})
	listener.control("ready")
	members := []struct {
		k key
		n *tnode
		s *client
	}{{k: alice, n: a}, {k: carol, n: a}, {k: bob, n: b}}
	for i := range members {
		m := &members[i]
		m.s = dial(t, m.n, "chat", as(q, m.k), nil)
		m.s.takeChallenge(m.k)
		if r := m.s.control("ready"); r["role"] != "publisher" || r["binding"] != "mnemonic" || r["challenge"] != hex.EncodeToString(m.s.challenge) {
			t.Fatalf("ready %v", r)
		}
	}
	for i, m := range members {
		say := fmt.Sprint("hello from ", i)
		data := m.s.chunk(pb.Kind_DATA, uint64(i), []byte(say))
		m.s.send(websocket.BinaryMessage, inFrame(pb.Kind_DATA, uint64(i), data))
		for j, o := range members {
			if j != i {
				o.s.payload(say)
			}
		}
		// The listener attributes it: the SOC address is keccak256(id ‖ owner).
		addr, _ := soc.CreateAddress(data[:32], m.k.addr)
		if got := listener.binary(); !bytes.Equal(got, append(addr.Bytes(), say...)) {
			t.Fatalf("listener got %x", got)
		}
	}
	// Speaking as someone else is refused by the node; the broker never
	// sees it.
	members[2].s.k = &alice
	members[2].s.data(7, "not bob")
	members[2].s.control("error")
	members[2].s.expectClose(websocket.CloseInvalidFramePayloadData, "invalid frame")
	if ci := cohortBy(t, c.broker, topic, alice.addr); ci.Counters["wrong_owner"] != 0 || ci.Accepted != 3 {
		t.Fatalf("cohort at the broker: %+v", ci)
	}

	relay(t, a, "chat", q, members[0].s.serviceBody(pb.Kind_EOS, 0), 0)
	for _, s := range []*client{members[0].s, members[1].s, listener} {
		s.service("EOS", 0)
		s.expectClose(websocket.CloseNormalClosure, "end of stream")
	}
}

// TestSWIP60Implicit: no admin, over MNEMONIC: anyone attached publishes as
// the address it declares, frames carry their own ids (no challenge frame:
// no session feed); a listener attributes
// every message, and each publisher hears the other. There is no service
// feed.
func TestSWIP60Implicit(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	alice, bob := newKey(t), newKey(t)
	q := spec(c.broker.addr, "mnemonic", nil)

	listener := dial(t, b, "troll-box", q, http.Header{"Swarm-Soc-Fields": {"identifier,recoveredPubKey,payload"}})
	listener.control("ready")
	sa := dial(t, a, "troll-box", as(q, alice), nil)
	sa.control("ready")
	sb := dial(t, b, "troll-box", as(q, bob), nil)
	sb.control("ready")

	for _, m := range []struct {
		k        key
		from, to *client
		say      string
	}{{alice, sa, sb, "first"}, {bob, sb, sa, "second"}} {
		id := topicID(m.say, 0)
		m.from.send(websocket.BinaryMessage, inFrame(pb.Kind_DATA, 0, socData(t, m.k, id, m.say)))
		m.to.payload(m.say)
		pk, err := m.k.signer.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		if got := listener.binary(); !bytes.Equal(got, append(append(bytes.Clone(id), crypto.EncodeSecp256k1PublicKey(pk)...), m.say...)) {
			t.Fatalf("listener got %x", got)
		}
	}
	if code, out := postService(t, a, "troll-box", q, nil); code != http.StatusBadRequest {
		t.Fatalf("POST service without an admin: %d %v", code, out)
	}
	if e := topicEntry(t, b, keccak([]byte("troll-box")), "publisher"); e["roster"] != nil || e["serviceNext"] != nil {
		t.Fatalf("an implicit cohort has no service feed: %v", e)
	}
}

// implicitOwner is a fixed identity with ids mined for it (as
// TestMinedIDs checks): under implicit SOC_ID and OWNER an owner must mine
// its SOC address into the topic's neighbourhood (PO ≥ bps.PoMin).
var implicitOwner = struct {
	seed, socID, micID string // micID: under topic keccak256(owner)
}{
	seed:  "b1ce176e8a8ccf3ae355cec7ae8026dc43a5201de4d6b866b2124000be79e88e",
	socID: "0000000000000000000000000000000000000000000000000000000000013a51",
	micID: "0000000000000000000000000000000000000000000000000000000000011901",
}

func fixedKey(t *testing.T, seed string) key {
	t.Helper()
	b, _ := hex.DecodeString(seed)
	pk, err := crypto.DecodeSecp256k1PrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(pk)
	a, err := signer.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	return key{signer: signer, addr: a.Bytes()}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// TestMinedIDs: the ids of implicitOwner are mined as the bindings require.
func TestMinedIDs(t *testing.T) {
	t.Parallel()
	owner := fixedKey(t, implicitOwner.seed)
	for _, tc := range []struct {
		id, anchor []byte
	}{
		{mustHex(implicitOwner.socID), mustHex(implicitOwner.socID)},
		{mustHex(implicitOwner.micID), keccak(owner.addr)},
	} {
		a, err := soc.CreateAddress(tc.id, owner.addr)
		if err != nil {
			t.Fatal(err)
		}
		if po := swarm.Proximity(a.Bytes(), tc.anchor); po < bps.PoMin {
			t.Fatalf("id %x: PO %d < %d", tc.id, po, bps.PoMin)
		}
	}
}

// TestSWIP60ImplicitBindings: the frame layout of each implicit binding,
// published through the bridge and received by a listener on another node:
// soc_id (the id is the topic: signature ‖ span ‖ payload), owner (a live
// MIC: each frame carries its id), feed (index-prefixed, as SWIP-65's bare
// index). A frame that does not fit the binding's shape closes the session
// before it reaches the broker.
func TestSWIP60ImplicitBindings(t *testing.T) {
	t.Parallel()
	owner := fixedKey(t, implicitOwner.seed)
	socID, micID := mustHex(implicitOwner.socID), mustHex(implicitOwner.micID)
	ownerTopic := keccak(owner.addr)
	feedTopic := keccak([]byte("following"))

	other := newKey(t)
	for _, tc := range []struct {
		name, binding string
		topic         []byte
		id            []byte // the signed id, as identifier shows it
		frame         []byte // a good frame, carrying "payload"
		bad           []byte // a frame the binding refuses
	}{
		{"soc_id", "soc_id", socID, socID, inFrame(pb.Kind_DATA, 0, socData(t, owner, socID, "payload")), inFrame(pb.Kind_DATA, 0, socData(t, other, socID, "not mined"))},
		{"socid", "SOCID", socID, socID, inFrame(pb.Kind_DATA, 0, socData(t, owner, socID, "payload")), nil},
		{"owner", "owner", ownerTopic, micID, inFrame(pb.Kind_DATA, 0, socData(t, owner, micID, "payload")), inFrame(pb.Kind_DATA, 0, socData(t, owner, topicID("unmined", 0), "too far"))},
		{"feed", "feed", feedTopic, bps.FeedID(feedTopic, 7), feedFrame(t, owner, feedTopic, 7, "payload"), feedFrame(t, other, feedTopic, 8, "not mine")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t, 2, api.Options{})
			topic := hex.EncodeToString(tc.topic)
			q := spec(c.broker.addr, tc.binding, nil)
			listener := dial(t, c.clients[1], topic, q, http.Header{"Swarm-Soc-Fields": {"identifier,payload"}})
			if r := listener.control("ready"); r["role"] != "subscriber" {
				t.Fatalf("ready %v", r)
			}
			pub := dial(t, c.clients[0], topic, as(q, owner), nil)
			pub.control("ready")
			pub.send(websocket.BinaryMessage, tc.frame)
			if got := listener.binary(); !bytes.Equal(got, append(bytes.Clone(tc.id), "payload"...)) {
				t.Fatalf("listener got %x", got)
			}
			if tc.bad == nil {
				return
			}
			pub.send(websocket.BinaryMessage, tc.bad)
			pub.control("error")
			pub.expectClose(websocket.CloseInvalidFramePayloadData, "invalid frame")
			if ci := cohortBy(t, c.broker, tc.topic, nil); ci.Accepted != 1 || ci.Counters["wrong_owner"]+ci.Counters["invalid_soc"] != 0 {
				t.Fatalf("cohort at the broker: %+v", ci)
			}
		})
	}
}

// TestSWIP60ServiceHostile: the service endpoint refuses what the broker
// would, and what would mislead the node: no admin stream with the
// challenge the chunk was signed under (409), a chunk not the admin's, of
// another topic or tampered (400: it does not validate), a replayed older
// roster (409: the node holds a newer one). A squatted spec — the topic
// under a wrong admin — is a cohort of its own: its roster and its messages
// never reach the genuine sessions.
func TestSWIP60ServiceHostile(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	alice, bob, mallory := newKey(t), newKey(t), newKey(t)
	topic := keccak([]byte("hostile"))
	q := spec(c.broker.addr, "feed", &alice)
	broker := c.broker.Overlay()

	// The admin's dApp signed for a stream that is gone (or never was).
	gone := &client{t: t, k: &alice, topic: topic, challenge: bytes.Repeat([]byte{1}, 32)}
	if code, out := postService(t, a, "hostile", q, gone.serviceBody(pb.Kind_ROSTER, 0)); code != http.StatusConflict || !strings.Contains(out["message"].(string), "no admin stream with this challenge") {
		t.Fatalf("no admin stream: %d %v", code, out)
	}
	audience := dial(t, b, "hostile", q, nil)
	audience.control("ready")
	sa := dial(t, a, "hostile", as(q, alice), nil)
	claim(t, sa, alice.signer, broker, 0)
	sa.control("ready")
	if code, out := postService(t, a, "hostile", q, gone.serviceBody(pb.Kind_ROSTER, 0)); code != http.StatusConflict || !strings.Contains(out["message"].(string), "no admin stream with this challenge") {
		t.Fatalf("another challenge: %d %v", code, out)
	}

	roster0 := sa.serviceBody(pb.Kind_ROSTER, 0)
	relay(t, a, "hostile", q, roster0, 0)
	sa.service("ROSTER", 0)
	audience.service("ROSTER", 0)
	relay(t, a, "hostile", q, sa.serviceBody(pb.Kind_ROSTER, 1, bob), 1)
	sa.service("ROSTER", 1, bob)
	audience.service("ROSTER", 1, bob)

	forger := &client{t: t, k: &mallory, topic: topic, challenge: sa.challenge}
	elsewhere := &client{t: t, k: &alice, topic: keccak([]byte("elsewhere")), challenge: sa.challenge}
	var tampered map[string]any
	_ = json.Unmarshal(sa.serviceBody(pb.Kind_ROSTER, 2), &tampered)
	socHex := tampered["soc"].(string)
	tampered["soc"] = socHex[:len(socHex)-1] + string("01"[(socHex[len(socHex)-1]-'0'+1)%2])
	tamperedBody, _ := json.Marshal(tampered)
	for _, tc := range []struct {
		name string
		body []byte
		q    url.Values
		code int
		msg  string
	}{
		{"forged", forger.serviceBody(pb.Kind_ROSTER, 2, mallory), q, http.StatusBadRequest, "not a ROSTER of the admin"},
		{"replayed", roster0, q, http.StatusConflict, "stale service index 0"},
		{"not json", []byte("id ‖ sig ‖ span ‖ payload"), q, http.StatusBadRequest, "want {"},
		{"a DATA", []byte(`{"kind":"DATA","index":0,"challenge":"` + hex.EncodeToString(sa.challenge) + `","soc":"00"}`), q, http.StatusBadRequest, "want ROSTER or EOS"},
		{"other topic", elsewhere.serviceBody(pb.Kind_ROSTER, 2), q, http.StatusBadRequest, "not a ROSTER of the admin"},
		{"tampered", tamperedBody, q, http.StatusBadRequest, ""},
		{"no admin", roster0, spec(c.broker.addr, "feed", nil), http.StatusBadRequest, ""},
		{"history", roster0, spec(c.broker.addr, "anchor", &alice, "history", "true"), http.StatusBadRequest, ""},
	} {
		code, out := postService(t, a, "hostile", tc.q, tc.body)
		if code != tc.code || !strings.Contains(fmt.Sprint(out), tc.msg) {
			t.Errorf("%s: %d %v, want %d %q", tc.name, code, out, tc.code, tc.msg)
		}
	}
	if ci := cohortBy(t, c.broker, topic, alice.addr); ci.ServiceNext != 2 || len(ci.Roster) != 1 || !bytes.Equal(ci.Roster[0], bob.addr) {
		t.Fatalf("cohort at the broker: next %d roster %x", ci.ServiceNext, ci.Roster)
	}

	// The squatter: the same topic under mallory's admin, on B.
	qm := spec(c.broker.addr, "feed", &mallory)
	sm := dial(t, b, "hostile", as(qm, mallory), nil)
	claim(t, sm, mallory.signer, broker, 0)
	sm.control("ready")
	squatAudience := dial(t, a, "hostile", qm, nil)
	squatAudience.control("ready")
	relay(t, b, "hostile", qm, sm.serviceBody(pb.Kind_ROSTER, 0, mallory), 0)
	sm.service("ROSTER", 0, mallory)
	squatAudience.service("ROSTER", 0, mallory)
	sm.data(0, "squatted")
	squatAudience.payload("squatted")
	// The genuine sessions' next frames are the genuine admin's.
	sa.data(0, "genuine")
	audience.payload("genuine")
	if ci := cohortBy(t, c.broker, topic, alice.addr); ci.ServiceNext != 2 || len(ci.Roster) != 1 {
		t.Fatalf("the genuine cohort changed: %+v", ci)
	}
	if e := topicEntry(t, b, topic, "subscriber"); e["admin"] != hex.EncodeToString(alice.addr) || e["roster"].([]any)[0] != hex.EncodeToString(bob.addr) {
		t.Fatalf("B's genuine entry %v", e)
	}
}
