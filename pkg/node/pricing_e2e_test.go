// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node"
)

// pricedPlugin is bpsPlugin built with bee's accounting from the node, with
// prices; it keeps the accounting for the test to wait on.
type pricedPlugin struct {
	bpsPlugin
	acc accounting.Interface
}

func pricedFactory(prices bps.Prices, peers *peerSet) node.PluginFactory {
	return settledFactory(prices, bps.Settlement{}, peers)
}

// settledFactory is pricedFactory settling as st says.
func settledFactory(prices bps.Prices, st bps.Settlement, peers *peerSet) node.PluginFactory {
	return tracedFactory(prices, st, peers, nil)
}

// tracedFactory is settledFactory with tr observing the service's events.
func tracedFactory(prices bps.Prices, st bps.Settlement, peers *peerSet, tr bps.Tracer) node.PluginFactory {
	return func(env node.PluginEnv) (node.Plugin, error) {
		o := bps.Options{Pricing: bps.Pricing{Prices: prices, Settlement: st}, Deps: bps.Deps{Accounting: env.Accounting, Tracer: tr}}
		pl, err := bpsFactory(o, peers)(env)
		if err != nil {
			return nil, err
		}
		return pricedPlugin{bpsPlugin: pl.(bpsPlugin), acc: env.Accounting}, nil
	}
}

// Test prices: ten times bee's base price a delivery, twice a hop.
var e2ePrices = bps.Prices{Delivery: 10 * bps.BeeBasePrice, Publish: 2 * bps.BeeBasePrice}

// e2eWait bounds a real-node test's wait for a balance to reach what the
// test says it must: long enough that the machine's load never decides
// the verdict (the balances settle within a settlement interval, 1 s, on
// an idle machine), short of the test binary's timeout.
const e2eWait = time.Minute

// leaves records the streams that left cohorts at a node (EventLeave):
// the broker traces one once the stream's meter has applied what it held.
type leaves struct {
	mu     sync.Mutex
	gone   map[string]error
	notify chan struct{}
}

func newLeaves() *leaves { return &leaves{gone: make(map[string]error), notify: make(chan struct{})} }

