// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package devchain

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethersphere/bee/v2/pkg/config"
	"github.com/ethersphere/bee/v2/pkg/postage"
	"github.com/ethersphere/bee/v2/pkg/util/abiutil"
)

// The postage contract the chain plays: bee's own contract address and ABI
// for the chain id (from bee's pkg/config, which takes them from
// go-storage-incentives-abi), so that bee's postage listener, which asks
// eth_getLogs for that address and decodes with that ABI, reads the events
// exactly as it reads them on a network.
const (
	// DefaultPrice is the storage price, in PLUR per chunk per block, that
	// the postage contract announces (PriceUpdate) when the chain starts:
	// the postage contract's minimum price on mainnet.
	DefaultPrice = 24_000
	// DefaultBatchDepth is the depth of a batch when Batch.Depth is zero:
	// 2^20 chunks (4 GiB), 16 per bucket.
	DefaultBatchDepth = 20
	// DefaultBatchTTL is how long a batch lasts, at the announced price,
	// when Batch.Amount is nil.
	DefaultBatchTTL = 365 * 24 * time.Hour
	// DefaultMinimumValidityBlocks is what the contract's
	// minimumValidityBlocks getter answers (bee shows it in /chainstate).
	DefaultMinimumValidityBlocks = 17_280
	// maxBatches bounds the batches one chain announces.
	maxBatches = 4096
	// genesisGap is how many blocks the chain's history must hold after the
	// genesis events: bee's listener syncs to head-4 rounded down to a
	// multiple of 5, and a stamp issuer is usable 10 blocks after its batch.
	genesisGap = 20
)

// Batch is a postage batch the chain announces with a BatchCreated event.
type Batch struct {
	// Owner is the batch owner's Ethereum address: a node's, for the node
	// to list the batch in GET /stamps and stamp with it (bee's
	// overlayEthAddress, the address of the node's swarm key).
	Owner common.Address
	// Depth is the batch depth, 2^Depth chunks. Default DefaultBatchDepth.
	// It must exceed bee's bucket depth (16).
	Depth uint8
	// Amount is the balance per chunk, in PLUR. Default: DefaultBatchTTL
	// worth of blocks at the chain's price.
	Amount *big.Int
	// Immutable is the batch's immutable flag (bee's API default: true).
	// An immutable batch refuses chunks once a bucket is full; a mutable
	// one overwrites the oldest.
	Immutable bool
}

// CreatedBatch is a batch the chain has announced.
type CreatedBatch struct {
	ID                common.Hash
	Owner             common.Address
	Depth             uint8
	BucketDepth       uint8
	Immutable         bool
	Amount            *big.Int // per chunk
	NormalisedBalance *big.Int // the contract's total out payment at Block, plus Amount
	Block             uint64   // the block of the BatchCreated event
}

// postage is the postage contract's state: the events it emitted, in
// block order. Guarded by Chain.mu.
type postageContract struct {
	address common.Address
	abi     abi.ABI

	price      uint64
	priceBlock uint64 // the block of the PriceUpdate event

	logs    []types.Log
	batches []CreatedBatch
	nonce   uint64
}

func newPostageContract(chainID int64) (*postageContract, uint64, error) {
	cfg, known := config.GetByChainID(chainID)
	if !known {
		return nil, 0, fmt.Errorf("devchain: chain id %d: bee knows no postage contract for it", chainID)
	}
	return &postageContract{
		address: cfg.PostageStampAddress,
		abi:     abiutil.MustParseABI(cfg.PostageStampABI),
	}, cfg.PostageStampStartBlock, nil
}

// genesisBlock is the block of the events the chain starts with, right
// after the postage contract's deployment block.
func genesisBlock(postageStart uint64) uint64 { return postageStart + 1 }

