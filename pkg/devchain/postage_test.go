// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package devchain_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/config"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/postage"
	"github.com/ethersphere/bee/v2/pkg/postage/batchservice"
	"github.com/ethersphere/bee/v2/pkg/postage/batchstore"
	"github.com/ethersphere/bee/v2/pkg/postage/listener"
	"github.com/ethersphere/bee/v2/pkg/statestore/mock"
	"github.com/ethersphere/bee/v2/pkg/storage/inmemstore"
	"github.com/ethersphere/bee/v2/pkg/util/abiutil"
	"github.com/ethersphere/bps/pkg/devchain"
	"golang.org/x/crypto/sha3"
)

// beePostage is bee's postage machinery as node.NewBee wires it for a full
// node: the listener on the chain's postage contract, the batch service
// feeding bee's batch store, and the postage service holding the node's
// stamp issuers. The test steps the listener (steppedBackend), so that it
// reads bee's chain state only while the listener waits: bee's batch
// service updates that state in place.
type beePostage struct {
	store   postage.Storer
	post    postage.Service
	stamper *inmemstore.Store
	backend *steppedBackend
	held    bool
}

// steppedBackend is the chain as bee's listener sees it: after each page
// of logs the listener has processed, its next BlockNumber call reports the
// page on pages and waits on next.
type steppedBackend struct {
	*ethclient.Client
	pages   chan uint64
	next    chan struct{}
	pending *uint64 // the last page's end; the listener's goroutine only
}

func (s *steppedBackend) FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	logs, err := s.Client.FilterLogs(ctx, q)
	if err == nil {
		to := q.ToBlock.Uint64()
		s.pending = &to
	}
	return logs, err
}

