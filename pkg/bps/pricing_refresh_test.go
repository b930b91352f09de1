// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"context"
	"math/big"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/settlement/pseudosettle"
	statestore "github.com/ethersphere/bee/v2/pkg/statestore/mock"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// beeNode is a node of the in-memory network with bee's own accounting and
// pseudosettle on it, as bee's node wires them (pkg/node of bee v2.8.1):
// the accounting refreshes over pseudosettle's protocol, and blocklists
// through the node.
type beeNode struct {
	*tnode
	acc *accounting.Accounting
	ps  *pseudosettle.Service
}

// blocklister is the part of p2p.Service bee's accounting uses: Blocklist.
type blocklister struct {
	p2p.Service
	nd *streamtest.Node
}

func (b blocklister) Blocklist(a swarm.Address, d time.Duration, reason string) error {
	return b.nd.Blocklist(a, d, reason)
}

// noAnnounce is bee's pricing protocol, which the accounting calls only to
// announce a raised threshold.
type noAnnounce struct{}

func (noAnnounce) AnnouncePaymentThreshold(context.Context, swarm.Address, *big.Int) error {
	return nil
}

// newBeeNode starts a node whose bee accounting has payment threshold
// threshold (bee's tolerance 25 % and early payment 50 %) and refresh rate
// refresh (a tenth for light peers), priced at p.
func newBeeNode(t testing.TB, net *streamtest.Network, threshold, refresh int64, p bps.Prices, o bps.Options) *beeNode {
	t.Helper()
	nd := net.NewNode()
	store := statestore.NewStateStore()
	svc := blocklister{nd: nd}
	acc, err := accounting.NewAccounting(big.NewInt(threshold), 25, 50, log.Noop, store, noAnnounce{}, big.NewInt(refresh), 10, svc)
	if err != nil {
		t.Fatal(err)
	}
	ps := pseudosettle.New(nd, log.Noop, store, acc, big.NewInt(refresh), big.NewInt(refresh/10), svc)
	acc.SetRefreshFunc(ps.Pay)
	if err := nd.AddProtocol(ps.Protocol()); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	o.Tracer = rec
	b, err := bps.New(nd, nd.Overlay(), o)
	if err != nil {
		t.Fatal(err)
	}
	b.SetAccounting(acc, p)
	if err := nd.AddProtocol(b.Protocol()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("close service: %v", err)
		}
		_ = acc.Close()
	})
	return &beeNode{tnode: &tnode{Node: nd, svc: b, rec: rec}, acc: acc, ps: ps}
}

// TestPricingRefreshAcceptedInFull: a node that publishes and subscribes
// through a broker runs into debt with it at the default prices (1,250
// units a publication: 625 to publish at depth 1, 625 for its own
// delivery); once the debt reaches half bee's payment threshold its
// accounting pays early by pseudosettle's refresh, and the broker accepts
// what the broker's own ledger says is owed. The payer blocklists a peer
// that accepts less than the payer's ledger says (bee's "accepted lower
// payment than expected"): BPS's charges must never stand higher on the
// debtor's ledger than on its creditor's. The thresholds are bee's light
// node's (1.35 M, refreshed at 450 k/s) so that the early payment comes
// after 540 publications; the publisher waits for each delivery, as a
// publisher slower than the payment's round trip does.
func TestPricingRefreshAcceptedInFull(t *testing.T) {
	t.Parallel()
	const threshold, refresh = 1_350_000, 450_000
	net := newNetwork(t)
	broker := newBeeNode(t, net, threshold, refresh, bps.DefaultPrices(), bps.Options{})
	pubNode := newBeeNode(t, net, threshold, refresh, bps.DefaultPrices(), bps.Options{})
	if err := net.Connect(pubNode.Node, broker.Node); err != nil {
		t.Fatal(err)
	}
	admin := newKey(t)
	sp := feedSpec(t, "refresh", admin)
	s := subscribe(t, pubNode.tnode, broker.tnode, sp)
	p := publish(t, pubNode.tnode, broker.tnode, sp, admin, 0)

	perPublication := 2 * bps.DefaultPrice
	limit := 2 * threshold / perPublication // past the early payment, well short of the threshold
	paid := func() bool {
		sent, err := pubNode.ps.TotalSent(broker.Overlay())
		return err == nil && sent.Sign() > 0
	}
	n := 0
	for ; n < limit && !paid(); n++ {
		if err := p.PublishUpdate(ctxT(t), admin.signer, uint64(n), []byte("x")); err != nil {
			t.Fatalf("publication %d: %v", n, err)
		}
		select {
		case d, ok := <-s.C():
			if !ok {
				t.Fatalf("the subscription ended after %d publications: %v; blocklisted: the publishing node %v, the broker %v",
					n, s.Err(), pubNode.Blocklists(), broker.Blocklists())
			}
			if d.Index != uint64(n) {
				t.Fatalf("delivery %d, want %d", d.Index, n)
			}
		case <-time.After(waitTimeout):
			t.Fatalf("no delivery of publication %d", n)
		}
	}
	if !paid() {
		t.Fatalf("the publishing node paid nothing after %d publications", n)
	}
	// The refresh has been accepted (pseudosettle stored it); its
	// outcome is the payer's: it blocklists a peer that accepted less than
	// it expected. Publish once more: the delivery comes over the same
	// connection.
	if err := p.PublishUpdate(ctxT(t), admin.signer, uint64(n), []byte("x")); err != nil {
		t.Fatalf("publication %d after the refresh: %v", n, err)
	}
	select {
	case d, ok := <-s.C():
		if !ok || d.Index != uint64(n) {
			t.Fatalf("after the refresh: delivery %v (open %v), want %d; the subscription says %v; blocklisted: the publishing node %v, the broker %v",
				d.Index, ok, n, s.Err(), pubNode.Blocklists(), broker.Blocklists())
		}
	case <-time.After(waitTimeout):
		t.Fatalf("no delivery after the refresh; blocklisted: the publishing node %v, the broker %v", pubNode.Blocklists(), broker.Blocklists())
	}
	n++
	if bl := append(pubNode.Blocklists(), broker.Blocklists()...); len(bl) != 0 {
		t.Fatalf("after %d publications and an early payment: blocklisted %v", n, bl)
	}
	sent, _ := pubNode.ps.TotalSent(broker.Overlay())
	received, _ := broker.ps.TotalReceived(pubNode.Overlay())
	if sent.Cmp(received) != 0 {
		t.Fatalf("the publishing node paid %v, the broker received %v", sent, received)
	}

	// Once the streams end, each ledger has moved by exactly the prices,
	// less what was paid.
	_ = p.Close()
	_ = s.Close()
	owed := new(big.Int).Sub(big.NewInt(int64(n*perPublication)), sent)
	deadline := time.Now().Add(waitTimeout)
	for {
		pb, perr := pubNode.acc.Balance(broker.Overlay())
		bb, berr := broker.acc.Balance(pubNode.Overlay())
		if perr == nil && berr == nil && bb.Cmp(owed) == 0 && new(big.Int).Neg(pb).Cmp(owed) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d publications and %v paid: the broker's balance %v (%v), the publishing node's %v (%v); want %v and its negation",
				n, sent, bb, berr, pb, perr, owed)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
