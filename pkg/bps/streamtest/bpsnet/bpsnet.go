// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package bpsnet builds networks of BPS nodes on the in-memory transport of
// pkg/bps/streamtest, in the spirit of gossipsub's test helpers: build N
// nodes, connect them (Connect, ConnectAll, ConnectStar, ConnectSome), and
// assert on what subscriptions receive (AssertReceive, AssertNeverReceives).
//
// Every Node is a streamtest.Node running its own bps.Service, with its own
// overlay and its own key (a secp256k1 signer, derived from the Network's
// seed on first use). Faults come from streamtest — link latency,
// bandwidth, loss, partitions — and from Kill, Stop and Restart here, which
// also take care of the node's Service and followers.
//
// pkg/bps does not rejoin by itself: a Subscription ends when its stream
// does, and the next Subscribe waits out SWIP-74's mandatory backoff. A
// Follower is the loop a real client runs on top: subscribe, receive until
// the subscription ends, subscribe again.
//
// bpsnet imports pkg/bps, so pkg/bps's own tests (package bps_test) may use
// it but pkg/bps and streamtest may not.
//
// Ownership: the Network owns its nodes, their services and every Follower;
// Close stops the followers, closes the services and then the transport,
// and waits for all of them.
package bpsnet

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// ErrClosed is returned once the Network is closed.
var ErrClosed = errors.New("bpsnet: network closed")

// Options configure a Network.
type Options struct {
	// Seed seeds overlays, keys, link losses and ConnectSome; default 1.
	Seed int64
	// Service is the template of every node's bps.Options (NewNodesWith
	// overrides it); its Tracer, if any, is called after Tracer below.
	Service bps.Options
	// Transport are streamtest options (buffer size, link config, ...);
	// the seed is Seed.
	Transport []streamtest.Option
	// Tracer observes the protocol events of every node; it must not block.
	Tracer func(*Node, bps.Event)
}

// Network is a set of BPS nodes on one streamtest network. It is safe for
// concurrent use.
type Network struct {
	st   *streamtest.Network
	opts Options

	mu        sync.Mutex // guards everything below
	rng       *rand.Rand
	nodes     map[string]*Node // the live incarnation of every overlay
	order     []string         // overlays in creation order
	keys      uint64           // key indices handed out
	followers map[*Follower]struct{}
	closed    bool
}

// New returns an empty Network.
func New(o Options) *Network {
	if o.Seed == 0 {
		o.Seed = 1
	}
	st := streamtest.New(append(slices.Clone(o.Transport), streamtest.WithSeed(o.Seed))...)
	return &Network{
		st:        st,
		opts:      o,
		rng:       rand.New(rand.NewPCG(uint64(o.Seed), 0xb95)),
		nodes:     make(map[string]*Node),
		followers: make(map[*Follower]struct{}),
	}
}

// Transport is the streamtest network underneath: partitions, link
// configuration, statistics.
func (n *Network) Transport() *streamtest.Network { return n.st }

// Node is one BPS node: a streamtest node with its own Service and key.
// Take it down with Network.Kill, Stop or Restart, which also close its
// Service and followers; the embedded streamtest methods act on the
// transport alone.
type Node struct {
	*streamtest.Node
	net  *Network
	svc  *bps.Service
	opts bps.Options
	key  keySlot
}

// Service is the node's BPS service.
func (nd *Node) Service() *bps.Service { return nd.svc }

// Key is the node's own identity: the signer a publisher on this node signs
// updates and claims with.
func (nd *Node) Key() Key { return nd.key.get(nd.net.opts.Seed) }

// NewNode adds a node with the Network's service options.
func (n *Network) NewNode() (*Node, error) {
	nodes, err := n.NewNodesWith(1, n.opts.Service)
	if err != nil {
		return nil, err
	}
	return nodes[0], nil
}

// NewNodes adds k nodes with the Network's service options.
func (n *Network) NewNodes(k int) ([]*Node, error) {
	return n.NewNodesWith(k, n.opts.Service)
}

// NewNodesWith adds k nodes whose services use o (a broker with other
// bounds, say).
func (n *Network) NewNodesWith(k int, o bps.Options) ([]*Node, error) {
	nodes := make([]*Node, 0, k)
	for range k {
		n.mu.Lock()
		if n.closed {
			n.mu.Unlock()
			return nil, ErrClosed
		}
		idx := n.keys
		n.keys++
		n.mu.Unlock()

		nd, err := n.start(n.st.NewNode(), o, newKeySlot(idx))
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, nd)
	}
	return nodes, nil
}

