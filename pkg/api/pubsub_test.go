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
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session/mock"
	"github.com/gorilla/websocket"
)

// feedQuery is the query of a feed session on topic with admin k.
func feedQuery(peer string, k key) url.Values {
	return url.Values{"peer": {peer}, "binding": {"feed"}, "admin": {"0x" + hex.EncodeToString(k.addr)}}
}

// claim reads the challenge frame of a session publishing as signer's
// address, checks it names broker, and sends the claiming AUTH signed under
// it (SWIP-74 Rev 8): the dApp derives every id itself from the challenge
// and the topic.
func claim(t *testing.T, c *client, signer crypto.Signer, broker swarm.Address, _ uint64) {
	t.Helper()
	m := c.takeChallenge(keyOf(t, signer))
	if m["broker"] != broker.String() {
		t.Fatalf("challenge %v: want broker %s", m, broker)
	}
	c.auth()
}

// keyOf is the key of signer.
func keyOf(t *testing.T, signer crypto.Signer) key {
	t.Helper()
	a, err := signer.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	return key{signer: signer, addr: a.Bytes()}
}

// TestFeedSessions: a publisher session on A is handed its stream's
// challenge, claims with an AUTH its dApp signs under it (SWIP-74 Rev 8) and
// publishes three updates; three subscriber sessions on B share
// one subscriber stream and receive them in the field layout each asked for.
func TestFeedSessions(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	admin := newKey(t)
	topic := keccak([]byte("feed-sessions"))

	sub := dial(t, b, "feed-sessions", feedQuery(c.broker.addr, admin), nil)
	if r := sub.control("ready"); r["role"] != "subscriber" || r["topic"] != hex.EncodeToString(topic) ||
		r["binding"] != "feed" || r["broker"] != c.broker.Overlay().String() || r["fields"] != "payload" {
		t.Fatalf("ready %v", r)
	}
	sub2 := dial(t, b, "feed-sessions", feedQuery(c.broker.addr, admin), http.Header{"Swarm-Soc-Fields": {"index,payload"}})
	sub2.control("ready")
	all := "address,recoveredPubKey,identifier,signature,wrappedAddress,span,index,payload"
	sub3 := dial(t, b, hex.EncodeToString(topic), feedQuery(c.broker.Overlay().String(), admin), http.Header{"Swarm-Soc-Fields": {all}})
	if r := sub3.control("ready"); r["fields"] != all {
		t.Fatalf("ready %v", r)
	}

	q := feedQuery(c.broker.addr, admin)
	q.Set("addr", hex.EncodeToString(admin.addr))
	q.Set("index", "0")
	pub := dial(t, a, "feed-sessions", q, nil)
	claim(t, pub, admin.signer, c.broker.Overlay(), 0)
	if r := pub.control("ready"); r["role"] != "publisher" || r["addr"] != hex.EncodeToString(admin.addr) || r["index"] != float64(0) ||
		r["challenge"] != hex.EncodeToString(pub.challenge) || r["seq"] != float64(1) {
		t.Fatalf("ready %v", r)
	}

	pk, err := admin.signer.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	for i := range uint64(3) {
		payload := fmt.Sprintf("update %d", i)
		frame := pub.frame(pb.Kind_DATA, i, []byte(payload))
		pub.send(websocket.BinaryMessage, frame)

		if got := sub.binary(); string(got) != payload {
			t.Fatalf("sub got %q, want %q", got, payload)
		}
		if got := sub2.binary(); binary.BigEndian.Uint64(got[:8]) != i || string(got[8:]) != payload {
			t.Fatalf("sub2 got %x, want index %d ‖ %q", got, i, payload)
		}
		// address ‖ recoveredPubKey ‖ identifier ‖ signature ‖ wrappedAddress ‖ span ‖ index ‖ payload
		got := sub3.binary()
		// The identifier is the chunk's own: the session feed's id.
		id := bps.SessionID(pb.Kind_DATA, topic, pub.challenge, i)
		addr, _ := soc.CreateAddress(id, admin.addr)
		wrapped, _ := cac.New([]byte(payload))
		const sig = 1 + 8 + 32 // kind ‖ index ‖ id
		want := slices.Concat(addr.Bytes(), crypto.EncodeSecp256k1PublicKey(pk), id, frame[sig:sig+65],
			wrapped.Address().Bytes(), frame[sig+65:sig+73], frame[1:9], []byte(payload))
		if !bytes.Equal(got, want) {
			t.Fatalf("sub3 got\n%x\nwant\n%x", got, want)
		}
	}

	// One subscriber stream from B for three sessions; A's claimed stream.
	if ci := cohortOf(t, c.broker, topic); ci.Subscribers != 1 || ci.Publishers != 1 || ci.Cursor != 3 {
		t.Fatalf("cohort at broker: %d subscribers, %d publishers, cursor %d", ci.Subscribers, ci.Publishers, ci.Cursor)
	}
	brokerOnly := []any{c.broker.Overlay().String()}
	e := topicEntry(t, b, topic, "subscriber")
	if !reflect.DeepEqual(e["connections"], brokerOnly) || e["sessions"] != float64(3) || e["streams"] != float64(1) || e["mode"] != float64(4) || e["received"] != float64(3) {
		t.Fatalf("B's entry %v", e)
	}
	e = topicEntry(t, a, topic, "publisher")
	if !reflect.DeepEqual(e["connections"], brokerOnly) || e["sessions"] != float64(1) || e["sent"] != float64(3) || e["addr"] != hex.EncodeToString(admin.addr) {
		t.Fatalf("A's entry %v", e)
	}
	e = topicEntry(t, c.broker, topic, "broker")
	peers := []string{a.Overlay().String(), b.Overlay().String()}
	slices.Sort(peers)
	if !reflect.DeepEqual(e["connections"], []any{peers[0], peers[1]}) || e["streams"] != float64(2) || e["cursor"] != float64(3) || e["admin"] != hex.EncodeToString(admin.addr) {
		t.Fatalf("broker's entry %v", e)
	}
}

