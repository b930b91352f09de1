// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/wsclient"
	"github.com/gorilla/websocket"
)

// swip60Deadline bounds each configuration's round trip on the cluster.
const swip60Deadline = 30 * time.Second

// TestDevClusterSWIP60 is SWIP-60 conformance item 5 on real bee nodes over
// libp2p on loopback: the five configurations — live-stream, spectator-jam,
// jam, group-chat, implicit — each round-tripped through WebSocket sessions
// on at least two nodes of one dev cluster (node-0 the broker), every claim,
// message and service SOC signed by the test's dApps, never by a node.
func TestDevClusterSWIP60(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four bee nodes")
	}
	cl := startSWIP60Cluster(t)
	broker := cl.Nodes[0].Underlays[0]
	api := func(i int) string { return cl.Nodes[i].API }

	// live-stream: binding=feed and an admin who never posts a roster. The
	// admin streams from node-1 to an audience on node-2 and node-3, then
	// ends the stream, which closes every session attributably.
	t.Run("live-stream", func(t *testing.T) {
		r := newSWIP60Run(t)
		alice := newSWIP60Key(t)
		o := wsclient.Options{Peer: broker, Topic: swip60Topic("e2e-live-stream"), Binding: wsclient.BindingFeed, Admin: alice.addr, Fields: "index,payload"}
		audience := r.subscribeOn(o, api(2), api(3))
		o.API, o.Fields = api(1), ""
		sa := r.publish(o, alice, wsclient.StateReady)
		r.claimed(sa)
		for i := range uint64(3) {
			if err := sa.SendFeedUpdate(alice.signer, i, fmt.Appendf(nil, "frame %d", i)); err != nil {
				t.Fatal(err)
			}
		}
		for j, s := range audience {
			for i := range uint64(3) {
				if m := r.next(s); m.Index != i || string(m.Payload) != fmt.Sprint("frame ", i) {
					t.Fatalf("node-%d: got %d %q, want frame %d", j+2, m.Index, m.Payload, i)
				}
			}
		}
		r.atBroker(api(0), o, 3, nil)
		r.post(sa, eos())
		for _, s := range append(audience, sa) {
			r.ended(s, 0)
		}
	})

	// spectator-jam: binding=feed, an admin and a roster. B's session on
	// node-2 waits until the admin's session on node-1 posts a roster naming
	// B; then B's dApp claims with an AUTH on its spectator stream and B is
	// ready. Both
	// publish; the audience on node-3 hears both, each publisher the other.
	// A revocation puts B back to waiting.
	t.Run("spectator-jam", func(t *testing.T) {
		r := newSWIP60Run(t)
		alice, bob := newSWIP60Key(t), newSWIP60Key(t)
		o := wsclient.Options{Peer: broker, Topic: swip60Topic("e2e-spectator-jam"), Binding: wsclient.BindingFeed, Admin: alice.addr}
		audience := r.subscribeOn(o, api(3))[0]
		o.API = api(1)
		sa := r.publish(o, alice, wsclient.StateReady)
		o.API = api(2)
		sb := r.publish(o, bob, wsclient.StateWaiting)
		if reason := fmt.Sprint(sb.Waiting["reason"]); !strings.Contains(reason, "not in the roster") {
			t.Fatalf("B waiting: %s", reason)
		}

		o.API = api(1)
		r.post(sa, roster(0, bob))
		for _, s := range []*wsclient.Session{sa, audience, sb} {
			r.roster(s, 0, bob)
		}
		r.await(sb, "ready") // B's session claimed with an AUTH on its cue
		r.claimed(sb)

		if err := sa.SendFeedUpdate(alice.signer, 0, []byte("alice 0")); err != nil {
			t.Fatal(err)
		}
		r.payload(sb, "alice 0")
		if err := sb.SendFeedUpdate(bob.signer, 0, []byte("bob 0")); err != nil {
			t.Fatal(err)
		}
		r.payload(sa, "bob 0")
		r.payloads(audience, "alice 0", "bob 0")

		// The admin revokes B: the announcement reaches every session, and
		// B's says B may not publish any more.
		r.post(sa, roster(1))
		for _, s := range []*wsclient.Session{sa, audience, sb} {
			r.roster(s, 1)
		}
		if w := r.await(sb, "waiting"); !strings.Contains(fmt.Sprint(w["reason"]), "revoked") || sb.State() != wsclient.StateWaiting {
			t.Fatalf("B after the revocation: %v, state %q", w, sb.State())
		}
		r.atBroker(api(0), o, 4, nil) // two rosters, two messages
	})

	// jam: binding=anchor, an admin, closed=true. The admin on node-1 grants
	// B before B joins; B's seat on node-2 claims, is admitted and talks
	// with the admin, each frame under an id its dApp chose. C, granted
	// after it joined, is admitted too. A session without addr on node-3 is
	// refused before the upgrade: a closed cohort has no audience.
	//
	// The roster travels on the admin's stream and each claim on its
	// performer's: the broker may read either first, and admits a rostered
	// performer in both orders — a claim that came before the roster naming
	// its address is held and taken when the roster comes.
	t.Run("jam", func(t *testing.T) {
		r := newSWIP60Run(t)
		alice, bob, carol := newSWIP60Key(t), newSWIP60Key(t), newSWIP60Key(t)
		o := wsclient.Options{Peer: broker, Topic: swip60Topic("e2e-jam"), Binding: wsclient.BindingAnchor, Admin: alice.addr, Closed: true}
		o.API = api(1)
		sa := r.publish(o, alice, wsclient.StateReady)
		r.post(sa, roster(0, bob))
		r.roster(sa, 0, bob)

		o.API = api(2)
		sb := r.publish(o, bob, "")
		r.claimed(sb)
		if sb.State() != wsclient.StateReady {
			r.await(sb, "ready") // admitted: the stream's first delivery came
		}
		r.roster(sb, 0, bob)

		if err := sb.SendUpdate(bob.signer, 1, []byte("bob plays")); err != nil {
			t.Fatal(err)
		}
		r.payload(sa, "bob plays")
		if err := sa.SendUpdate(alice.signer, 1, []byte("alice plays")); err != nil {
			t.Fatal(err)
		}
		r.payload(sb, "alice plays")

		// C's seat on the admin's node is not in the roster yet: it waits
		// on its silent stream and hears nothing. The grant reaches it as a
		// service frame, its cue: C's dApp claims with an AUTH on the
		// stream it holds and joins the talk.
		o.API = api(1)
		sc := r.publish(o, carol, "")
		r.claimed(sc)
		if sc.State() != wsclient.StateWaiting || !strings.Contains(fmt.Sprint(sc.Waiting["reason"]), "not in the roster") {
			t.Fatalf("C: state %q, %v", sc.State(), sc.Waiting)
		}
		r.post(sa, roster(1, bob, carol))
		r.roster(sa, 1, bob, carol)
		r.roster(sb, 1, bob, carol)
		r.roster(sc, 1, bob, carol)
		r.await(sc, "ready")
		if err := sc.SendUpdate(carol.signer, 1, []byte("carol plays")); err != nil {
			t.Fatal(err)
		}
		r.payload(sa, "carol plays")
		r.payload(sb, "carol plays")
		// Two rosters, three messages; nothing counted (SWIP-74 Rev 8: each
		// seat claims only once a roster names it).
		r.atBroker(api(0), o, 5, nil)

		o.API = api(3)
		_, err := wsclient.Subscribe(r.ctx, o)
		var he *wsclient.HTTPError
		if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest || !strings.Contains(fmt.Sprint(he.Reasons), "closed cohort") {
			t.Fatalf("an intruder without addr: %v, want 400 closed cohort", err)
		}
	})

	// group-chat: binding=mnemonic, an admin, publishers=all. Three members
	// on node-1, node-2 and node-3 declare their addresses (no claim), each
	// publishes and hears the other two, attributed by SOC address; the
	// admin ends the chat.
	t.Run("group-chat", func(t *testing.T) {
		r := newSWIP60Run(t)
		o := wsclient.Options{Peer: broker, Topic: swip60Topic("e2e-group-chat"), Binding: wsclient.BindingMnemonic,
			Publishers: wsclient.PublishersAll, Fields: "address,payload"}
		type member struct {
			key swip60Key
			s   *wsclient.Session
		}
		var members []member
		for i := 1; i <= 3; i++ {
			k := newSWIP60Key(t)
			if o.Admin == nil {
				o.Admin = k.addr
			}
			o.API = api(i)
			members = append(members, member{key: k, s: r.publish(o, k, wsclient.StateReady)})
		}
		for i, m := range members {
			say := fmt.Sprintf("hello from node-%d", i+1)
			if err := m.s.SendUpdate(m.key.signer, uint64(i), []byte(say)); err != nil {
				t.Fatal(err)
			}
			ch, _ := m.s.Challenge()
			addr, _ := wsclient.GSOCAddress(bps.SessionID(pb.Kind_DATA, o.Topic, ch, uint64(i)), m.key.addr)
			for j, other := range members {
				if j == i {
					continue
				}
				if got := r.payload(other.s, say); !bytes.Equal(got.Address, addr) {
					t.Fatalf("node-%d: %q from %x, want %x", j+1, say, got.Address, addr)
				}
			}
		}
		r.atBroker(api(0), o, 3, nil)
		o.API = api(1)
		r.post(members[0].s, eos())
		for _, m := range members {
			r.ended(m.s, 0)
		}
	})

	// implicit: binding=mnemonic without an admin. A publisher on node-1
	// declares its address and is ready at once; subscribers on node-2 and
	// node-3 receive each message with the id it was signed under and its
	// author's SOC address.
	t.Run("implicit", func(t *testing.T) {
		r := newSWIP60Run(t)
		alice := newSWIP60Key(t)
		o := wsclient.Options{Peer: broker, Topic: swip60Topic("e2e-implicit"), Binding: wsclient.BindingMnemonic, Fields: "identifier,address,payload"}
		subs := r.subscribeOn(o, api(2), api(3))
		o.API = api(1)
		pub := r.publish(o, alice, wsclient.StateReady)
		says := []string{"first", "second"}
		for _, say := range says {
			if err := pub.SendSOC(alice.signer, swip60Topic(say), []byte(say)); err != nil {
				t.Fatal(err)
			}
		}
		for j, s := range subs {
			for _, say := range says {
				id := swip60Topic(say)
				addr, _ := wsclient.GSOCAddress(id, alice.addr)
				if m := r.next(s); string(m.Payload) != say || !bytes.Equal(m.ID, id) || !bytes.Equal(m.Address, addr) {
					t.Fatalf("node-%d: got %q id %x address %x, want %q", j+2, m.Payload, m.ID, m.Address, say)
				}
			}
		}
		r.atBroker(api(0), o, 2, nil)
	})
}

