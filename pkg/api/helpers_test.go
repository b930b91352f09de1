// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/bzz"
	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/ethersphere/bps/pkg/session/mock"
	"github.com/gorilla/websocket"
	lcrypto "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// waitTimeout bounds every wait; it is a deadline for a test that has
// already failed, never a synchronisation.
const waitTimeout = 20 * time.Second

// tnode is a streamtest node with a BPS service and, for client nodes, the
// bridge served over HTTP.
type tnode struct {
	*streamtest.Node
	svc  *bps.Service
	api  *api.Server
	srv  *httptest.Server
	ln   *gateListener
	conn *fakeConnector // nil for the broker
	addr string         // the multiaddr the fake connector maps to this node
}

// fakeConnector is one node's dialler: it maps a broker's multiaddr to its
// overlay. Like bee before v2.8.1 it answers a second Connect to the same
// peer with p2p.ErrAlreadyConnected and no address, so the bridge must
// remember the overlay.
type fakeConnector struct {
	peers map[string]swarm.Address // shared by the cluster, written before use
	errs  map[string]error         // what bee answers a dial of the multiaddr, written before use
	mu    sync.Mutex
	seen  map[string]bool
	// book is the node's address book (overlay hex → multiaddr), and
	// dialled, if set, links the node to the peer a first dial reaches:
	// written under mu.
	book    map[string]ma.Multiaddr
	dialled func(addr string) error
}

// Underlays answers as bee's addressbook does (api.AddressBook).
func (f *fakeConnector) Underlays(overlay swarm.Address) ([]ma.Multiaddr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a, ok := f.book[overlay.String()]; ok {
		return []ma.Multiaddr{a}, nil
	}
	return nil, errors.New("addressbook: not found")
}

func newFakeConnector(peers map[string]swarm.Address) *fakeConnector {
	return &fakeConnector{peers: peers, errs: make(map[string]error), seen: make(map[string]bool)}
}

func (f *fakeConnector) Connect(_ context.Context, addrs []ma.Multiaddr) (*bzz.Address, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	a := addrs[0].String()
	if err, ok := f.errs[a]; ok {
		return nil, err
	}
	o, ok := f.peers[a]
	if !ok {
		return nil, fmt.Errorf("no route to %s", a)
	}
	if f.seen[a] {
		return nil, p2p.ErrAlreadyConnected
	}
	if f.dialled != nil {
		if err := f.dialled(a); err != nil {
			return nil, err
		}
	}
	f.seen[a] = true
	return &bzz.Address{Overlay: o, Underlays: addrs}, nil
}

// peerMultiaddr is a loopback multiaddr with a fresh peer id.
func peerMultiaddr(t *testing.T) string {
	t.Helper()
	_, pub, err := lcrypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return "/ip4/127.0.0.1/tcp/1634/p2p/" + id.String()
}

// cluster is a broker and client nodes connected to it, each with a bridge.
type cluster struct {
	net     *streamtest.Network
	broker  *tnode
	clients []*tnode
}

func newCluster(t *testing.T, n int, o api.Options) *cluster {
	t.Helper()
	return newClusterWith(t, n, o, bps.Options{}, bps.Options{})
}

// testBackoff is the clients' backoff unless a test sets its own.
var testBackoff = bps.Options{Timing: bps.Timing{BackoffMin: time.Millisecond, BackoffMax: 2 * time.Millisecond}}

// newClusterWith is newCluster with the broker's and the clients' BPS
// options (zero: the defaults, with testBackoff for the clients).
func newClusterWith(t *testing.T, n int, o api.Options, brokerOpts, clientOpts bps.Options) *cluster {
	t.Helper()
	if clientOpts.BackoffMin == 0 {
		clientOpts.BackoffMin, clientOpts.BackoffMax = testBackoff.BackoffMin, testBackoff.BackoffMax
	}
	if brokerOpts.BackoffMin == 0 {
		brokerOpts.BackoffMin, brokerOpts.BackoffMax = testBackoff.BackoffMin, testBackoff.BackoffMax
	}
	net := streamtest.New()
	t.Cleanup(func() {
		if err := net.Close(); err != nil {
			t.Errorf("close network: %v", err)
		}
	})
	c := &cluster{net: net}
	c.broker = newNodeWith(t, net, nil, api.Options{}, brokerOpts)
	c.broker.addr = peerMultiaddr(t)
	peers := map[string]swarm.Address{c.broker.addr: c.broker.Overlay()}
	for range n {
		nd := newNodeWith(t, net, newFakeConnector(peers), o, clientOpts)
		if err := net.Connect(nd.Node, c.broker.Node); err != nil {
			t.Fatal(err)
		}
		c.clients = append(c.clients, nd)
	}
	return c
}