// TestGSOCSessions: the GSOC client's frames both ways, no text frames. A
// publishing session receives the cohort's messages but not its own.
func TestGSOCSessions(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	g := newGSOC(t, "gsoc-sessions")
	peer := c.broker.addr

	pubA := dial(t, a, g.topic(), g.publishQuery(peer), nil)
	subA := dial(t, a, g.topic(), url.Values{"peer": {peer}}, nil)
	subB := dial(t, b, "0x"+g.topic(), url.Values{"peer": {c.broker.Overlay().String()}}, nil)
	pubB := dial(t, b, g.topic(), g.publishQuery(peer), nil)

	// A session is attached to its hub before its upgrade is answered, so
	// every session above receives from here.
	fromA := g.frame(t, "from A")
	pubA.send(websocket.BinaryMessage, fromA)
	for name, s := range map[string]*client{"subA": subA, "subB": subB, "pubB": pubB} {
		if got := s.binary(); !bytes.Equal(got, fromA) {
			t.Fatalf("%s got %x, want %x", name, got, fromA)
		}
	}
	fromB := g.frame(t, "from B")
	pubB.send(websocket.BinaryMessage, fromB)
	for name, s := range map[string]*client{"subA": subA, "subB": subB, "pubA": pubA} {
		if got := s.binary(); !bytes.Equal(got, fromB) {
			t.Fatalf("%s got %x, want %x (not its own)", name, got, fromB)
		}
	}
	again := g.frame(t, "again from A")
	pubA.send(websocket.BinaryMessage, again)
	if got := pubB.binary(); !bytes.Equal(got, again) {
		t.Fatalf("pubB got %x, want %x (not its own)", got, again)
	}

	ci := cohortOf(t, c.broker, g.addr.Bytes())
	if ci.Subscribers != 2 || ci.Publishers != 2 || ci.Accepted != 3 {
		t.Fatalf("cohort at broker: %d subscribers, %d publishers, %d accepted", ci.Subscribers, ci.Publishers, ci.Accepted)
	}
	e := topicEntry(t, a, g.addr.Bytes(), "publisher")
	if e["mode"] != float64(1) || e["sessions"] != float64(3) || e["streams"] != float64(2) || e["binding"] != "anchor" {
		t.Fatalf("A's entry %v", e)
	}
}