// emit appends an event of the contract at block. Each log is its own
// transaction.
func (p *postageContract) emit(block uint64, name string, indexed []any, data ...any) error {
	ev, ok := p.abi.Events[name]
	if !ok {
		return fmt.Errorf("devchain: the postage ABI has no event %s", name)
	}
	packed, err := ev.Inputs.NonIndexed().Pack(data...)
	if err != nil {
		return fmt.Errorf("devchain: pack %s: %w", name, err)
	}
	topics := []common.Hash{ev.ID}
	if len(indexed) > 0 {
		t, err := abi.MakeTopics(indexed)
		if err != nil {
			return fmt.Errorf("devchain: topics of %s: %w", name, err)
		}
		for _, h := range t {
			topics = append(topics, h[0])
		}
	}
	var index uint
	if n := len(p.logs); n > 0 && p.logs[n-1].BlockNumber == block {
		index = p.logs[n-1].Index + 1
	}
	p.logs = append(p.logs, types.Log{
		Address:     p.address,
		Topics:      topics,
		Data:        packed,
		BlockNumber: block,
		TxHash:      txHash(block, index),
		TxIndex:     index,
		BlockHash:   blockHash(block),
		Index:       index,
	})
	return nil
}

// updatePrice announces the price at block.
func (p *postageContract) updatePrice(block, price uint64) error {
	if err := p.emit(block, "PriceUpdate", nil, new(big.Int).SetUint64(price)); err != nil {
		return err
	}
	p.price, p.priceBlock = price, block
	return nil
}

// totalOutPayment is the contract's cumulative payout per chunk at block.
func (p *postageContract) totalOutPayment(block uint64) *big.Int {
	if p.price == 0 || block <= p.priceBlock {
		return new(big.Int)
	}
	out := new(big.Int).SetUint64(block - p.priceBlock)
	return out.Mul(out, new(big.Int).SetUint64(p.price))
}

// createBatch announces b at block, with defaults filled in.
func (p *postageContract) createBatch(block uint64, b Batch, blockTime time.Duration) (CreatedBatch, error) {
	if len(p.batches) >= maxBatches {
		return CreatedBatch{}, fmt.Errorf("devchain: %d batches already announced", maxBatches)
	}
	if b.Owner == (common.Address{}) {
		return CreatedBatch{}, errors.New("devchain: batch without an owner")
	}
	if b.Depth == 0 {
		b.Depth = DefaultBatchDepth
	}
	if b.Depth <= postage.BucketDepth || b.Depth > 64 {
		return CreatedBatch{}, fmt.Errorf("devchain: batch depth %d: must be above bee's bucket depth %d", b.Depth, postage.BucketDepth)
	}
	amount := b.Amount
	if amount == nil {
		blocks := uint64(DefaultBatchTTL / blockTime)
		amount = new(big.Int).Mul(new(big.Int).SetUint64(blocks), new(big.Int).SetUint64(max(p.price, 1)))
	}
	if amount.Sign() <= 0 {
		return CreatedBatch{}, fmt.Errorf("devchain: batch amount %s must be positive", amount)
	}
	var nonce [32]byte
	binary.BigEndian.PutUint64(nonce[24:], p.nonce)
	p.nonce++
	c := CreatedBatch{
		ID:                common.BytesToHash(crypto.Keccak256(common.LeftPadBytes(b.Owner.Bytes(), 32), nonce[:])),
		Owner:             b.Owner,
		Depth:             b.Depth,
		BucketDepth:       postage.BucketDepth,
		Immutable:         b.Immutable,
		Amount:            new(big.Int).Set(amount),
		NormalisedBalance: new(big.Int).Add(p.totalOutPayment(block), amount),
		Block:             block,
	}
	total := new(big.Int).Lsh(amount, uint(c.Depth))
	if err := p.emit(block, "BatchCreated", []any{c.ID}, total, c.NormalisedBalance, c.Owner, c.Depth, c.BucketDepth, c.Immutable); err != nil {
		return CreatedBatch{}, err
	}
	p.batches = append(p.batches, c)
	return c, nil
}

// txHash is a made-up but stable transaction hash for log index i of
// block n.
func txHash(n uint64, i uint) common.Hash {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], n)
	binary.BigEndian.PutUint64(b[8:], uint64(i))
	return common.BytesToHash(crypto.Keccak256([]byte("bps-devchain-tx"), b[:]))
}

// CreateBatch announces b in the next block, as the postage contract does
// when someone buys a batch. A node's listener sees it once it has synced
// past that block, and bee uses the batch 10 blocks later. Batches a node
// should have from its start belong in Options.Batches.
func (c *Chain) CreateBatch(b Batch) (CreatedBatch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.postage.createBatch(c.head+1, b, c.o.BlockTime)
}