// newNodeWith adds a node with BPS options bo; conn nil: its bridge takes
// overlays only.
func newNodeWith(t *testing.T, net *streamtest.Network, conn *fakeConnector, o api.Options, bo bps.Options) *tnode {
	t.Helper()
	nd := net.NewNode()
	svc, err := bps.New(nd, nd.Overlay(), bo)
	if err != nil {
		t.Fatal(err)
	}
	if err := nd.AddProtocol(svc.Protocol()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := svc.Close(); err != nil {
			t.Errorf("close service: %v", err)
		}
	})
	n := serve(t, session.Node{Service: svc}, conn, o)
	n.Node, n.svc = nd, svc
	return n
}

// serve is a node without a network whose bridge runs over p with options
// o; conn nil: its bridge takes overlays only.
func serve(t *testing.T, p api.Protocol, conn *fakeConnector, o api.Options) *tnode {
	t.Helper()
	var c api.Connector
	if conn != nil {
		c = conn
	}
	srv, err := api.NewWith(p, c, nil, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("close api: %v", err)
		}
	})
	hs := httptest.NewUnstartedServer(srv)
	ln := &gateListener{Listener: hs.Listener, conns: make(map[string]*gateConn)}
	hs.Listener = ln
	hs.Start()
	t.Cleanup(hs.Close)
	return &tnode{api: srv, srv: hs, ln: ln, conn: conn}
}

// newMockCluster is newCluster without a network: one client node whose
// bridge runs over svc (pkg/session/mock), and a broker that is only the
// multiaddr the client's connector maps to an overlay.
func newMockCluster(t *testing.T, o api.Options, svc *mock.Service) *cluster {
	t.Helper()
	broker := &tnode{addr: peerMultiaddr(t)}
	peers := map[string]swarm.Address{broker.addr: swarm.RandAddress(t)}
	return &cluster{broker: broker, clients: []*tnode{serve(t, svc, newFakeConnector(peers), o)}}
}

// gateListener records the connections it accepts, by remote address, so a
// test can hold one's writes: a dApp that stops reading, deterministically.
type gateListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[string]*gateConn
}

func (l *gateListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	gc := &gateConn{Conn: c, closed: make(chan struct{})}
	l.mu.Lock()
	l.conns[c.RemoteAddr().String()] = gc
	l.mu.Unlock()
	return gc, nil
}

// conn is the server side of the client connection ws.
func (l *gateListener) conn(t *testing.T, ws *websocket.Conn) *gateConn {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	gc := l.conns[ws.UnderlyingConn().LocalAddr().String()]
	if gc == nil {
		t.Fatal("server side of the connection not found")
	}
	return gc
}

type gateConn struct {
	net.Conn
	mu     sync.Mutex
	gate   chan struct{} // non-nil: writes wait
	once   sync.Once
	closed chan struct{}
}

func (c *gateConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	g := c.gate
	c.mu.Unlock()
	if g != nil {
		select {
		case <-g:
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
	return c.Conn.Write(p)
}

func (c *gateConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// hold makes writes wait until release.
func (c *gateConn) hold() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gate = make(chan struct{})
}

func (c *gateConn) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.gate)
	c.gate = nil
}

// client is a dApp's WebSocket session. A publishing dApp signs every
// chunk itself under the challenge of its session's stream (SWIP-74 Rev
// 8): k, topic and challenge are what the last challenge frame told it.
type client struct {
	t  *testing.T
	ws *websocket.Conn

	k         *key
	topic     []byte
	challenge []byte
	seq       int
}

// takeChallenge reads the challenge frame of a session publishing as k and
// signs under it from now on; it returns the frame's fields.
func (c *client) takeChallenge(k key) map[string]any {
	c.t.Helper()
	m := c.control("challenge")
	c.learn(m, k)
	return m
}

// learn takes the challenge of a challenge frame m for k.
func (c *client) learn(m map[string]any, k key) {
	c.t.Helper()
	ch, err := hex.DecodeString(m["challenge"].(string))
	if err != nil || len(ch) != 32 || m["addr"] != hex.EncodeToString(k.addr) {
		c.t.Fatalf("challenge frame %v for %x", m, k.addr)
	}
	topic, err := hex.DecodeString(m["topic"].(string))
	if err != nil || len(topic) != 32 {
		c.t.Fatalf("challenge frame %v: topic", m)
	}
	seq, _ := m["seq"].(float64)
	if int(seq) <= c.seq {
		c.t.Fatalf("challenge frame %v: seq %v after %d", m, m["seq"], c.seq)
	}
	c.k, c.topic, c.challenge, c.seq = &k, topic, ch, int(seq)
}