// start runs a Service on st and registers the node.
func (n *Network) start(st *streamtest.Node, o bps.Options, key keySlot) (*Node, error) {
	nd := &Node{Node: st, net: n, opts: o, key: key}
	inner := o.Tracer
	if n.opts.Tracer != nil || inner != nil {
		o.Tracer = bps.TracerFunc(func(e bps.Event) {
			if n.opts.Tracer != nil {
				n.opts.Tracer(nd, e)
			}
			if inner != nil {
				inner.Trace(e)
			}
		})
	}
	svc, err := bps.New(st, st.Overlay(), o)
	if err != nil {
		return nil, err
	}
	if err := st.AddProtocol(svc.Protocol()); err != nil {
		_ = svc.Close()
		return nil, err
	}
	nd.svc = svc

	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		_ = svc.Close()
		return nil, ErrClosed
	}
	k := st.Overlay().ByteString()
	if _, ok := n.nodes[k]; !ok {
		n.order = append(n.order, k)
	}
	n.nodes[k] = nd
	n.mu.Unlock()
	return nd, nil
}

// Nodes returns the live incarnation of every node, in creation order
// (killed and stopped nodes included until restarted).
func (n *Network) Nodes() []*Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]*Node, 0, len(n.order))
	for _, k := range n.order {
		out = append(out, n.nodes[k])
	}
	return out
}

// Lookup returns the current incarnation of the node with overlay a.
func (n *Network) Lookup(a swarm.Address) (*Node, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	nd, ok := n.nodes[a.ByteString()]
	return nd, ok
}

// Connect connects a to b as if a dialed b; being connected already is not
// an error.
func (n *Network) Connect(a, b *Node) error {
	if err := n.st.Connect(a.Node, b.Node); err != nil && !errors.Is(err, p2p.ErrAlreadyConnected) {
		return fmt.Errorf("connect %s to %s: %w", a.Overlay(), b.Overlay(), err)
	}
	return nil
}