// TestAnchorSession: binding=anchor speaks the session protocol on the same
// implicit ANCHOR cohort as the GSOC client.
func TestAnchorSession(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	g := newGSOC(t, "anchor-session")
	q := url.Values{"peer": {c.broker.addr}, "binding": {"ANCHOR"}, "addr": {hex.EncodeToString(g.key.addr)}, "id": {hex.EncodeToString(g.id)}}
	pub := dial(t, c.clients[0], g.topic(), q, nil)
	if r := pub.control("ready"); r["role"] != "publisher" || r["binding"] != "anchor" {
		t.Fatalf("ready %v", r)
	}
	sub := dial(t, c.clients[1], g.topic(), url.Values{"peer": {c.broker.addr}}, nil) // a GSOC client
	m := g.frame(t, "anchor")
	pub.send(websocket.BinaryMessage, inFrame(pb.Kind_DATA, 0, append(bytes.Clone(g.id), m...)))
	if got := sub.binary(); !bytes.Equal(got, m) {
		t.Fatalf("got %x, want %x", got, m)
	}
	// A frame that is not a SOC of addr under id ends the session; the
	// broker never sees it.
	other := newGSOC(t, "elsewhere")
	pub.send(websocket.BinaryMessage, inFrame(pb.Kind_DATA, 0, append(bytes.Clone(other.id), other.frame(t, "forged")...)))
	pub.control("error")
	pub.expectClose(websocket.CloseInvalidFramePayloadData, "invalid frame")
	if n := cohortOf(t, c.broker, g.addr.Bytes()).Counters["wrong_owner"]; n != 0 {
		t.Fatalf("wrong_owner = %d at the broker", n)
	}
}

// TestBadAuth: an AUTH not signed by addr ends the session with a reason
// (1007), and is never sent to the broker (which would count it against the
// node); a DATA frame before the AUTH is refused (1008): the first frame
// after a challenge is an AUTH.
func TestBadAuth(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{})
	a := c.clients[0]
	admin, mallory := newKey(t), newKey(t)
	q := feedQuery(c.broker.addr, admin)
	q.Set("addr", hex.EncodeToString(admin.addr))
	pub := dial(t, a, "bad-claim", q, nil)
	pub.takeChallenge(admin)
	pub.k = &mallory // signs as another key
	pub.auth()
	if e := pub.control("error"); !strings.Contains(e["reason"].(string), "invalid frame") {
		t.Fatalf("error %v", e)
	}
	pub.expectClose(websocket.CloseInvalidFramePayloadData, "invalid frame")

	// Each step on a cohort of its own: a pending stream the node just
	// closed may still hold its address's one pending seat at the broker.
	pub = dial(t, a, "bad-claim-2", q, nil)
	pub.takeChallenge(admin)
	pub.data(0, "before the AUTH")
	if e := pub.control("error"); !strings.Contains(e["reason"].(string), "must be an AUTH") {
		t.Fatalf("error %v", e)
	}
	pub.expectClose(websocket.ClosePolicyViolation, "must be an AUTH")
	notBlocklisted(t, c.broker, a)
	for _, ci := range c.broker.svc.Cohorts() { // a cohort its last stream left is gone
		if ci.Counters["wrong_owner"]+ci.Counters["invalid_soc"]+ci.Counters["wrong_stream"] != 0 {
			t.Fatalf("the broker counted a bad frame: %v", ci.Counters)
		}
	}
	// The node still publishes for a dApp that signs properly.
	pub = dial(t, a, "bad-claim-3", q, nil)
	claim(t, pub, admin.signer, c.broker.Overlay(), 0)
	pub.control("ready")
}

// TestNoAuthTimeout: a dApp that sends no AUTH on its pending stream within
// SilentWait is closed (1008) before the broker's claim deadline, which the
// broker enforces by blocklisting the node.
func TestNoAuthTimeout(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{SilentWait: 50 * time.Millisecond})
	admin := newKey(t)
	q := feedQuery(c.broker.addr, admin)
	q.Set("addr", hex.EncodeToString(admin.addr))
	pub := dial(t, c.clients[0], "claim-timeout", q, nil)
	pub.takeChallenge(admin)
	pub.control("error")
	pub.expectClose(websocket.ClosePolicyViolation, "no AUTH")
	notBlocklisted(t, c.broker, c.clients[0])
}