// chunk is a chunk of kind at index wrapping payload, signed by c's key
// under its challenge: id ‖ signature ‖ span ‖ payload.
func (c *client) chunk(kind pb.Kind, index uint64, payload []byte) []byte {
	c.t.Helper()
	if c.k == nil {
		c.t.Fatal("no challenge taken: the dApp cannot sign")
	}
	data, _, err := bps.SignSOC(c.k.signer, c.k.addr, bps.SessionID(kind, c.topic, c.challenge, index), payload)
	if err != nil {
		c.t.Fatal(err)
	}
	return data
}

// frame is a chunk as the dApp sends it: kind(1) ‖ index(8, BE) ‖ soc.
func (c *client) frame(kind pb.Kind, index uint64, payload []byte) []byte {
	c.t.Helper()
	return inFrame(kind, index, c.chunk(kind, index, payload))
}

// inFrame is kind(1) ‖ index(8, BE) ‖ soc.
func inFrame(kind pb.Kind, index uint64, soc []byte) []byte {
	return append(binary.BigEndian.AppendUint64([]byte{byte(kind)}, index), soc...)
}

// auth sends the claiming AUTH (index 0, empty) under c's challenge.
func (c *client) auth() {
	c.t.Helper()
	c.send(websocket.BinaryMessage, c.frame(pb.Kind_AUTH, 0, nil))
}

// data sends DATA update index wrapping payload under c's challenge.
func (c *client) data(index uint64, payload string) {
	c.t.Helper()
	c.send(websocket.BinaryMessage, c.frame(pb.Kind_DATA, index, []byte(payload)))
}

// persist sends DATA update index wrapping payload as a persistent
// session's dApp does (SWIP-65 on Rev 8): kind ‖ index ‖ the signature of
// the update for storage — the same payload under the channel's own id
// keccak256(topic ‖ index) — ‖ the session-feed chunk.
func (c *client) persist(index uint64, payload string) {
	c.t.Helper()
	stored, _, err := bps.StorageUpdate(c.k.signer, c.k.addr, c.topic, index, []byte(payload))
	if err != nil {
		c.t.Fatal(err)
	}
	head := binary.BigEndian.AppendUint64([]byte{byte(pb.Kind_DATA)}, index)
	head = append(head, stored[swarm.HashSize:swarm.HashSize+swarm.SocSignatureSize]...)
	c.send(websocket.BinaryMessage, append(head, c.chunk(pb.Kind_DATA, index, []byte(payload))...))
}

// serviceBody is the body of POST …/service: a ROSTER naming pubs (EOS: no
// pubs) at index, signed by c's key under its challenge.
func (c *client) serviceBody(kind pb.Kind, index uint64, pubs ...key) []byte {
	c.t.Helper()
	return c.serviceBodyUnder(c.challenge, kind, index, pubs...)
}

func (c *client) serviceBodyUnder(challenge []byte, kind pb.Kind, index uint64, pubs ...key) []byte {
	c.t.Helper()
	var payload []byte
	if kind == pb.Kind_ROSTER {
		addrs := [][]byte{}
		for _, p := range pubs {
			addrs = append(addrs, p.addr)
		}
		var err error
		if payload, err = bps.RosterPayload(addrs); err != nil {
			c.t.Fatal(err)
		}
	}
	data, _, err := bps.SignSOC(c.k.signer, c.k.addr, bps.SessionID(kind, c.topic, challenge, index), payload)
	if err != nil {
		c.t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]any{"kind": kind.String(), "index": index, "challenge": hex.EncodeToString(challenge), "soc": hex.EncodeToString(data)})
	return b
}

func wsURL(n *tnode, topic string, q url.Values) string {
	return "ws" + strings.TrimPrefix(n.srv.URL, "http") + "/pubsub/" + topic + "?" + q.Encode()
}

// dial opens a session and fails the test if the upgrade is refused.
func dial(t *testing.T, n *tnode, topic string, q url.Values, h http.Header) *client {
	t.Helper()
	ws, resp, err := websocket.DefaultDialer.Dial(wsURL(n, topic, q), h)
	if err != nil {
		status := 0
		if resp != nil {
			status = resp.StatusCode
		}
		t.Fatalf("dial %s: %v (status %d)", topic, err, status)
	}
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close()
	}
	t.Cleanup(func() { _ = ws.Close() })
	return &client{t: t, ws: ws}
}