// ConnectAll connects every pair of nodes.
func (n *Network) ConnectAll(nodes []*Node) error {
	for i, a := range nodes {
		for _, b := range nodes[i+1:] {
			if err := n.Connect(a, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// ConnectStar connects every leaf to hub, the leaves dialing: the topology of
// a SWIP-74 cohort, where every member is connected to its broker.
func (n *Network) ConnectStar(hub *Node, leaves []*Node) error {
	for _, l := range leaves {
		if err := n.Connect(l, hub); err != nil {
			return err
		}
	}
	return nil
}

// ConnectSome connects every node to d others drawn from the Network's seed.
func (n *Network) ConnectSome(nodes []*Node, d int) error {
	for i, a := range nodes {
		n.mu.Lock()
		perm := n.rng.Perm(len(nodes))
		n.mu.Unlock()
		k := 0
		for _, j := range perm {
			if k == d {
				break
			}
			if j == i {
				continue
			}
			if err := n.Connect(a, nodes[j]); err != nil {
				return err
			}
			k++
		}
	}
	return nil
}

// Kill crashes nd: its links are torn down at once (its peers see resets and
// their DisconnectIn hooks run), then its followers and Service are shut
// down, unobservably since nothing reaches it any more.
func (n *Network) Kill(nd *Node) error {
	nd.Node.Kill()
	return n.shutdown(nd)
}

// Stop shuts nd down gracefully: its followers and its Service close their
// streams, then the transport waits for those streams to end (at most until
// ctx is done) and disconnects, with the hooks a disconnect runs.
func (n *Network) Stop(ctx context.Context, nd *Node) error {
	err := n.shutdown(nd)
	return errors.Join(err, nd.Node.Stop(ctx))
}

// shutdown closes the followers running on nd and its Service.
func (n *Network) shutdown(nd *Node) error {
	n.mu.Lock()
	var fs []*Follower
	for f := range n.followers {
		if f.nd == nd {
			fs = append(fs, f)
		}
	}
	n.mu.Unlock()
	for _, f := range fs {
		f.Close()
	}
	return nd.svc.Close()
}

// Restart boots nd, the current incarnation of its overlay, again after a
// Kill or Stop (killing it first if it is still up): a new Node with the same overlay, key and service options, a
// fresh Service (a new boot secret, so new challenges, and no cohorts), and
// links to the peers nd had that are still up, each peer dialing, as peers
// redial a node that came back. Followers and publishers that ran on nd are
// not restarted.
func (n *Network) Restart(nd *Node) (*Node, error) { return n.RestartWith(nd, nil) }

// RestartWith is Restart, with setup called on the new incarnation before
// any peer can reach it — where a service is configured (its accounting,
// say) before its first stream.
func (n *Network) RestartWith(nd *Node, setup func(*Node) error) (*Node, error) {
	if cur, ok := n.Lookup(nd.Overlay()); !ok || cur != nd {
		return nil, fmt.Errorf("bpsnet: restart %s: not its current incarnation", nd.Overlay())
	}
	if nd.Alive() {
		nd.Node.Kill()
	}
	if err := n.shutdown(nd); err != nil { // closing twice is harmless
		return nil, err
	}
	peers := nd.PeersAtExit()
	fresh, err := n.start(n.st.Restart(nd.Node), nd.opts, nd.key)
	if err != nil {
		return nil, err
	}
	if setup != nil {
		if err := setup(fresh); err != nil {
			return nil, err
		}
	}
	for _, p := range peers {
		peer, ok := n.Lookup(p)
		if !ok || !peer.Alive() {
			continue
		}
		if err := n.Connect(peer, fresh); err != nil && !errors.Is(err, streamtest.ErrUnreachable) {
			return nil, err
		}
	}
	return fresh, nil
}

// Close stops every follower, closes every node's Service and then the
// transport, and waits for all of them.
func (n *Network) Close() error {
	n.mu.Lock()
	n.closed = true
	fs := make([]*Follower, 0, len(n.followers))
	for f := range n.followers {
		fs = append(fs, f)
	}
	nodes := make([]*Node, 0, len(n.nodes))
	for _, k := range n.order {
		nodes = append(nodes, n.nodes[k])
	}
	n.mu.Unlock()

	for _, f := range fs {
		f.cancel()
	}
	for _, f := range fs {
		f.Close()
	}
	var errs []error
	for _, nd := range nodes {
		if err := nd.svc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close node %s: %w", nd.Overlay(), err))
		}
	}
	errs = append(errs, n.st.Close())
	return errors.Join(errs...)
}

// Key is a publisher identity.
type Key struct {
	Signer crypto.Signer
	Addr   []byte // 20-byte Ethereum address
}

// Update is DATA update index of the key's session feed in cohort sp on
// the stream whose challenge is challenge, as a frame ready to publish.
func (k Key) Update(sp *bps.Spec, challenge []byte, index uint64, payload []byte) (*pb.Broadcast, error) {
	return sp.Chunk(k.Signer, k.Addr, pb.Kind_DATA, challenge, index, payload)
}

// keySlot derives a node's key on first use: deriving a public key costs a
// scalar multiplication, which 10,000 nodes that never publish need not pay.
type keySlot struct {
	index uint64
	once  *sync.Once
	key   *Key
}

func newKeySlot(index uint64) keySlot {
	return keySlot{index: index, once: new(sync.Once), key: new(Key)}
}

func (s keySlot) get(seed int64) Key {
	s.once.Do(func() { *s.key = DeriveKey(seed, s.index) })
	return *s.key
}

// DeriveKey is the key number index of a Network seeded with seed.
func DeriveKey(seed int64, index uint64) Key {
	var b [8 + 8 + 8]byte
	copy(b[:], "bpsnet:k")
	binary.BigEndian.PutUint64(b[8:], uint64(seed))
	binary.BigEndian.PutUint64(b[16:], index)
	h, _ := crypto.LegacyKeccak256(b[:])
	signer := crypto.NewDefaultSigner(crypto.Secp256k1PrivateKeyFromBytes(h))
	addr, err := signer.EthereumAddress()
	if err != nil {
		panic(fmt.Sprintf("bpsnet: derive key: %v", err)) // a valid scalar always has an address
	}
	return Key{Signer: signer, Addr: addr.Bytes()}
}

// Topic hashes a name into a 32-byte feed topic.
func Topic(name string) []byte {
	h, _ := crypto.LegacyKeccak256([]byte(name))
	return h
}

// Spec is the SWIP-74 live-stream cohort {Topic(topic), FEED_TOPIC, admin}.
func Spec(topic string, admin Key) *bps.Spec {
	sp, err := bps.NewFeedSpec(Topic(topic), admin.Addr)
	if err != nil {
		panic(fmt.Sprintf("bpsnet: spec: %v", err)) // sizes are fixed here
	}
	return sp
}

// Subscribe joins sp at broker as a subscriber, once; see Follow for a
// subscription that rejoins.
func (nd *Node) Subscribe(ctx context.Context, broker *Node, sp *bps.Spec) (*bps.Subscription, error) {
	return nd.svc.Subscribe(ctx, broker.Overlay(), sp)
}

// Publish joins sp at broker as the publisher key, claiming with the key,
// its cursor at index.
func (nd *Node) Publish(ctx context.Context, broker *Node, sp *bps.Spec, key Key, index uint64) (*bps.Publisher, error) {
	return nd.svc.Publish(ctx, broker.Overlay(), sp, bps.PublishOptions{Addr: key.Addr, Signer: key.Signer})
}