// startSWIP60Cluster starts `dev --nodes 4` on loopback ports and stops it
// when the test ends.
func startSWIP60Cluster(t *testing.T) devCluster {
	t.Helper()
	return startDevClusterArgs(t, "--nodes", "4")
}

// swip60Key is a dApp's key: it signs claims, messages and service SOCs.
type swip60Key struct {
	signer crypto.Signer
	addr   []byte
}

func newSWIP60Key(t *testing.T) swip60Key {
	t.Helper()
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	s := crypto.NewDefaultSigner(pk)
	a, err := s.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	return swip60Key{signer: s, addr: a.Bytes()}
}

// swip60Topic is a 32-byte topic or id named by s (a mnemonic topic).
func swip60Topic(s string) []byte {
	h, _ := crypto.LegacyKeccak256([]byte(s))
	return h
}

// service is a service chunk the admin's dApp signs: its kind, index and
// roster.
type service struct {
	kind       string
	index      uint64
	publishers [][]byte
}

func roster(index uint64, pubs ...swip60Key) service {
	svc := service{kind: wsclient.KindRoster, index: index}
	for _, p := range pubs {
		svc.publishers = append(svc.publishers, p.addr)
	}
	return svc
}

func eos() service { return service{kind: wsclient.KindEndOfStream} }