func (l *leaves) Trace(e bps.Event) {
	if e.Kind != bps.EventLeave {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.gone[e.Peer.ByteString()] = e.Err
	close(l.notify)
	l.notify = make(chan struct{})
}

// wait waits until a stream of peer left, and returns its error.
func (l *leaves) wait(ctx context.Context, t *testing.T, peer swarm.Address) error {
	t.Helper()
	for {
		l.mu.Lock()
		err, ok := l.gone[peer.ByteString()]
		notify := l.notify
		l.mu.Unlock()
		if ok {
			return err
		}
		select {
		case <-notify:
		case <-ctx.Done():
			t.Fatalf("no stream of %s left: %v", peer, ctx.Err())
		}
	}
}

// TestPricingOnBeeAccounting: on real bee nodes (pseudosettle, no swap), a
// full-node subscriber and a light-node publisher both charge with BPS
// prices; a light-node subscriber keeps no BPS ledger — it never settles
// its BPS debt. After n updates, bee's own GET /balances at the broker and at
// each payer shows exactly n × Delivery for the subscriber and
// n × Publish × 1 for the publisher (all below bee's early-payment
// threshold: nothing was settled), the same at both ends; the debtor got
// exactly the deliveries its debt bound (bee's payment threshold for a
// light node) allows, each charged, and no more; the payer received every
// update.
func TestPricingOnBeeAccounting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts four bee nodes")
	}
	chain := startChain(t)
	bc := testConfig(t, "broker", chain)
	bc.FullNode = true
	left := newLeaves()
	bc.Plugin = tracedFactory(e2ePrices, bps.Settlement{}, nil, left)
	broker := startNode(t, bc)
	underlays, err := broker.Underlays()
	if err != nil || len(underlays) == 0 {
		t.Fatalf("broker underlays %v: %v", underlays, err)
	}
	brokerAcc := broker.Plugin().(pricedPlugin).acc

	start := func(name string, full bool, factory func(*peerSet) node.PluginFactory) *node.Node {
		peers := newPeerSet()
		c := testConfig(t, name, chain)
		c.FullNode = full
		c.Plugin = factory(peers)
		for _, u := range underlays {
			c.Bootnodes = append(c.Bootnodes, u.String())
		}
		n := startNode(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := peers.wait(ctx, broker.Overlay()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// bee connects a peer's accounting on a goroutine of its
		// pseudosettle hook, with no event to wait for: until it has, a
		// charge fails ("connection not initialized yet").
		waitAccounting(t, brokerAcc, n.Overlay())
		return n
	}
	priced := func(p *peerSet) node.PluginFactory { return pricedFactory(e2ePrices, p) }
	free := func(p *peerSet) node.PluginFactory { return bpsFactory(bps.Options{}, p) }
	payer := start("payer", true, priced)
	publisher := start("publisher", false, priced)
	debtor := start("debtor", false, free)
	waitAccounting(t, payer.Plugin().(pricedPlugin).acc, broker.Overlay())
	waitAccounting(t, publisher.Plugin().(pricedPlugin).acc, broker.Overlay())

	before := func(n *node.Node, peer swarm.Address) *big.Int { return balanceOf(t, n, peer) }
	b0 := map[string]*big.Int{
		"broker/payer":     before(broker, payer.Overlay()),
		"broker/publisher": before(broker, publisher.Overlay()),
		"broker/debtor":    before(broker, debtor.Overlay()),
		"payer/broker":     before(payer, broker.Overlay()),
		"publisher/broker": before(publisher, broker.Overlay()),
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := newFeedKey(t)
	sp := feedSpecOf(t, "pricing", admin)
	svcOf := func(n *node.Node) *bps.Service {
		switch p := n.Plugin().(type) {
		case pricedPlugin:
			return p.Service
		case bpsPlugin:
			return p.Service
		}
		t.Fatalf("plugin %T", n.Plugin())
		return nil
	}
	psub, err := svcOf(payer).Subscribe(ctx, broker.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = psub.Close() }()
	dsub, err := svcOf(debtor).Subscribe(ctx, broker.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dsub.Close() }()
	pub, err := svcOf(publisher).Publish(ctx, broker.Overlay(), sp, bps.PublishOptions{Addr: admin.addr, Signer: admin.signer})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pub.Close() }()

	// n updates: more than the debtor's bound allows (13), and few enough
	// that the light publisher's debt, (n+1) × Publish = 380,000, stays
	// below the 450,000 at which bee refreshes a light node's debt by
	// pseudosettle: no refresh moves a balance here. (A refresh's
	// acknowledgement that reaches the payer more than 2 s after the payee
	// stamped it — a loaded machine — is refused by the payer after the
	// payee applied it, ErrTimeOutOfSyncRecent, and the two ends part by
	// bee's own doing: a verdict that would depend on the load.)
	const n = 18
	debtorGot := 0
	for i := range n {
		want := fmt.Sprintf("update %d", i)
		if err := pub.PublishUpdate(ctx, uint64(i), []byte(want)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		receive(ctx, t, "payer", psub.C(), want)
	}
	// The debtor's subscription ends when the broker ends its stream
	// unpaid; a broker that never does is a failure, said within the
	// test's deadline, not a hang — and a delivery past what the debtor's
	// bound allows (the payment threshold bee gives a light node here,
	// 13.5M / 10) is one at once.
	const threshold = 1_350_000
	room := (threshold - b0["broker/debtor"].Int64()) / int64(e2ePrices.Delivery)
	for draining := true; draining; {
		select {
		case _, ok := <-dsub.C():
			if !ok {
				draining = false
				break
			}
			if debtorGot++; int64(debtorGot) > room {
				t.Fatalf("the debtor received %d deliveries, past the %d its bound %d allows", debtorGot, room, threshold)
			}
		case <-ctx.Done():
			pa, err := brokerAcc.PeerAccounting()
			t.Fatalf("the debtor's subscription did not end after %d deliveries: the broker owed %v by it, its threshold given %v (%v), its charges %+v",
				debtorGot, balanceOf(t, broker, debtor.Overlay()), pa[debtor.Overlay().String()].ThresholdGiven, err, svcOf(broker).Charges())
		}
	}
	// The debtor keeps no BPS ledger, so nothing on its side knows why:
	// bee at the broker reset the stream and closed the connection (its
	// blocklist), which the debtor reads as a reset or as the end. The
	// broker traces the stream's Leave once its meter has applied what it
	// held: its balance with the debtor is final then, whenever the
	// debtor saw the reset.
	t.Logf("the debtor received %d deliveries; its subscription ended with: %v", debtorGot, dsub.Err())
	t.Logf("the debtor's stream left the broker with: %v", left.wait(ctx, t, debtor.Overlay()))

	delta := func(key string, n *node.Node, peer swarm.Address) int64 {
		return new(big.Int).Sub(balanceOf(t, n, peer), b0[key]).Int64()
	}
	// Both ends settle in batches (pkg/bps/ledger.go): the broker's
	// balances reach exactly the prices once its meters have applied — at
	// most a second after the last frame; a child keeps a margin while its
	// stream lives, which Settle applies. Nothing is refreshed (above):
	// both ends move by exactly the prices. (That a refresh is accepted in
	// full — a child's ledger never stands above its parent's — is
	// pkg/bps's TestPricingRefreshAcceptedInFull, on bee's accounting.)
	// The publisher writes up its claiming AUTH (SWIP-74 Rev 8: our
	// publishers' first frame, a Broadcast priced as any) and n updates.
	wantSub, wantPub := int64(n*e2ePrices.Delivery), int64((n+1)*e2ePrices.Publish)
	waitBalance(t, broker, payer.Overlay(), new(big.Int).Add(b0["broker/payer"], big.NewInt(wantSub)))
	waitBalance(t, broker, publisher.Overlay(), new(big.Int).Add(b0["broker/publisher"], big.NewInt(wantPub)))
	svcOf(payer).Settle()
	svcOf(publisher).Settle()
	for _, c := range []struct {
		name  string
		child *node.Node
		key   string
	}{{"payer", payer, "payer/broker"}, {"publisher", publisher, "publisher/broker"}} {
		deadline := time.Now().Add(e2eWait)
		for {
			cb := new(big.Int).Sub(balanceOf(t, c.child, broker.Overlay()), b0[c.key])
			bb := new(big.Int).Sub(balanceOf(t, broker, c.child.Overlay()), b0["broker/"+c.name])
			if cb.Sign() <= 0 && new(big.Int).Neg(cb).Cmp(bb) == 0 {
				t.Logf("%s: the broker's balance moved by %v, the %s's by %v", c.name, bb, c.name, cb)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the broker's balance moved by %v, the %s's by %v: the two ends disagree", c.name, bb, c.name, cb)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if got := new(big.Int).Sub(balanceOf(t, payer, broker.Overlay()), b0["payer/broker"]); got.Int64() != -wantSub {
		t.Errorf("the payer's balance moved by %v, want %d", got, -wantSub)
	}

	// The debtor acknowledges what it takes (receipts) and never pays:
	// the broker writes it no delivery that would take its debt past the
	// payment threshold bee gave it (a light node's: 13.5M / 10), 80 % of
	// bee's disconnect limit, and ends its stream unpaid once it has not
	// paid for five seconds. What it got does not depend on when bee
	// refreshes (nobody refreshes it): the deliveries the bound allows,
	// each charged.
	owed := delta("broker/debtor", broker, debtor.Overlay())
	charged := owed / int64(e2ePrices.Delivery)
	if owed%int64(e2ePrices.Delivery) != 0 || charged != room {
		t.Errorf("the debtor owes the broker %d (%d deliveries), want the %d deliveries the bound %d allows", owed, charged, room, threshold)
	}
	if int64(debtorGot) != charged {
		t.Errorf("the debtor received %d deliveries, charged %d", debtorGot, charged)
	}
	if charged >= n {
		t.Errorf("the debtor was charged for all %d updates: never stopped", n)
	}
}

// TestPricingBatchedOnBeeAccounting: on real bee nodes at BPS's default
// prices, charges settle in batches of 64 frames (and when a stream ends;
// the interval is an hour here, so that nothing else moves a balance): the
// broker's GET /balances for a full-node subscriber does not move for its
// first 63 deliveries and moves by exactly 64 × the price at the 64th's
// receipt;
// the subscriber's own does not move while its stream lives (it keeps its
// margin), and both move by exactly n × the price once its subscription
// ended; the light publisher's likewise by n × Publish.
func TestPricingBatchedOnBeeAccounting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three bee nodes")
	}
	prices, st := bps.DefaultPrices(), bps.Settlement{Interval: time.Hour}
	chain := startChain(t)
	bc := testConfig(t, "broker", chain)
	bc.FullNode = true
	bc.Plugin = settledFactory(prices, st, nil)
	broker := startNode(t, bc)
	underlays, err := broker.Underlays()
	if err != nil || len(underlays) == 0 {
		t.Fatalf("broker underlays %v: %v", underlays, err)
	}
	brokerAcc := broker.Plugin().(pricedPlugin).acc
	start := func(name string, full bool) *node.Node {
		peers := newPeerSet()
		c := testConfig(t, name, chain)
		c.FullNode = full
		c.Plugin = settledFactory(prices, st, peers)
		for _, u := range underlays {
			c.Bootnodes = append(c.Bootnodes, u.String())
		}
		n := startNode(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := peers.wait(ctx, broker.Overlay()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		waitAccounting(t, brokerAcc, n.Overlay())
		waitAccounting(t, n.Plugin().(pricedPlugin).acc, broker.Overlay())
		return n
	}
	payer, publisher := start("payer", true), start("publisher", false)
	b0 := map[string]*big.Int{
		"broker/payer":     balanceOf(t, broker, payer.Overlay()),
		"broker/publisher": balanceOf(t, broker, publisher.Overlay()),
		"payer/broker":     balanceOf(t, payer, broker.Overlay()),
		"publisher/broker": balanceOf(t, publisher, broker.Overlay()),
	}
	moved := func(key string, n *node.Node, peer swarm.Address) int64 {
		return new(big.Int).Sub(balanceOf(t, n, peer), b0[key]).Int64()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := newFeedKey(t)
	sp := feedSpecOf(t, "batched pricing", admin)
	psub, err := payer.Plugin().(pricedPlugin).Subscribe(ctx, broker.Overlay(), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = psub.Close() }()
	pub, err := publisher.Plugin().(pricedPlugin).Publish(ctx, broker.Overlay(), sp, bps.PublishOptions{Addr: admin.addr, Signer: admin.signer})
	if err != nil {
		t.Fatal(err)
	}
	const n, batch = 100, bps.DefaultSettleFrames
	for i := range n {
		want := fmt.Sprintf("update %d", i)
		if err := pub.PublishUpdate(ctx, uint64(i), []byte(want)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		// The broker charges the payer's receipts (one every 16
		// deliveries, receipt.go) and applies once it holds a batch: the
		// receipt the payer sends at its 64th delivery makes the first
		// batch, and the 100 make no second. The payer, a child, keeps
		// its margin (80,000 units: more than 100 deliveries) until its
		// stream ends: its ledger never says it owes more than the
		// broker's.
		receive(ctx, t, "payer", psub.C(), want)
		wantMoved := int64((i+1)/batch) * batch * int64(prices.Delivery)
		if i+1 == batch {
			waitBalance(t, broker, payer.Overlay(), new(big.Int).Add(b0["broker/payer"], big.NewInt(wantMoved)))
		}
		if got := moved("broker/payer", broker, payer.Overlay()); got != wantMoved {
			t.Fatalf("after %d deliveries the broker's balance with the payer moved by %d, want %d (batches of %d)", i+1, got, wantMoved, batch)
		}
		if got := moved("payer/broker", payer, broker.Overlay()); got != 0 {
			t.Fatalf("after %d deliveries the payer's balance moved by %d, want 0: within its margin", i+1, got)
		}
	}
	if err := pub.Close(); err != nil {
		t.Fatal(err)
	}
	// The last deliveries' receipt, written before the close (Settle),
	// so that the broker charges them all.
	payer.Plugin().(pricedPlugin).Settle()
	if err := psub.Close(); err != nil {
		t.Fatal(err)
	}
	wantSub, wantPub := int64(n*prices.Delivery), int64((n+1)*prices.Publish) // the AUTH and n updates up
	waitBalance(t, payer, broker.Overlay(), new(big.Int).Sub(b0["payer/broker"], big.NewInt(wantSub)))
	waitBalance(t, broker, payer.Overlay(), new(big.Int).Add(b0["broker/payer"], big.NewInt(wantSub)))
	waitBalance(t, publisher, broker.Overlay(), new(big.Int).Sub(b0["publisher/broker"], big.NewInt(wantPub)))
	waitBalance(t, broker, publisher.Overlay(), new(big.Int).Add(b0["broker/publisher"], big.NewInt(wantPub)))
}

// waitAccounting waits until acc has a balance for peer: bee's accounting
// connected it.
func waitAccounting(t *testing.T, acc accounting.Interface, peer swarm.Address) {
	t.Helper()
	if acc == nil {
		t.Fatal("the plugin got no accounting")
	}
	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		_, err := acc.Balance(peer)
		if err == nil {
			return
		}
		if !errors.Is(err, accounting.ErrPeerNoBalance) || time.Now().After(deadline) {
			t.Fatalf("accounting of %s: %v", peer, err)
		}
		<-tick.C
	}
}

// balanceOf is n's balance with peer from bee's GET /balances/{peer}: what
// the peer owes n (negative: what n owes it).
func balanceOf(t *testing.T, n *node.Node, peer swarm.Address) *big.Int {
	t.Helper()
	var resp struct {
		Balance string `json:"balance"`
	}
	r, err := http.Get(n.APIURL() + "/balances/" + peer.String())
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Body.Close()
	if r.StatusCode == http.StatusNotFound {
		return new(big.Int)
	}
	getJSON(t, n.APIURL()+"/balances/"+peer.String(), &resp)
	b, ok := new(big.Int).SetString(resp.Balance, 10)
	if !ok {
		t.Fatalf("balance %q", resp.Balance)
	}
	return b
}

// waitBalance waits until n's balance with peer is want: the broker debits
// after its write, which the receiver may read before.
func waitBalance(t *testing.T, n *node.Node, peer swarm.Address, want *big.Int) {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		got := balanceOf(t, n, peer)
		if got.Cmp(want) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("balance of %s at %s: %s, want %s", peer, n.Overlay(), got, want)
		}
		<-tick.C
	}
}