// Batches are the batches the chain has announced, Options.Batches first,
// in order.
func (c *Chain) Batches() []CreatedBatch {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.postage.batches)
}

// PostageContract is the address of the postage contract the chain plays.
func (c *Chain) PostageContract() common.Address { return c.postage.address }

// logFilter is eth_getLogs' filter object.
type logFilter struct {
	FromBlock *string           `json:"fromBlock"`
	ToBlock   *string           `json:"toBlock"`
	BlockHash *common.Hash      `json:"blockHash"`
	Address   json.RawMessage   `json:"address"`
	Topics    []json.RawMessage `json:"topics"`
}

// getLogs answers eth_getLogs with the postage contract's events that match
// the filter, up to the head.
func (c *Chain) getLogs(params []json.RawMessage) (any, error) {
	if len(params) != 1 {
		return nil, &rpcError{codeInvalidParams, "eth_getLogs takes one filter object"}
	}
	var f logFilter
	if err := json.Unmarshal(params[0], &f); err != nil {
		return nil, &rpcError{codeInvalidParams, "invalid filter: " + err.Error()}
	}
	addrs, err := hexList[common.Address](f.Address, common.IsHexAddress, common.HexToAddress)
	if err != nil {
		return nil, &rpcError{codeInvalidParams, "invalid address: " + err.Error()}
	}
	topics := make([][]common.Hash, len(f.Topics))
	for i, raw := range f.Topics {
		if topics[i], err = hexList[common.Hash](raw, isHash, common.HexToHash); err != nil {
			return nil, &rpcError{codeInvalidParams, fmt.Sprintf("invalid topic %d: %v", i, err)}
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	from, to := c.head, c.head
	if f.BlockHash != nil {
		if f.FromBlock != nil || f.ToBlock != nil {
			return nil, &rpcError{codeInvalidParams, "blockHash excludes fromBlock and toBlock"}
		}
		from = new(big.Int).SetBytes(f.BlockHash[24:]).Uint64()
		if blockHash(from) != *f.BlockHash || from > c.head {
			return []types.Log{}, nil
		}
		to = from
	}
	if f.FromBlock != nil {
		if from, err = c.blockNumber(*f.FromBlock); err != nil {
			return nil, err
		}
	}
	if f.ToBlock != nil {
		if to, err = c.blockNumber(*f.ToBlock); err != nil {
			return nil, err
		}
	}
	to = min(to, c.head)
	out := []types.Log{}
	for _, l := range c.postage.logs {
		if l.BlockNumber < from || l.BlockNumber > to {
			continue
		}
		if len(addrs) > 0 && !slices.Contains(addrs, l.Address) {
			continue
		}
		if matchTopics(l.Topics, topics) {
			out = append(out, l)
		}
	}
	return out, nil
}

// blockNumber resolves a block tag or number; the caller holds c.mu.
func (c *Chain) blockNumber(tag string) (uint64, error) {
	switch tag {
	case "latest", "pending", "safe", "finalized":
		return c.head, nil
	case "earliest":
		return 0, nil
	}
	n, err := hexutil.DecodeUint64(tag)
	if err != nil {
		return 0, &rpcError{codeInvalidParams, "invalid block number: " + err.Error()}
	}
	return n, nil
}

// matchTopics is eth_getLogs' topic rule: position i matches any of want[i],
// an empty position anything.
func matchTopics(have []common.Hash, want [][]common.Hash) bool {
	if len(want) > len(have) {
		return false
	}
	for i, alts := range want {
		if len(alts) > 0 && !slices.Contains(alts, have[i]) {
			return false
		}
	}
	return true
}

func isHash(s string) bool {
	b, err := hexutil.Decode(s)
	return err == nil && len(b) == common.HashLength
}

// hexList reads null, a hex string or an array of hex strings (nulls in it
// are skipped).
func hexList[T any](raw json.RawMessage, valid func(string) bool, parse func(string) T) ([]T, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return nil, nil
	}
	var list []*string
	if strings.HasPrefix(s, "[") {
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, err
		}
	} else {
		var one string
		if err := json.Unmarshal(raw, &one); err != nil {
			return nil, err
		}
		list = []*string{&one}
	}
	out := make([]T, 0, len(list))
	for _, e := range list {
		if e == nil {
			continue
		}
		if !valid(*e) {
			return nil, fmt.Errorf("%q", *e)
		}
		out = append(out, parse(*e))
	}
	return out, nil
}