// swip60Run is one configuration's run: its deadline, against which every
// wait on a frame is made, and its sessions, closed when it ends.
type swip60Run struct {
	t   *testing.T
	ctx context.Context
}

func newSWIP60Run(t *testing.T) *swip60Run {
	ctx, cancel := context.WithTimeout(context.Background(), swip60Deadline)
	t.Cleanup(cancel)
	return &swip60Run{t: t, ctx: ctx}
}

// subscribeOn opens a receiving session of o on each node API, in order.
func (r *swip60Run) subscribeOn(o wsclient.Options, apis ...string) []*wsclient.Session {
	r.t.Helper()
	var out []*wsclient.Session
	for _, a := range apis {
		o.API = a
		s, err := wsclient.Subscribe(r.ctx, o)
		if err != nil {
			r.t.Fatalf("subscribe on %s: %v", a, err)
		}
		r.t.Cleanup(func() { _ = s.Close() })
		out = append(out, s)
	}
	return out
}

// publish opens a session publishing as k and checks the state it opened in
// ("" for either).
func (r *swip60Run) publish(o wsclient.Options, k swip60Key, state string) *wsclient.Session {
	r.t.Helper()
	s, err := wsclient.Publish(r.ctx, o, k.signer)
	if err != nil {
		r.t.Fatalf("publish as %x on %s: %v", k.addr, o.API, err)
	}
	r.t.Cleanup(func() { _ = s.Close() })
	if state != "" && s.State() != state {
		r.t.Fatalf("%x on %s opened %q, want %q", k.addr, o.API, s.State(), state)
	}
	return s
}