// next reads the next frame.
func (c *client) next() (int, []byte, error) {
	_ = c.ws.SetReadDeadline(time.Now().Add(waitTimeout))
	return c.ws.ReadMessage()
}

// binary reads the next frame and fails unless it is binary.
func (c *client) binary() []byte {
	c.t.Helper()
	typ, b, err := c.next()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	if typ != websocket.BinaryMessage {
		c.t.Fatalf("got a %d frame %q, want binary", typ, b)
	}
	return b
}

// control reads the next frame and fails unless it is a text frame of type
// want; it returns its fields.
func (c *client) control(want string) map[string]any {
	c.t.Helper()
	typ, b, err := c.next()
	if err != nil {
		c.t.Fatalf("read %s: %v", want, err)
	}
	if typ != websocket.TextMessage {
		c.t.Fatalf("got a binary frame, want %s", want)
	}
	m := make(map[string]any)
	if err := json.Unmarshal(b, &m); err != nil {
		c.t.Fatalf("control frame %q: %v", b, err)
	}
	if m["type"] != want {
		c.t.Fatalf("got %s, want %s", b, want)
	}
	return m
}

func (c *client) send(typ int, b []byte) {
	c.t.Helper()
	if err := c.ws.WriteMessage(typ, b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// closed reads until the session ends and returns the close frame, skipping
// what was queued before it; it then closes the client's side.
func (c *client) closed() *websocket.CloseError {
	c.t.Helper()
	defer c.ws.Close()
	for {
		_, _, err := c.next()
		if err == nil {
			continue
		}
		var ce *websocket.CloseError
		if !errors.As(err, &ce) {
			c.t.Fatalf("session ended without a close frame: %v", err)
		}
		return ce
	}
}

func (c *client) expectClose(code int, reason string) {
	c.t.Helper()
	ce := c.closed()
	if ce.Code != code || !strings.Contains(ce.Text, reason) {
		c.t.Fatalf("closed with %d %q, want %d containing %q", ce.Code, ce.Text, code, reason)
	}
}

// key is a publisher identity.
type key struct {
	signer crypto.Signer
	addr   []byte
}

func newKey(t *testing.T) key {
	t.Helper()
	pk, err := crypto.GenerateSecp256k1Key()
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

func keccak(b []byte) []byte {
	h, _ := crypto.LegacyKeccak256(b)
	return h
}

// feedFrame is update index of k's feed on topic under implicit
// FEED_TOPIC, as a dApp sends it: kind(1) ‖ index(8, BE) ‖ soc, the soc
// under the channel's own id keccak256(topic ‖ index).
func feedFrame(t *testing.T, k key, topic []byte, index uint64, payload string) []byte {
	t.Helper()
	return inFrame(pb.Kind_DATA, index, socData(t, k, bps.FeedID(topic, index), payload))
}

// gsoc is a GSOC: a shared key and an id; its SOC address is the topic.
type gsoc struct {
	key  key
	id   []byte
	addr swarm.Address
}

func newGSOC(t *testing.T, name string) gsoc {
	t.Helper()
	k := newKey(t)
	id := keccak([]byte(name))
	a, err := soc.CreateAddress(id, k.addr)
	if err != nil {
		t.Fatal(err)
	}
	return gsoc{key: k, id: id, addr: a}
}

// frame is a GSOC message as bee-js sends and receives it: signature ‖
// span ‖ payload.
func (g gsoc) frame(t *testing.T, payload string) []byte {
	t.Helper()
	w, err := cac.New([]byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	ch, err := soc.New(g.id, w).Sign(g.key.signer)
	if err != nil {
		t.Fatal(err)
	}
	return ch.Data()[swarm.HashSize:]
}

func (g gsoc) topic() string { return g.addr.String() }

// publishQuery is the GSOC client's publishing query.
func (g gsoc) publishQuery(peer string) url.Values {
	return url.Values{"peer": {peer}, "gsoc-eth-address": {hex.EncodeToString(g.key.addr)}, "gsoc-topic": {hex.EncodeToString(g.id)}}
}

// topics fetches GET /pubsub/.
func topics(t *testing.T, n *tnode) []map[string]any {
	t.Helper()
	resp, err := http.Get(n.srv.URL + "/pubsub/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /pubsub/: %s", resp.Status)
	}
	var body struct {
		Topics []map[string]any `json:"topics"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return body.Topics
}

// topicEntry finds the entry of role for topic.
func topicEntry(t *testing.T, n *tnode, topic []byte, role string) map[string]any {
	t.Helper()
	for _, e := range topics(t, n) {
		if e["topicAddress"] == hex.EncodeToString(topic) && e["role"] == role {
			return e
		}
	}
	t.Fatalf("no %s entry for topic %x", role, topic)
	return nil
}

func cohortOf(t *testing.T, broker *tnode, topic []byte) bps.CohortInfo {
	t.Helper()
	for _, c := range broker.svc.Cohorts() {
		if string(c.Spec.Topic) == string(topic) {
			return c
		}
	}
	t.Fatalf("no cohort for topic %x", topic)
	return bps.CohortInfo{}
}

// spec is a cohort spec as query parameters.
func spec(peer, binding string, admin *key, extra ...string) url.Values {
	q := url.Values{"peer": {peer}, "binding": {binding}}
	if admin != nil {
		q.Set("admin", hex.EncodeToString(admin.addr))
	}
	for i := 0; i+1 < len(extra); i += 2 {
		q.Set(extra[i], extra[i+1])
	}
	return q
}

// as is q with addr set to k's address.
func as(q url.Values, k key) url.Values {
	out := url.Values{}
	for name, v := range q {
		out[name] = v
	}
	out.Set("addr", hex.EncodeToString(k.addr))
	return out
}

// socData is a SOC of k under id wrapping payload, whole: id ‖ signature ‖
// span ‖ payload — the frame a dApp sends where each frame carries its id.
func socData(t *testing.T, k key, id []byte, payload string) []byte {
	t.Helper()
	data, _, err := bps.SignSOC(k.signer, k.addr, id, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// postService posts a service chunk and returns the status and the JSON body.
func postService(t *testing.T, n *tnode, topic string, q url.Values, body []byte) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(n.srv.URL+"/pubsub/"+topic+"/service?"+q.Encode(), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := make(map[string]any)
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("POST service: %s: %v", resp.Status, err)
	}
	return resp.StatusCode, out
}

// relay posts a service chunk and fails unless it is relayed.
func relay(t *testing.T, n *tnode, topic string, q url.Values, body []byte, index uint64) {
	t.Helper()
	code, out := postService(t, n, topic, q, body)
	if code != http.StatusOK || out["index"] != float64(index) {
		t.Fatalf("POST service: %d %v, want 200 with index %d", code, out, index)
	}
}

// awaitControl reads text frames, skipping waiting frames, until one of
// type want.
func (c *client) awaitControl(want string) map[string]any {
	c.t.Helper()
	for {
		typ, b, err := c.next()
		if err != nil {
			c.t.Fatalf("read %s: %v", want, err)
		}
		if typ != websocket.TextMessage {
			c.t.Fatalf("got a binary frame %q, want %s", b, want)
		}
		m := make(map[string]any)
		if err := json.Unmarshal(b, &m); err != nil {
			c.t.Fatalf("control frame %q: %v", b, err)
		}
		if m["type"] == want {
			return m
		}
		if m["type"] != "waiting" {
			c.t.Fatalf("got %s, want %s", b, want)
		}
	}
}

// service reads a service frame and checks its kind, index and roster.
func (c *client) service(kind string, index uint64, pubs ...key) map[string]any {
	c.t.Helper()
	m := c.control("service")
	var want []string
	for _, p := range pubs {
		want = append(want, hex.EncodeToString(p.addr))
	}
	var got []string
	for _, p := range m["publishers"].([]any) {
		got = append(got, p.(string))
	}
	slices.Sort(want)
	slices.Sort(got)
	if m["kind"] != kind || m["index"] != float64(index) || !slices.Equal(got, want) || m["gap"] != false {
		c.t.Fatalf("service frame %v, want %s %d %v", m, kind, index, want)
	}
	return m
}

// payload reads a binary frame and checks it is want (the default fields).
func (c *client) payload(want string) {
	c.t.Helper()
	if got := c.binary(); string(got) != want {
		c.t.Fatalf("got %q, want %q", got, want)
	}
}

// cohortBy finds the broker's cohort of topic under admin (nil: implicit).
func cohortBy(t *testing.T, broker *tnode, topic []byte, admin []byte) bps.CohortInfo {
	t.Helper()
	for _, c := range broker.svc.Cohorts() {
		if bytes.Equal(c.Spec.Topic, topic) && bytes.Equal(c.Spec.Admin, admin) {
			return c
		}
	}
	t.Fatalf("no cohort for topic %x under %x", topic, admin)
	return bps.CohortInfo{}
}

// notBlocklisted fails if the broker blocklisted n.
func notBlocklisted(t *testing.T, broker, n *tnode) {
	t.Helper()
	if blocked, _ := broker.Blocklisted(n.Overlay()); blocked {
		t.Fatalf("the broker blocklisted node %s", n.Overlay())
	}
}