// TestBadRequests: a malformed request is answered 400 before any upgrade,
// naming the parameter; MaxSessions is answered 503.
func TestBadRequests(t *testing.T) {
	t.Parallel()
	c := newMockCluster(t, api.Options{MaxSessions: 1}, mock.New())
	a := c.clients[0]
	admin := hex.EncodeToString(newKey(t).addr)
	peer := url.QueryEscape(c.broker.addr)
	for _, tc := range []struct {
		name, query, header, value, field string
	}{
		{"no peer", "", "", "", "peer"},
		{"bad peer", "peer=nowhere", "", "", "peer"},
		{"multiaddr without peer id", "peer=" + url.QueryEscape("/ip4/127.0.0.1/tcp/1"), "", "", "peer"},
		{"unknown binding", "binding=graffiti&peer=" + peer, "", "", "binding"},
		{"bad admin", "binding=feed&admin=zz&peer=" + peer, "", "", "admin"},
		{"short admin", "binding=feed&admin=abcd&peer=" + peer, "", "", "admin"},
		{"bad index", "binding=feed&admin=" + admin + "&addr=" + admin + "&index=x&peer=" + peer, "", "", "index"},
		{"index under anchor", "binding=anchor&admin=" + admin + "&addr=" + admin + "&index=1&peer=" + peer, "", "", "index"},
		{"publishers without admin", "binding=mnemonic&publishers=all&peer=" + peer, "", "", "publishers"},
		{"history", "binding=anchor&admin=" + admin + "&history=true&peer=" + peer, "", "", "history"},
		{"closed without admin", "binding=mnemonic&closed=true&addr=" + admin + "&peer=" + peer, "", "", "closed"},
		{"closed under all", "binding=mnemonic&admin=" + admin + "&publishers=all&closed=true&peer=" + peer, "", "", "closed"},
		{"closed without addr", "binding=anchor&admin=" + admin + "&closed=true&peer=" + peer, "", "", "addr"},
		{"anchor addr without id", "binding=anchor&addr=" + admin + "&peer=" + peer, "", "", "id"},
		{"id with explicit anchor", "binding=anchor&admin=" + admin + "&addr=" + admin + "&id=" + strings.Repeat("ab", 32) + "&peer=" + peer, "", "", "id"},
		{"id under mnemonic", "binding=mnemonic&addr=" + admin + "&id=" + strings.Repeat("ab", 32) + "&peer=" + peer, "", "", "id"},
		{"owner not the topic's", "binding=owner&addr=" + admin + "&peer=" + peer, "", "", "addr"},
		{"soc_id not mined", "binding=soc_id&addr=" + admin + "&peer=" + peer, "", "", "addr"},
		{"gsoc half", "gsoc-eth-address=" + admin + "&peer=" + peer, "", "", "gsoc-topic"},
		{"gsoc wrong topic", "gsoc-eth-address=" + admin + "&gsoc-topic=" + strings.Repeat("ab", 32) + "&peer=" + peer, "", "", "gsoc-topic"},
		{"spec without binding", "admin=" + admin + "&peer=" + peer, "", "", "admin"},
		{"soc fields order", "peer=" + peer, "Swarm-Soc-Fields", "payload,span", "swarm-soc-fields"},
		{"soc fields unknown", "peer=" + peer, "Swarm-Soc-Fields", "owner", "swarm-soc-fields"},
		{"soc fields index", "peer=" + peer, "Swarm-Soc-Fields", "index,payload", "swarm-soc-fields"},
		{"soc fields index, not a feed", "binding=mnemonic&peer=" + peer, "Swarm-Soc-Fields", "index,payload", "swarm-soc-fields"},
		{"keep-alive zero", "peer=" + peer, "Swarm-Keep-Alive", "0", "swarm-keep-alive"},
		{"keep-alive", "peer=" + peer, "Swarm-Keep-Alive", "soon", "swarm-keep-alive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.header != "" {
				h.Set(tc.header, tc.value)
			}
			ws, resp, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(a.srv.URL, "http")+"/pubsub/topic?"+tc.query, h)
			if err == nil {
				_ = ws.Close()
				t.Fatal("upgraded")
			}
			defer resp.Body.Close()
			var body struct {
				Code    int `json:"code"`
				Reasons []struct {
					Field string `json:"field"`
					Error string `json:"error"`
				} `json:"reasons"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusBadRequest || body.Code != http.StatusBadRequest || len(body.Reasons) == 0 || body.Reasons[0].Field != tc.field {
				t.Fatalf("status %d, body %+v; want 400 naming %s", resp.StatusCode, body, tc.field)
			}
		})
	}

	t.Run("max sessions", func(t *testing.T) {
		dial(t, a, "full", url.Values{"peer": {c.broker.addr}}, nil)
		_, resp, err := websocket.DefaultDialer.Dial(wsURL(a, "full", url.Values{"peer": {c.broker.addr}}), nil)
		if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("second session: %v %v, want 503", err, resp)
		}
		if b, _ := io.ReadAll(resp.Body); !strings.Contains(string(b), "node session limit") {
			t.Fatalf("second session: %s, want the limit named", b)
		}
		_ = resp.Body.Close()
	})
}

// TestOversizedFrame: a frame past ReadLimit closes the session with 1009
// and the reason; a session of the session protocol gets an error frame
// first, the GSOC client the close frame only.
func TestOversizedFrame(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{})
	g := newGSOC(t, "oversized")
	const reason = "message exceeds 4352 bytes"
	pub := dial(t, c.clients[0], g.topic(), g.publishQuery(c.broker.addr), nil)
	pub.send(websocket.BinaryMessage, make([]byte, api.DefaultReadLimit+1))
	if typ, b, err := pub.next(); err == nil {
		t.Fatalf("the GSOC client got a %d frame %q before the close", typ, b)
	}
	pub.expectClose(websocket.CloseMessageTooBig, reason)

	admin := newKey(t)
	sub := dial(t, c.clients[0], "oversized", feedQuery(c.broker.addr, admin), nil)
	sub.control("ready")
	sub.send(websocket.TextMessage, make([]byte, api.DefaultReadLimit+1))
	if f := sub.control("error"); !strings.Contains(f["reason"].(string), reason) {
		t.Fatalf("error frame %v, want the reason", f)
	}
	sub.expectClose(websocket.CloseMessageTooBig, reason)
}

// TestSlowSession: a session that stops reading is closed once its queue is
// full; the other session on the same hub keeps receiving.
func TestSlowSession(t *testing.T) {
	t.Parallel()
	const queue = 2
	c := newCluster(t, 2, api.Options{SessionQueue: queue})
	a, b := c.clients[0], c.clients[1]
	g := newGSOC(t, "slow")
	pub := dial(t, a, g.topic(), g.publishQuery(c.broker.addr), nil)
	fast := dial(t, b, g.topic(), url.Values{"peer": {c.broker.addr}}, nil)
	slow := dial(t, b, g.topic(), url.Values{"peer": {c.broker.addr}}, nil)
	gate := b.ln.conn(t, slow.ws)
	gate.hold()

	// The first frame blocks the slow session's writer, the next `queue`
	// fill its queue, the one after closes it; once the fast session has
	// the frame after that, the hub has dropped the slow one.
	var frames [][]byte
	for i := range queue + 3 {
		f := g.frame(t, fmt.Sprintf("m%d", i))
		frames = append(frames, f)
		pub.send(websocket.BinaryMessage, f)
		if got := fast.binary(); !bytes.Equal(got, f) {
			t.Fatalf("fast got %x, want %x", got, f)
		}
	}
	if e := topicEntry(t, b, g.addr.Bytes(), "subscriber"); e["sessions"] != float64(1) {
		t.Fatalf("B's entry %v: the slow session is still attached", e)
	}
	gate.release()
	if got := slow.binary(); !bytes.Equal(got, frames[0]) {
		t.Fatalf("slow got %x, want the frame its writer held", got)
	}
	slow.expectClose(websocket.ClosePolicyViolation, "slow consumer")

	f := g.frame(t, "after")
	pub.send(websocket.BinaryMessage, f)
	if got := fast.binary(); !bytes.Equal(got, f) {
		t.Fatalf("fast got %x, want %x", got, f)
	}
	if ci := cohortOf(t, c.broker, g.addr.Bytes()); ci.Counters["queue_reset"] != 0 {
		t.Fatalf("the broker reset a stream: %v", ci.Counters)
	}
}

// TestServerClose: Close ends every session with 1001 and a reason.
func TestServerClose(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{})
	a := c.clients[0]
	g := newGSOC(t, "close")
	gs := dial(t, a, g.topic(), url.Values{"peer": {c.broker.addr}}, nil)
	fs := dial(t, a, "close", feedQuery(c.broker.addr, newKey(t)), nil)
	fs.control("ready")

	done := make(chan error, 1)
	go func() { done <- a.api.Close() }()
	gs.expectClose(websocket.CloseGoingAway, "node shutting down")
	fs.expectClose(websocket.CloseGoingAway, "node shutting down")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := topics(t, a); len(got) != 0 {
		t.Fatalf("topics after close: %v", got)
	}
	_, resp, err := websocket.DefaultDialer.Dial(wsURL(a, g.topic(), url.Values{"peer": {c.broker.addr}}), nil)
	if err == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("after close: %v, want 503", err)
	}
	_ = resp.Body.Close()
}

// TestSOCFields: the swarm-soc-fields parser.
func TestSOCFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		feed bool
		want string // comma-joined, or "error"
	}{
		{"payload", false, "payload"},
		{"Signature, span ,PAYLOAD", false, "signature,span,payload"},
		{"identifier,address", false, "identifier,address"},
		{"index,payload", true, "index,payload"},
		{"index,payload", false, "error"},
		{"payload,span", false, "error"},
		{"span,span", false, "error"},
		{"", false, "error"},
		{"owner", false, "error"},
	} {
		got, err := api.ParseSOCFields(tc.in, tc.feed)
		if tc.want == "error" {
			if err == nil {
				t.Errorf("%q: got %v, want an error", tc.in, got)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want {
			t.Errorf("%q: got %v %v, want %s", tc.in, got, err, tc.want)
		}
	}
}

// TestKeepAlive: swarm-keep-alive sets the ping period of the session.
func TestKeepAlive(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{})
	s := dial(t, c.clients[0], "keep-alive", url.Values{"peer": {c.broker.addr}}, http.Header{"Swarm-Keep-Alive": {"1"}})
	pinged := make(chan struct{}, 1)
	s.ws.SetPingHandler(func(string) error {
		select {
		case pinged <- struct{}{}:
		default:
		}
		return nil
	})
	read := make(chan error, 1)
	go func() {
		_, _, err := s.next()
		read <- err
	}()
	select {
	case <-pinged:
	case err := <-read:
		t.Fatalf("session ended before a ping: %v", err)
	}
	_ = s.ws.Close()
	<-read
}

// TestBrokerEndsStreams: when the broker resets the shared streams, their
// sessions are closed with the reason; a session the node ends this way
// gets an error frame first, the GSOC client a close frame only.
func TestBrokerEndsStreams(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 2, api.Options{})
	a, b := c.clients[0], c.clients[1]
	admin := newKey(t)
	g := newGSOC(t, "ends")
	sub := dial(t, b, "ends", feedQuery(c.broker.addr, admin), nil)
	sub.control("ready")
	gs := dial(t, b, g.topic(), url.Values{"peer": {c.broker.addr}}, nil)
	q := feedQuery(c.broker.addr, admin)
	q.Set("addr", hex.EncodeToString(admin.addr))
	pub := dial(t, a, "ends", q, nil)
	claim(t, pub, admin.signer, c.broker.Overlay(), 0)
	pub.control("ready")

	if err := c.broker.svc.Close(); err != nil { // resets every stream it brokers
		t.Fatal(err)
	}
	if e := sub.control("error"); !strings.Contains(e["reason"].(string), "subscription lost") {
		t.Fatalf("error %v", e)
	}
	sub.expectClose(websocket.CloseInternalServerErr, "subscription lost")
	gs.expectClose(websocket.CloseInternalServerErr, "subscription lost")
	pub.control("error")
	pub.expectClose(websocket.CloseInternalServerErr, "publisher stream reset")
	if got := topics(t, b); len(got) != 0 {
		t.Fatalf("B's topics after the reset: %v", got)
	}
}

// TestSessionsShareAStream: sessions on one node publishing as the same
// address in one cohort share one stream and its challenge (each is handed
// it); no proof is needed, as every frame must be signed by the address: a
// session whose dApp does not hold the key cannot send a valid AUTH, and is
// ended (1007) without its frame reaching the broker.
func TestSessionsShareAStream(t *testing.T) {
	t.Parallel()
	c := newCluster(t, 1, api.Options{})
	a := c.clients[0]
	admin := newKey(t)
	q := feedQuery(c.broker.addr, admin)
	q.Set("addr", hex.EncodeToString(admin.addr))
	owner := dial(t, a, "ride", q, nil)
	claim(t, owner, admin.signer, c.broker.Overlay(), 0)
	owner.control("ready")

	rider := dial(t, a, "ride", q, nil)
	rider.takeChallenge(admin)
	if !bytes.Equal(rider.challenge, owner.challenge) {
		t.Fatal("two sessions of one address got two challenges")
	}
	mallory := newKey(t)
	rider.k = &mallory
	rider.auth()
	rider.control("error")
	rider.expectClose(websocket.CloseInvalidFramePayloadData, "invalid frame")

	second := dial(t, a, "ride", q, nil)
	claim(t, second, admin.signer, c.broker.Overlay(), 0)
	second.control("ready")
	second.data(0, "shared")
	if ci := cohortOf(t, c.broker, keccak([]byte("ride"))); ci.Publishers != 1 {
		t.Fatalf("%d publisher streams at the broker, want the one both sessions share", ci.Publishers)
	}
	notBlocklisted(t, c.broker, a)
}