// claimed checks that the node handed s's dApp its stream's challenge
// (SWIP-74 Rev 8: the session claims with an AUTH under it when it may).
func (r *swip60Run) claimed(s *wsclient.Session) {
	r.t.Helper()
	if f := r.await(s, "challenge"); f["challenge"] == nil || f["seq"] != float64(1) {
		r.t.Fatalf("challenge %v", f)
	}
}

func (r *swip60Run) await(s *wsclient.Session, typ string) map[string]any {
	r.t.Helper()
	f, err := s.Await(r.ctx, typ)
	if err != nil {
		r.t.Fatal(err)
	}
	return f
}

// roster waits for s's service frame of index and checks it names exactly
// pubs.
func (r *swip60Run) roster(s *wsclient.Session, index uint64, pubs ...swip60Key) {
	r.t.Helper()
	v, err := s.AwaitService(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	if v.Kind != wsclient.KindRoster || v.Index != index || v.Gap || len(v.Publishers) != len(pubs) {
		r.t.Fatalf("service %+v, want roster %d naming %d", v, index, len(pubs))
	}
	for _, p := range pubs {
		if !v.Names(p.addr) {
			r.t.Fatalf("roster %d does not name %x", index, p.addr)
		}
	}
}

// post signs svc as the admin of its publishing session sa, under sa's
// stream's challenge, and posts it through sa's node.
func (r *swip60Run) post(sa *wsclient.Session, svc service) {
	r.t.Helper()
	if err := sa.PostService(r.ctx, svc.kind, svc.index, svc.publishers); err != nil {
		r.t.Fatal(err)
	}
}

func (r *swip60Run) next(s *wsclient.Session) wsclient.Message {
	r.t.Helper()
	m, err := s.NextMessage(r.ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	return m
}

func (r *swip60Run) payload(s *wsclient.Session, want string) wsclient.Message {
	r.t.Helper()
	m := r.next(s)
	if string(m.Payload) != want {
		r.t.Fatalf("got %q, want %q", m.Payload, want)
	}
	return m
}

// payloads reads len(want) messages and checks their payloads are want, in
// any order: messages of two publishers reach the broker on two paths.
func (r *swip60Run) payloads(s *wsclient.Session, want ...string) {
	r.t.Helper()
	var got []string
	for range want {
		got = append(got, string(r.next(s).Payload))
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		r.t.Fatalf("got %q, want %q", got, want)
	}
}

// atBroker checks the broker's entry for o's cohort in its GET /pubsub/:
// it accepted accepted messages and service SOCs, and counted at most
// counters of each silent outcome and none of any other (no invalid
// publication, no claim timeout, no queue reset).
func (r *swip60Run) atBroker(brokerAPI string, o wsclient.Options, accepted uint64, counters map[string]uint64) {
	r.t.Helper()
	req, err := http.NewRequestWithContext(r.ctx, http.MethodGet, brokerAPI+"/pubsub/", nil)
	if err != nil {
		r.t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	var l struct {
		Topics []struct {
			TopicAddress string            `json:"topicAddress"`
			Role         string            `json:"role"`
			Admin        string            `json:"admin"`
			Accepted     uint64            `json:"accepted"`
			Counters     map[string]uint64 `json:"counters"`
		} `json:"topics"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		r.t.Fatalf("GET /pubsub/ at the broker: %s: %v", resp.Status, err)
	}
	for _, e := range l.Topics {
		if e.Role != "broker" || e.TopicAddress != hex.EncodeToString(o.Topic) || e.Admin != hex.EncodeToString(o.Admin) {
			continue
		}
		for name, n := range e.Counters {
			if n > counters[name] {
				r.t.Errorf("the broker counted %s %d, want at most %d", name, n, counters[name])
			}
		}
		if e.Accepted != accepted {
			r.t.Fatalf("the broker accepted %d, want %d", e.Accepted, accepted)
		}
		return
	}
	r.t.Fatalf("the broker lists no cohort of topic %x under admin %x", o.Topic, o.Admin)
}

// ended checks that s gets the admin's EOS of index, then the
// close frame 1000 that ends the cohort attributably.
func (r *swip60Run) ended(s *wsclient.Session, index uint64) {
	r.t.Helper()
	v, err := s.AwaitService(r.ctx)
	if err != nil || v.Kind != wsclient.KindEndOfStream || v.Index != index {
		r.t.Fatalf("service %+v (%v), want EOS %d", v, err, index)
	}
	for err == nil {
		_, _, err = s.Next(r.ctx) // what was queued before the end, then the close
	}
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure || !strings.Contains(ce.Text, "end of stream") {
		r.t.Fatalf("after EOS: %v, want close 1000 end of stream", err)
	}
}