func (s *steppedBackend) BlockNumber(ctx context.Context) (uint64, error) {
	if s.pending != nil {
		select {
		case s.pages <- *s.pending:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		s.pending = nil
		select {
		case <-s.next:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return s.Client.BlockNumber(ctx)
}

// startBeePostage starts bee's postage machinery for a node whose key is
// owner, syncing from the chain as NewBee does. Everything stops at
// cleanup.
func startBeePostage(t *testing.T, c *devchain.Chain, ec *ethclient.Client, owner common.Address) *beePostage {
	t.Helper()

	cfg, _ := config.GetByChainID(c.ChainID())
	state := mock.NewStateStore()
	store, err := batchstore.New(state, func([]byte) error { return nil }, 1<<22, log.Noop)
	if err != nil {
		t.Fatal(err)
	}
	stamper := inmemstore.New()
	post, err := postage.NewService(log.Noop, stamper, store, c.ChainID(), false)
	if err != nil {
		t.Fatal(err)
	}
	backend := &steppedBackend{Client: ec, pages: make(chan uint64), next: make(chan struct{})}
	l := listener.New(nil, log.Noop, backend, cfg.PostageStampAddress, abiutil.MustParseABI(cfg.PostageStampABI), c.BlockTime(), time.Minute, c.BlockTime())
	svc, _, err := batchservice.New(context.Background(), state, store, log.Noop, l, owner.Bytes(), post, sha3.New256, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() {
		cancel()
		if err := l.Close(); err != nil {
			t.Error(err)
		}
		if err := post.Close(); err != nil {
			t.Error(err)
		}
	})
	// The listener lives as long as the context Start is given, as in a
	// node; Start returns when the first sync is under way.
	// The chain's history is longer than one of the listener's pages: the
	// pages before the last (the genesis events among them) are processed
	// before Start returns, each let through here.
	started := make(chan error, 1)
	go func() { started <- svc.Start(ctx, cfg.PostageStampStartBlock) }()
	timeout := time.After(30 * time.Second)
	for synced := false; !synced; {
		select {
		case err := <-started:
			if err != nil {
				t.Fatalf("bee's batch service did not sync: %v", err)
			}
			synced = true
		case <-backend.pages:
			select {
			case backend.next <- struct{}{}:
			case err := <-started:
				t.Fatalf("bee's batch service returned while a page was held: %v", err)
			}
		case <-timeout:
			t.Fatal("bee's batch service not synced within 30s")
		}
	}
	return &beePostage{store: store, post: post, stamper: stamper, backend: backend}
}

// until lets bee's listener process pages of logs until ok, called between
// two pages, holds; it fails the test at the deadline. The listener stays
// held (bee's state may be read) until the next until or the test's end.
func (p *beePostage) until(t *testing.T, deadline time.Duration, what string, ok func() bool) {
	t.Helper()
	timeout := time.After(deadline)
	for {
		if p.held {
			select {
			case p.backend.next <- struct{}{}:
				p.held = false
			case <-timeout:
				t.Fatalf("%s: not within %s: the listener is gone", what, deadline)
			}
		}
		select {
		case <-p.backend.pages:
			p.held = true
			if ok() {
				return
			}
		case <-timeout:
			t.Fatalf("%s: not within %s", what, deadline)
		}
	}
}

// issuer waits for the node's usable stamp issuer for batch id.
func (p *beePostage) issuer(t *testing.T, id common.Hash, deadline time.Duration) *postage.StampIssuer {
	t.Helper()
	var found *postage.StampIssuer
	p.until(t, deadline, fmt.Sprintf("batch %s usable", id), func() bool {
		for _, st := range p.post.StampIssuers() {
			if bytes.Equal(st.ID(), id.Bytes()) && p.post.IssuerUsable(st) {
				found = st
				return true
			}
		}
		return false
	})
	return found
}

// stampValid stamps a chunk with the node's issuer and key, and checks the
// stamp as any other node does (postage.ValidStamp on its batch store).
func stampValid(t *testing.T, p *beePostage, st *postage.StampIssuer, key crypto.Signer, others ...*beePostage) {
	t.Helper()
	ch, err := cac.New([]byte("stamped by the dev chain's batch"))
	if err != nil {
		t.Fatal(err)
	}
	stamp, err := postage.NewStamper(p.stamper, st, key).Stamp(ch.Address(), ch.Address())
	if err != nil {
		t.Fatalf("stamp: %v", err)
	}
	for _, o := range append(others, p) {
		if _, err := postage.ValidStamp(o.store)(ch.WithStamp(stamp)); err != nil {
			t.Fatalf("stamp refused: %v", err)
		}
	}
}

func newKey(t *testing.T) (crypto.Signer, common.Address) {
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
	return s, a
}

// TestBeeListenerGivesTheBatch runs bee's postage listener, batch service
// and postage service against the chain, as a node does: a batch of
// Options.Batches is the owner's usable stamp issuer as soon as the first
// sync is done, with the announced depth, amount and price, and another
// node (another owner) knows the batch and accepts its stamps; a batch
// announced later (CreateBatch) becomes usable once bee has seen ten blocks
// past it.
func TestBeeListenerGivesTheBatch(t *testing.T) {
	t.Parallel()

	key, owner := newKey(t)
	_, other := newKey(t)
	c, rc := start(t, devchain.Options{
		BlockTime: 20 * time.Millisecond,
		Batches:   []devchain.Batch{{Owner: owner}, {Owner: other, Depth: 17, Amount: big.NewInt(1 << 40), Immutable: true}},
	})
	ec := ethclient.NewClient(rc)

	batches := c.Batches()
	if len(batches) != 2 {
		t.Fatalf("%d batches, want 2", len(batches))
	}
	b := batches[0]
	if b.Owner != owner || b.Depth != devchain.DefaultBatchDepth || b.BucketDepth != postage.BucketDepth || b.Immutable {
		t.Fatalf("batch %+v", b)
	}
	wantAmount := new(big.Int).SetUint64(uint64(devchain.DefaultBatchTTL/c.BlockTime()) * devchain.DefaultPrice)
	if b.Amount.Cmp(wantAmount) != 0 {
		t.Fatalf("amount %s, want %s", b.Amount, wantAmount)
	}

	node := startBeePostage(t, c, ec, owner)
	otherNode := startBeePostage(t, c, ec, other)

	st := node.issuer(t, b.ID, 5*time.Second) // usable after the first page
	if st.Depth() != b.Depth || st.BucketDepth() != postage.BucketDepth || st.ImmutableFlag() || st.Amount().Cmp(b.Amount) != 0 {
		t.Fatalf("issuer depth %d/%d immutable %v amount %s, want %+v", st.Depth(), st.BucketDepth(), st.ImmutableFlag(), st.Amount(), b)
	}
	if len(node.post.StampIssuers()) != 1 {
		t.Fatalf("the node holds %d issuers, want its own only", len(node.post.StampIssuers()))
	}
	cs := node.store.GetChainState()
	if cs.CurrentPrice.Uint64() != devchain.DefaultPrice {
		t.Fatalf("bee's price %s, want %d", cs.CurrentPrice, devchain.DefaultPrice)
	}
	otherNode.issuer(t, batches[1].ID, 5*time.Second) // after its first page
	for _, want := range batches {
		got, err := otherNode.store.Get(want.ID.Bytes())
		if err != nil {
			t.Fatalf("batch %s unknown to bee's batch store: %v", want.ID, err)
		}
		if !bytes.Equal(got.Owner, want.Owner.Bytes()) || got.Depth != want.Depth || got.Immutable != want.Immutable || got.Value.Cmp(want.NormalisedBalance) != 0 {
			t.Fatalf("batch store has %+v, want %+v", got, want)
		}
	}
	stampValid(t, node, st, key, otherNode)

	// A batch bought while the node runs, through the chain's own method.
	var later struct {
		ID    common.Hash    `json:"batchId"`
		Block hexutil.Uint64 `json:"block"`
	}
	if err := rc.CallContext(context.Background(), &later, devchain.MethodCreateBatch, map[string]any{"owner": owner, "depth": 18, "amount": "0x10000000000"}); err != nil {
		t.Fatal(err)
	}
	if got := c.Batches(); len(got) != 3 || got[2].ID != later.ID || uint64(later.Block) <= b.Block || got[2].Owner != owner || got[2].Amount.Cmp(big.NewInt(1<<40)) != 0 {
		t.Fatalf("later batch %+v after %+v: chain has %+v", later, b, got)
	}
	st2 := node.issuer(t, later.ID, 10*time.Second)
	if st2.Depth() != 18 {
		t.Fatalf("later batch depth %d", st2.Depth())
	}
	if cs := node.store.GetChainState(); cs.Block < uint64(later.Block)+10 {
		t.Fatalf("usable at block %d, %d blocks after its creation", cs.Block, cs.Block-uint64(later.Block))
	}
	otherNode.until(t, 10*time.Second, "the later batch known to the other node", func() bool {
		_, err := otherNode.store.Get(later.ID.Bytes())
		return err == nil
	})
	stampValid(t, node, st2, key, otherNode)
}

// TestPostageContractAnswers checks the contract's getters bee calls, and
// eth_getLogs' filter rules on the contract's events.
func TestPostageContractAnswers(t *testing.T) {
	t.Parallel()

	_, owner := newKey(t)
	c, rc := start(t, devchain.Options{BlockTime: time.Hour, Price: 1000, MinimumValidityBlocks: 77, Batches: []devchain.Batch{{Owner: owner}}})
	ec := ethclient.NewClient(rc)
	ctx := context.Background()
	cfg, _ := config.GetByChainID(c.ChainID())
	if c.PostageContract() != cfg.PostageStampAddress {
		t.Fatalf("contract %s, want bee's %s", c.PostageContract(), cfg.PostageStampAddress)
	}
	contractABI := abiutil.MustParseABI(cfg.PostageStampABI)

	for method, want := range map[string]any{"paused": false, "lastPrice": uint64(1000), "minimumValidityBlocks": uint64(77)} {
		data, err := contractABI.Pack(method)
		if err != nil {
			t.Fatal(err)
		}
		out, err := ec.CallContract(ctx, ethereum.CallMsg{To: &cfg.PostageStampAddress, Data: data}, nil)
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		got, err := contractABI.Unpack(method, out)
		if err != nil || len(got) != 1 || got[0] != want {
			t.Fatalf("%s: %v (%v), want %v", method, got, err, want)
		}
	}

	all := ethereum.FilterQuery{FromBlock: big.NewInt(0), ToBlock: big.NewInt(int64(c.Head())), Addresses: []common.Address{cfg.PostageStampAddress}}
	logs, err := ec.FilterLogs(ctx, all)
	if err != nil || len(logs) != 2 {
		t.Fatalf("logs %v, %v: want the price and the batch", logs, err)
	}
	created := contractABI.Events["BatchCreated"].ID
	if logs[0].Topics[0] != contractABI.Events["PriceUpdate"].ID || logs[1].Topics[0] != created || logs[1].Topics[1] != c.Batches()[0].ID {
		t.Fatalf("logs %+v", logs)
	}
	if logs[0].TxHash == logs[1].TxHash || logs[1].Index != 1 || logs[0].BlockNumber != logs[1].BlockNumber {
		t.Fatalf("logs of one block: %+v", logs)
	}
	for name, q := range map[string]ethereum.FilterQuery{
		"other address": {FromBlock: big.NewInt(0), Addresses: []common.Address{cfg.StakingAddress}},
		"before":        {FromBlock: big.NewInt(0), ToBlock: new(big.Int).SetUint64(logs[0].BlockNumber - 1)},
		"other topic":   {FromBlock: big.NewInt(0), Topics: [][]common.Hash{{contractABI.Events["BatchTopUp"].ID}}},
		"other batch":   {FromBlock: big.NewInt(0), Topics: [][]common.Hash{{created}, {common.Hash{1}}}},
	} {
		if logs, err := ec.FilterLogs(ctx, q); err != nil || len(logs) != 0 {
			t.Errorf("%s: %v, %v", name, logs, err)
		}
	}
	byHash, err := ec.FilterLogs(ctx, ethereum.FilterQuery{BlockHash: &logs[0].BlockHash, Topics: [][]common.Hash{{created}, {c.Batches()[0].ID}}})
	if err != nil || len(byHash) != 1 {
		t.Fatalf("by block hash and batch id: %v, %v", byHash, err)
	}
}

func TestRejectsBadBatches(t *testing.T) {
	t.Parallel()

	_, owner := newKey(t)
	for name, o := range map[string]devchain.Options{
		"no owner":    {Batches: []devchain.Batch{{Depth: 20}}},
		"shallow":     {Batches: []devchain.Batch{{Owner: owner, Depth: 16}}},
		"no amount":   {Batches: []devchain.Batch{{Owner: owner, Amount: new(big.Int)}}},
		"early first": {FirstBlock: 1000, Batches: []devchain.Batch{{Owner: owner}}},
	} {
		if _, err := devchain.New(o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	c, rc := start(t, devchain.Options{BlockTime: time.Hour})
	if _, err := c.CreateBatch(devchain.Batch{Owner: owner, Depth: 65}); err == nil {
		t.Error("CreateBatch of depth 65: no error")
	}
	for name, params := range map[string][]any{
		"no params": nil,
		"no owner":  {map[string]any{"depth": 20}},
		"amount":    {map[string]any{"owner": owner, "amount": 5}},
		"not int":   {map[string]any{"owner": owner, "amount": "five"}},
		"shallow":   {map[string]any{"owner": owner, "depth": 3}},
	} {
		var rerr rpc.Error
		if err := rc.CallContext(context.Background(), new(any), devchain.MethodCreateBatch, params...); !errors.As(err, &rerr) || rerr.ErrorCode() != -32602 {
			t.Errorf("%s: %v, want an invalid-params error", name, err)
		}
	}
	if len(c.Batches()) != 0 {
		t.Errorf("refused batches announced: %+v", c.Batches())
	}
}
