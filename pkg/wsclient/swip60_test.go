// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package wsclient_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/wsclient"
	"github.com/gorilla/websocket"
)

// ident is a dApp's identity: its key and its address.
type ident struct {
	signer crypto.Signer
	addr   []byte
}

func newIdent(t *testing.T) ident {
	t.Helper()
	s, a := signer(t)
	return ident{signer: s, addr: a}
}

func keccak(s string) []byte {
	h, _ := crypto.LegacyKeccak256([]byte(s))
	return h
}

func publish(t *testing.T, o wsclient.Options, who ident, wantState string) *wsclient.Session {
	t.Helper()
	s, err := wsclient.Publish(ctxT(t), o, who.signer)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if s.State() != wantState {
		t.Fatalf("session of %x: state %q, want %q", who.addr, s.State(), wantState)
	}
	return s
}

func subscribe(t *testing.T, o wsclient.Options) *wsclient.Session {
	t.Helper()
	s, err := wsclient.Subscribe(ctxT(t), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// postRoster posts the admin's roster naming pubs at index, signed under
// the challenge of the admin's session sa.
func postRoster(t *testing.T, sa *wsclient.Session, index uint64, pubs ...ident) {
	t.Helper()
	var addrs [][]byte
	for _, p := range pubs {
		addrs = append(addrs, p.addr)
	}
	if err := sa.PostService(ctxT(t), wsclient.KindRoster, index, addrs); err != nil {
		t.Fatal(err)
	}
}

// awaitRoster waits for the service frame of index and checks it names
// exactly pubs.
func awaitRoster(t *testing.T, s *wsclient.Session, index uint64, pubs ...ident) {
	t.Helper()
	v, err := s.AwaitService(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if v.Kind != wsclient.KindRoster || v.Index != index || len(v.Publishers) != len(pubs) || v.Gap {
		t.Fatalf("service %+v, want roster %d of %d", v, index, len(pubs))
	}
	for _, p := range pubs {
		if !v.Names(p.addr) {
			t.Fatalf("roster %d does not name %x", index, p.addr)
		}
	}
}

func awaitFrame(t *testing.T, s *wsclient.Session, typ string) map[string]any {
	t.Helper()
	f, err := s.Await(ctxT(t), typ)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// payload reads the next message and checks its payload.
func payload(t *testing.T, s *wsclient.Session, want string) wsclient.Message {
	t.Helper()
	m, err := s.NextMessage(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if string(m.Payload) != want {
		t.Fatalf("got %q, want %q", m.Payload, want)
	}
	return m
}

// TestSpectatorJam: a grantee's session waits until a roster the admin
// posts names it, then claims with an AUTH and is ready; the
// audience hears both publishers, each publisher the other. A revocation
// puts it back to waiting.
func TestSpectatorJam(t *testing.T) {
	t.Parallel()
	broker, nodes := bridgeNodes(t, 2)
	alice, bob := newIdent(t), newIdent(t)
	o := wsclient.Options{Peer: broker.Overlay().String(), Topic: keccak("wsclient-spectator-jam"), Binding: wsclient.BindingFeed, Admin: alice.addr}

	o.API = nodes[1].url
	audience := subscribe(t, o)
	sb := publish(t, o, bob, wsclient.StateWaiting)
	o.API = nodes[0].url
	sa := publish(t, o, alice, wsclient.StateReady)

	postRoster(t, sa, 0, bob)
	awaitRoster(t, sa, 0, bob)
	awaitRoster(t, audience, 0, bob)
	awaitRoster(t, sb, 0, bob)
	if r := awaitFrame(t, sb, "ready"); r["role"] != "publisher" || sb.State() != wsclient.StateReady {
		t.Fatalf("ready %v, state %q", r, sb.State())
	}

	if err := sa.SendFeedUpdate(alice.signer, 0, []byte("alice 0")); err != nil {
		t.Fatal(err)
	}
	payload(t, audience, "alice 0")
	payload(t, sb, "alice 0")
	if err := sb.SendFeedUpdate(bob.signer, 0, []byte("bob 0")); err != nil {
		t.Fatal(err)
	}
	payload(t, audience, "bob 0")
	payload(t, sa, "bob 0")

	postRoster(t, sa, 1)
	awaitRoster(t, sb, 1)
	if w := awaitFrame(t, sb, "waiting"); !strings.Contains(w["reason"].(string), "revoked") || sb.State() != wsclient.StateWaiting {
		t.Fatalf("waiting %v, state %q", w, sb.State())
	}
}

// TestJam: a closed cohort. A spectator is refused before the upgrade; a
// seat granted beforehand is admitted and talks with the admin; a seat not
// yet granted waits, and claims with an AUTH on its silent stream when the
// grant reaches it.
func TestJam(t *testing.T) {
	t.Parallel()
	broker, nodes := bridgeNodes(t, 2)
	alice, bob, carol := newIdent(t), newIdent(t), newIdent(t)
	o := wsclient.Options{API: nodes[0].url, Peer: broker.Overlay().String(), Topic: keccak("wsclient-jam"), Binding: "ANCHOR", Admin: alice.addr, Closed: true}

	_, err := wsclient.Subscribe(ctxT(t), o)
	var he *wsclient.HTTPError
	if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest {
		t.Fatalf("a spectator of a closed cohort: %v, want 400", err)
	}
	sa := publish(t, o, alice, wsclient.StateReady)
	postRoster(t, sa, 0, bob)
	awaitRoster(t, sa, 0, bob)

	o.API = nodes[1].url
	sb, err := wsclient.Publish(ctxT(t), o, bob.signer)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.State() != wsclient.StateReady {
		awaitFrame(t, sb, "ready")
	}

	o.API = nodes[0].url
	sc := publish(t, o, carol, wsclient.StateWaiting)

	if err := sb.SendUpdate(bob.signer, 1, []byte("bob plays")); err != nil {
		t.Fatal(err)
	}
	if m := payload(t, sa, "bob plays"); len(m.Raw) != len("bob plays") {
		t.Fatalf("raw %x", m.Raw)
	}
	if err := sa.SendUpdate(alice.signer, 1, []byte("alice plays")); err != nil {
		t.Fatal(err)
	}
	payload(t, sb, "alice plays")

	postRoster(t, sa, 1, bob, carol)
	awaitRoster(t, sc, 1, bob, carol) // the cue: the session claims as it comes
	awaitFrame(t, sc, "ready")
	if err := sc.SendUpdate(carol.signer, 1, []byte("carol plays")); err != nil {
		t.Fatal(err)
	}
	payload(t, sa, "carol plays")
	payload(t, sb, "carol plays")
}

// TestGroupChat: MNEMONIC, an admin, publishers=all: members declare their
// addresses, need no claim, sign under their streams' challenges and hear
// each other, attributed by the SOC address; the admin ends the chat for
// everyone.
func TestGroupChat(t *testing.T) {
	t.Parallel()
	broker, nodes := bridgeNodes(t, 2)
	alice, bob, carol := newIdent(t), newIdent(t), newIdent(t)
	o := wsclient.Options{Peer: broker.Overlay().String(), Topic: keccak("wsclient-chat"), Binding: wsclient.BindingMnemonic,
		Admin: alice.addr, Publishers: wsclient.PublishersAll, Fields: "address,payload"}
	members := []struct {
		who ident
		api string
		s   *wsclient.Session
	}{{alice, nodes[0].url, nil}, {bob, nodes[1].url, nil}, {carol, nodes[1].url, nil}}
	for i := range members {
		o.API = members[i].api
		members[i].s = publish(t, o, members[i].who, wsclient.StateReady)
	}
	for i, m := range members {
		say := "hello from " + string(rune('a'+i))
		if err := m.s.SendUpdate(m.who.signer, uint64(i), []byte(say)); err != nil {
			t.Fatal(err)
		}
		ch, _ := m.s.Challenge()
		addr, _ := wsclient.GSOCAddress(bps.SessionID(pb.Kind_DATA, o.Topic, ch, uint64(i)), m.who.addr)
		for j, other := range members {
			if j == i {
				continue
			}
			if got := payload(t, other.s, say); !bytes.Equal(got.Address, addr) {
				t.Fatalf("member %d: address %x, want %x", j, got.Address, addr)
			}
		}
	}
	if err := members[0].s.PostService(ctxT(t), wsclient.KindEndOfStream, 0, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		v, err := m.s.AwaitService(ctxT(t))
		if err != nil || v.Kind != wsclient.KindEndOfStream {
			t.Fatalf("service %+v, %v", v, err)
		}
		_, err = m.s.NextMessage(ctxT(t))
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure {
			t.Fatalf("after the end: %v", err)
		}
	}
}

// mine finds an n for which the SOC address of (id(n), owner) is within
// bps.PoMin leading bits of anchor(id(n)): what the implicit SOC_ID and
// OWNER bindings ask of an owner.
func mine(t *testing.T, owner []byte, id, anchor func([]byte) []byte) []byte {
	t.Helper()
	seed := make([]byte, 32)
	for n := uint64(0); n < 1<<24; n++ {
		binary.BigEndian.PutUint64(seed[24:], n)
		i := id(seed)
		a, err := wsclient.GSOCAddress(i, owner)
		if err != nil {
			t.Fatal(err)
		}
		if swarm.Proximity(a, anchor(i)) >= bps.PoMin {
			return i
		}
	}
	t.Fatal("nothing mined")
	return nil
}

// TestImplicitBindings: without an admin a publisher declares its address,
// is ready without a claim, and frames what it sends as its binding wants:
// the id in the frame (mnemonic, owner), the id fixed by the topic (soc_id)
// or by the session (anchor), the index (feed). A listener on the other node
// receives the signed id and the payload.
func TestImplicitBindings(t *testing.T) {
	t.Parallel()
	who := newIdent(t)
	ownerTopic := keccak(string(who.addr))
	micID := mine(t, who.addr, bytes.Clone, func([]byte) []byte { return ownerTopic })
	mocID := mine(t, who.addr, bytes.Clone, bytes.Clone)
	anchorID := keccak("wsclient-anchor-id")
	anchorTopic, _ := wsclient.GSOCAddress(anchorID, who.addr)
	feedTopic := keccak("wsclient-implicit-feed")

	for _, tc := range []struct {
		binding string
		topic   []byte
		id      []byte // the session's ID
		sendID  []byte // the id given to SendSOC; nil: a feed update
		signed  []byte // the signed id, as the listener sees it
	}{
		{wsclient.BindingMnemonic, keccak("wsclient-troll-box"), nil, keccak("any id"), keccak("any id")},
		{wsclient.BindingOwner, ownerTopic, nil, micID, micID},
		{"socid", mocID, nil, nil, mocID},
		{wsclient.BindingAnchor, anchorTopic, anchorID, nil, anchorID},
		{wsclient.BindingFeed, feedTopic, nil, nil, bps.FeedID(feedTopic, 7)},
	} {
		t.Run(tc.binding, func(t *testing.T) {
			t.Parallel()
			broker, nodes := bridgeNodes(t, 2)
			o := wsclient.Options{API: nodes[1].url, Peer: broker.Overlay().String(), Topic: tc.topic, Binding: tc.binding, Fields: "identifier,payload"}
			listener := subscribe(t, o)
			o.API, o.ID = nodes[0].url, tc.id
			pub := publish(t, o, who, wsclient.StateReady)
			var err error
			if tc.binding == wsclient.BindingFeed {
				if pub.SendSOC(who.signer, nil, nil) == nil {
					t.Fatal("SendSOC on a feed")
				}
				err = pub.SendFeedUpdate(who.signer, 7, []byte("payload"))
			} else {
				err = pub.SendSOC(who.signer, tc.sendID, []byte("payload"))
			}
			if err != nil {
				t.Fatal(err)
			}
			if m := payload(t, listener, "payload"); !bytes.Equal(m.ID, tc.signed) {
				t.Fatalf("identifier %x, want %x", m.ID, tc.signed)
			}
			if tc.sendID == nil && tc.binding != wsclient.BindingFeed && pub.SendSOC(who.signer, keccak("other"), nil) == nil {
				t.Fatal("SendSOC under an id the binding does not fix")
			}
		})
	}
}

// TestPostServiceRefused: the node's refusals reach the caller as
// *HTTPError: no admin stream with the challenge (409), a forged service
// chunk (400: it does not validate), a stale index (409), an implicit
// cohort (400).
func TestPostServiceRefused(t *testing.T) {
	t.Parallel()
	broker, nodes := bridgeNodes(t, 1)
	alice, mallory := newIdent(t), newIdent(t)
	o := wsclient.Options{API: nodes[0].url, Peer: broker.Overlay().String(), Topic: keccak("wsclient-refused"), Binding: wsclient.BindingFeed, Admin: alice.addr}
	gone := bytes.Repeat([]byte{7}, 32)
	status := func(err error) int {
		var he *wsclient.HTTPError
		if !errors.As(err, &he) {
			t.Fatalf("got %v, want an HTTPError", err)
		}
		return he.StatusCode
	}
	if code := status(wsclient.PostService(ctxT(t), o, alice.signer, gone, wsclient.KindRoster, 0, nil)); code != http.StatusConflict {
		t.Fatalf("no admin stream: %d", code)
	}
	sa := publish(t, o, alice, wsclient.StateReady)
	ch, _ := sa.Challenge()
	if code := status(wsclient.PostService(ctxT(t), o, mallory.signer, ch, wsclient.KindRoster, 0, nil)); code != http.StatusBadRequest {
		t.Fatalf("forged: %d", code)
	}
	postRoster(t, sa, 0)
	awaitRoster(t, sa, 0)
	if code := status(wsclient.PostService(ctxT(t), o, alice.signer, ch, wsclient.KindRoster, 0, nil)); code != http.StatusConflict {
		t.Fatalf("stale: %d", code)
	}
	o.Admin = nil
	if code := status(wsclient.PostService(ctxT(t), o, alice.signer, ch, wsclient.KindRoster, 0, nil)); code != http.StatusBadRequest {
		t.Fatalf("implicit: %d", code)
	}
}

func TestDecodeService(t *testing.T) {
	t.Parallel()
	a := bytes.Repeat([]byte{0xab}, 20)
	for _, tc := range []struct {
		name string
		f    map[string]any
		want *wsclient.Service
	}{
		{"roster", map[string]any{"type": "service", "kind": "ROSTER", "index": float64(3), "publishers": []any{"0x" + strings.Repeat("ab", 20)}, "gap": true},
			&wsclient.Service{Kind: wsclient.KindRoster, Index: 3, Publishers: [][]byte{a}, Gap: true}},
		{"end", map[string]any{"type": "service", "kind": "EOS", "index": float64(4), "publishers": []any{}, "gap": false},
			&wsclient.Service{Kind: wsclient.KindEndOfStream, Index: 4}},
		{"not service", map[string]any{"type": "ready", "index": float64(0)}, nil},
		{"no index", map[string]any{"type": "service", "kind": "ROSTER"}, nil},
		{"unknown kind", map[string]any{"type": "service", "kind": "GRANT", "index": float64(1)}, nil},
		{"short address", map[string]any{"type": "service", "kind": "ROSTER", "index": float64(1), "publishers": []any{"abab"}}, nil},
	} {
		got, err := wsclient.DecodeService(tc.f)
		switch {
		case tc.want == nil && err == nil:
			t.Errorf("%s: decoded %+v, want an error", tc.name, got)
		case tc.want != nil && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != nil && (got.Kind != tc.want.Kind || got.Index != tc.want.Index || got.Gap != tc.want.Gap ||
			len(got.Publishers) != len(tc.want.Publishers) || len(got.Publishers) > 0 && !got.Names(a)):
			t.Errorf("%s: %+v, want %+v", tc.name, got, *tc.want)
		}
	}
}