// callArgs is eth_call's transaction object; go-ethereum sends the call
// data as input, older clients as data.
type callArgs struct {
	To    *common.Address `json:"to"`
	Input hexutil.Bytes   `json:"input"`
	Data  hexutil.Bytes   `json:"data"`
}

// ethCall answers the postage contract's getters bee calls (paused,
// lastPrice, minimumValidityBlocks) from the contract's state, and every
// other call with zeros (no stake, a zero balance).
func (c *Chain) ethCall(params []json.RawMessage) (any, error) {
	zeros := hexutil.Bytes(make([]byte, callResultSize))
	if len(params) == 0 {
		return nil, &rpcError{codeInvalidParams, "missing call object"}
	}
	var args callArgs
	if err := json.Unmarshal(params[0], &args); err != nil {
		return nil, &rpcError{codeInvalidParams, "invalid call object: " + err.Error()}
	}
	input := args.Input
	if len(input) == 0 {
		input = args.Data
	}
	if args.To == nil || *args.To != c.postage.address || len(input) < 4 {
		return zeros, nil
	}
	m, err := c.postage.abi.MethodById(input[:4])
	if err != nil {
		return zeros, nil
	}
	c.mu.Lock()
	price := c.postage.price
	c.mu.Unlock()
	var out []byte
	switch m.Name {
	case "paused":
		out, err = m.Outputs.Pack(false)
	case "lastPrice":
		out, err = m.Outputs.Pack(price)
	case "minimumValidityBlocks":
		out, err = m.Outputs.Pack(c.o.MinimumValidityBlocks)
	default:
		return zeros, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pack %s: %w", m.Name, err)
	}
	return hexutil.Bytes(out), nil
}

// MethodCreateBatch is the development chain's own JSON-RPC method (not an
// Ethereum one) that buys a batch for anyone who can reach the endpoint:
// params [{"owner":"0x…","depth":17,"amount":"…","immutable":true}] (depth,
// amount and immutable optional, as in Batch), result {"batchId":"0x…",
// "block":"0x…"}. bee uses the batch 10 blocks after that block.
const MethodCreateBatch = "devchain_createBatch"

type createBatchParams struct {
	Owner     *common.Address `json:"owner"`
	Depth     uint8           `json:"depth"`
	Amount    *hexOrDecimal   `json:"amount"`
	Immutable bool            `json:"immutable"`
}

// hexOrDecimal is a big integer written as a decimal string or 0x hex.
type hexOrDecimal big.Int

func (h *hexOrDecimal) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("amount must be a string: %w", err)
	}
	n, ok := new(big.Int).SetString(s, 0)
	if !ok {
		return fmt.Errorf("amount %q is not an integer", s)
	}
	*h = hexOrDecimal(*n)
	return nil
}

type createBatchResult struct {
	BatchID common.Hash    `json:"batchId"`
	Block   hexutil.Uint64 `json:"block"`
}

func (c *Chain) createBatchRPC(params []json.RawMessage) (any, error) {
	if len(params) != 1 {
		return nil, &rpcError{codeInvalidParams, MethodCreateBatch + " takes one batch object"}
	}
	var p createBatchParams
	if err := json.Unmarshal(params[0], &p); err != nil {
		return nil, &rpcError{codeInvalidParams, "invalid batch: " + err.Error()}
	}
	if p.Owner == nil {
		return nil, &rpcError{codeInvalidParams, "invalid batch: no owner"}
	}
	b := Batch{Owner: *p.Owner, Depth: p.Depth, Immutable: p.Immutable}
	if p.Amount != nil {
		b.Amount = (*big.Int)(p.Amount)
	}
	created, err := c.CreateBatch(b)
	if err != nil {
		return nil, &rpcError{codeInvalidParams, err.Error()}
	}
	return createBatchResult{BatchID: created.ID, Block: hexutil.Uint64(created.Block)}, nil
}
