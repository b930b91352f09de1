// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package devchain is a minimal Ethereum JSON-RPC endpoint on loopback, just
// enough for bee to run in full mode with swap, chequebook and storage
// incentives off.
//
// It is for development clusters and tests only: it has no state, no
// transactions and no contracts but one. It plays bee's postage stamp
// contract (bee's address and ABI for the chain id): its history holds a
// PriceUpdate event and a BatchCreated event for each batch in
// Options.Batches, and CreateBatch announces more, so that bee's own postage
// listener and batch service give a node its batch as on a network; the
// contract's getters bee calls (paused, lastPrice, minimumValidityBlocks)
// answer from that state. Every other eth_call answers zeros (no stake),
// every balance is zero, and the head advances by one empty block per block
// time so that bee's postage listener sees progress (with a fixed head bee
// shuts down after ten minutes, "postage syncing stalled"). Never point a
// production node at it.
//
// A Chain reports the chain id of a chain bee knows (bee's testnet by
// default, whatever the Swarm network id), because bee refuses to start on a
// chain it has no contract addresses for. Its first block is a little past
// that chain's postage contract start block, so that a fresh full node's
// batch service is synced after a single eth_getLogs, and finds the batches
// of Options.Batches, announced right after the contract's start block,
// already usable.
package devchain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethersphere/bee/v2/pkg/config"
	"github.com/ethersphere/bee/v2/pkg/log"
)

// loggerName is the tree path name of the logger for this package.
const loggerName = "devchain"

const (
	// DefaultBlockTime is the block time when Options.BlockTime is zero.
	DefaultBlockTime = time.Second
	// firstBlockMargin is how far past the postage contract start block the
	// chain begins: bee's listener syncs up to head-4 rounded down to a
	// multiple of 5, and must find that at or past the start block. It is
	// more than one of the listener's pages (5,000 blocks) so that the
	// genesis events (the price, the batches) are processed in a page that
	// a full node's start waits for, before bee registers its protocols:
	// bee v2.8.1's batch service changes the chain state it shares with its
	// readers in place, and events processed after the node started race
	// with peers' status requests.
	firstBlockMargin = 6000
	// clientVersion is what web3_clientVersion answers.
	clientVersion = "bps-devchain/v1"
	// maxRequestSize bounds one JSON-RPC request body.
	maxRequestSize = 1 << 20
	// gasPrice is what eth_gasPrice and eth_maxPriorityFeePerGas answer.
	gasPrice = 1_000_000_000
	// callResultSize is the length of the zeros eth_call answers: enough
	// ABI words for any of the getters bee calls (the staking contract's
	// returns two), each decoding as false, 0, the zero address or an empty
	// dynamic value; ABI decoding ignores words past the ones it needs.
	callResultSize = 8 * 32
)

// JSON-RPC 2.0 error codes.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
)

// Options configure a Chain. Zero values take defaults.
type Options struct {
	// ChainID is the chain id reported. Default: bee's testnet chain id.
	ChainID int64
	// BlockTime is the time between two blocks. Default DefaultBlockTime.
	// Give bee the same value (its BlockTime option) so that its block
	// number estimates agree with the chain.
	BlockTime time.Duration
	// FirstBlock is the head when the chain starts. Default: a little past
	// the postage contract start block of ChainID's chain in bee's config.
	FirstBlock uint64
	// Logger logs unknown methods. Default: no logging.
	Logger log.Logger
	// Price is the storage price, PLUR per chunk per block, the postage
	// contract announces in its first block. Default DefaultPrice.
	Price uint64
	// MinimumValidityBlocks is what the postage contract's getter answers.
	// Default DefaultMinimumValidityBlocks.
	MinimumValidityBlocks uint64
	// Batches are announced in the chain's history, in the block after the
	// postage contract's start block: a node that starts on the chain finds
	// its batch usable once its first sync is done.
	Batches []Batch
}

func (o *Options) setDefaults() {
	if o.ChainID == 0 {
		o.ChainID = config.Testnet.ChainID
	}
	if o.BlockTime == 0 {
		o.BlockTime = DefaultBlockTime
	}
	if o.FirstBlock == 0 {
		c, _ := config.GetByChainID(o.ChainID)
		o.FirstBlock = c.PostageStampStartBlock + firstBlockMargin
	}
	if o.Logger == nil {
		o.Logger = log.Noop
	}
	if o.Price == 0 {
		o.Price = DefaultPrice
	}
	if o.MinimumValidityBlocks == 0 {
		o.MinimumValidityBlocks = DefaultMinimumValidityBlocks
	}
}

func (o *Options) validate() error {
	if o.ChainID < 0 {
		return fmt.Errorf("devchain: negative chain id %d", o.ChainID)
	}
	if o.BlockTime < time.Millisecond {
		return fmt.Errorf("devchain: block time %s below 1ms", o.BlockTime)
	}
	if len(o.Batches) > maxBatches {
		return fmt.Errorf("devchain: %d batches, at most %d", len(o.Batches), maxBatches)
	}
	return nil
}

// Chain is a development JSON-RPC endpoint. Start it, hand URL to bee as its
// blockchain RPC endpoint, Close it after the nodes have shut down.
type Chain struct {
	o       Options
	logger  log.Logger
	postage *postageContract // guarded by mu

	// mu guards head and headTime, written by the block loop and read by
	// request handlers.
	mu       sync.Mutex
	head     uint64
	headTime time.Time
	onBlock  func(uint64) // test hook, called by the block loop; set before Start

	srv  *http.Server
	url  string
	quit chan struct{}
	wg   sync.WaitGroup // the block loop and the HTTP server goroutine

	// reqMu orders the start of a request against Close: once closing is
	// set no request is added to handlers, which Close then waits for.
	reqMu    sync.Mutex
	closing  bool
	handlers sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// New returns a Chain that is not started yet.
func New(o Options) (*Chain, error) {
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	p, postageStart, err := newPostageContract(o.ChainID)
	if err != nil {
		return nil, err
	}
	// The genesis events: the price, then the batches, right after the
	// contract's start block, far enough before the first block for bee to
	// use the batches once synced.
	genesis := genesisBlock(postageStart)
	if o.FirstBlock >= genesis+genesisGap {
		if err := p.updatePrice(genesis, o.Price); err != nil {
			return nil, err
		}
	} else if len(o.Batches) > 0 {
		return nil, fmt.Errorf("devchain: first block %d: batches need it at or past %d", o.FirstBlock, genesis+genesisGap)
	}
	for i, b := range o.Batches {
		if _, err := p.createBatch(genesis, b, o.BlockTime); err != nil {
			return nil, fmt.Errorf("batch %d: %w", i, err)
		}
	}
	return &Chain{
		o:       o,
		logger:  o.Logger.WithName(loggerName).Register(),
		postage: p,
		head:    o.FirstBlock,
		quit:    make(chan struct{}),
	}, nil
}

// Start listens on a random loopback port and starts producing blocks. ctx
// bounds only the listening; the chain runs until Close.
func (c *Chain) Start(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("devchain: listen: %w", err)
	}
	c.url = "http://" + ln.Addr().String()

	c.mu.Lock()
	c.head = c.o.FirstBlock
	c.headTime = time.Now()
	c.mu.Unlock()

	c.srv = &http.Server{
		Handler:           http.HandlerFunc(c.serveHTTP),
		ReadHeaderTimeout: 5 * time.Second,
		IdleTimeout:       90 * time.Second,
	}
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		if err := c.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.logger.Error(err, "devchain: serve")
		}
	}()
	go func() {
		defer c.wg.Done()
		c.blockLoop()
	}()
	c.logger.Info("development chain started", "url", c.url, "chain_id", c.o.ChainID, "head", c.o.FirstBlock, "block_time", c.o.BlockTime)
	return nil
}

// URL is the endpoint's http URL, valid after Start.
func (c *Chain) URL() string { return c.url }

// ChainID is the chain id the endpoint reports.
func (c *Chain) ChainID() int64 { return c.o.ChainID }

// BlockTime is the time between two blocks.
func (c *Chain) BlockTime() time.Duration { return c.o.BlockTime }

// Head is the current block number.
func (c *Chain) Head() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.head
}

// Close stops producing blocks and serving requests, and waits for both.
// It may be called more than once, and before Start.
func (c *Chain) Close() error {
	c.closeOnce.Do(func() {
		close(c.quit)
		c.reqMu.Lock()
		c.closing = true
		c.reqMu.Unlock()
		if c.srv != nil {
			// Close, not Shutdown: a client's spare connection that never
			// carried a request would hold Shutdown for five seconds.
			c.closeErr = c.srv.Close()
		}
		c.wg.Wait()
		c.handlers.Wait()
	})
	return c.closeErr
}

// blockLoop mines one empty block per block time until Close.
func (c *Chain) blockLoop() {
	t := time.NewTicker(c.o.BlockTime)
	defer t.Stop()
	for {
		select {
		case <-c.quit:
			return
		case now := <-t.C:
			c.mu.Lock()
			c.head++
			c.headTime = now
			n, hook := c.head, c.onBlock
			c.mu.Unlock()
			if hook != nil {
				hook(n)
			}
		}
	}
}

type request struct {
	Version string            `json:"jsonrpc"`
	ID      json.RawMessage   `json:"id,omitempty"`
	Method  string            `json:"method"`
	Params  []json.RawMessage `json:"params,omitempty"`
}

type response struct {
	Version string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return e.Message }

// nullResult marshals as JSON null where a result is required but empty (a
// block that does not exist yet), which omitempty would drop.
type nullResult struct{}

func (nullResult) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

func (c *Chain) serveHTTP(w http.ResponseWriter, r *http.Request) {
	c.reqMu.Lock()
	if c.closing {
		c.reqMu.Unlock()
		http.Error(w, "closing", http.StatusServiceUnavailable)
		return
	}
	c.handlers.Add(1)
	c.reqMu.Unlock()
	defer c.handlers.Done()

	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "JSON-RPC over POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestSize+1))
	if err != nil {
		return
	}
	var out any
	switch trimmed := strings.TrimSpace(string(body)); {
	case len(body) > maxRequestSize:
		out = errorResponse(nil, &rpcError{codeInvalidRequest, "request too large"})
	case strings.HasPrefix(trimmed, "["):
		var batch []json.RawMessage
		if err := json.Unmarshal(body, &batch); err != nil || len(batch) == 0 {
			out = errorResponse(nil, &rpcError{codeParseError, "invalid batch"})
			break
		}
		resps := make([]response, 0, len(batch))
		for _, raw := range batch {
			resps = append(resps, c.handle(raw))
		}
		out = resps
	default:
		out = c.handle(body)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func errorResponse(id json.RawMessage, err *rpcError) response {
	if id == nil {
		id = json.RawMessage("null")
	}
	return response{Version: "2.0", ID: id, Error: err}
}

func (c *Chain) handle(raw []byte) response {
	var req request
	if err := json.Unmarshal(raw, &req); err != nil {
		return errorResponse(nil, &rpcError{codeParseError, "parse error: " + err.Error()})
	}
	result, err := c.call(req.Method, req.Params)
	if err != nil {
		var re *rpcError
		if !errors.As(err, &re) {
			re = &rpcError{codeInvalidParams, err.Error()}
		}
		return errorResponse(req.ID, re)
	}
	return response{Version: "2.0", ID: req.ID, Result: result}
}

// call answers one method.
func (c *Chain) call(method string, params []json.RawMessage) (any, error) {
	switch method {
	case "web3_clientVersion":
		return clientVersion, nil
	case "eth_chainId":
		return hexutil.EncodeBig(big.NewInt(c.o.ChainID)), nil
	case "net_version":
		return strconv.FormatInt(c.o.ChainID, 10), nil
	case "eth_syncing":
		return false, nil
	case "eth_blockNumber":
		return hexutil.EncodeUint64(c.Head()), nil
	case "eth_getBlockByNumber":
		return c.blockByNumber(params)
	case "eth_getLogs":
		return c.getLogs(params)
	case "eth_call":
		return c.ethCall(params)
	case "eth_getBalance":
		return "0x0", nil
	case "eth_gasPrice", "eth_maxPriorityFeePerGas":
		return hexutil.EncodeUint64(gasPrice), nil
	case "eth_getTransactionCount":
		return "0x0", nil
	case "eth_getCode":
		return "0x", nil
	case MethodCreateBatch:
		return c.createBatchRPC(params)
	}
	c.logger.Warning("unknown JSON-RPC method", "method", method)
	return nil, &rpcError{codeMethodNotFound, fmt.Sprintf("the method %s does not exist/is not available in the development chain", method)}
}

// blockByNumber answers eth_getBlockByNumber(number, fullTransactions) with
// an empty block, or null for a block past the head.
func (c *Chain) blockByNumber(params []json.RawMessage) (any, error) {
	if len(params) == 0 {
		return nil, &rpcError{codeInvalidParams, "missing block number"}
	}
	var tag string
	if err := json.Unmarshal(params[0], &tag); err != nil {
		return nil, &rpcError{codeInvalidParams, "invalid block number"}
	}

	c.mu.Lock()
	head, headTime := c.head, c.headTime
	c.mu.Unlock()

	number := head
	switch tag {
	case "latest", "pending", "safe", "finalized":
	case "earliest":
		number = 0
	default:
		n, err := hexutil.DecodeUint64(tag)
		if err != nil {
			return nil, &rpcError{codeInvalidParams, "invalid block number: " + err.Error()}
		}
		if n > head {
			return nullResult{}, nil
		}
		number = n
	}
	behind := time.Duration(head-number) * c.o.BlockTime
	return c.header(number, headTime.Add(-behind)), nil
}

// header is an empty block's header; parents chain by hash so a client that
// walks them sees a consistent chain.
func (c *Chain) header(number uint64, at time.Time) map[string]any {
	ts := at.Unix()
	if ts < 0 {
		ts = 0
	}
	var parent common.Hash
	if number > 0 {
		parent = blockHash(number - 1)
	}
	h := &types.Header{
		ParentHash:  parent,
		UncleHash:   types.EmptyUncleHash,
		Root:        types.EmptyRootHash,
		TxHash:      types.EmptyTxsHash,
		ReceiptHash: types.EmptyReceiptsHash,
		Difficulty:  new(big.Int),
		Number:      new(big.Int).SetUint64(number),
		GasLimit:    30_000_000,
		Time:        uint64(ts),
		Extra:       []byte{},
		BaseFee:     big.NewInt(gasPrice),
	}
	return map[string]any{
		"hash":             blockHash(number),
		"parentHash":       h.ParentHash,
		"sha3Uncles":       h.UncleHash,
		"miner":            h.Coinbase,
		"stateRoot":        h.Root,
		"transactionsRoot": h.TxHash,
		"receiptsRoot":     h.ReceiptHash,
		"logsBloom":        h.Bloom,
		"difficulty":       (*hexutil.Big)(h.Difficulty),
		"number":           (*hexutil.Big)(h.Number),
		"gasLimit":         hexutil.Uint64(h.GasLimit),
		"gasUsed":          hexutil.Uint64(0),
		"timestamp":        hexutil.Uint64(h.Time),
		"extraData":        hexutil.Bytes(h.Extra),
		"baseFeePerGas":    (*hexutil.Big)(h.BaseFee),
		"nonce":            types.BlockNonce{},
		"mixHash":          common.Hash{},
		"transactions":     []any{},
		"uncles":           []any{},
		"size":             hexutil.Uint64(0),
	}
}

// blockHash is a made-up but stable hash for block n.
func blockHash(n uint64) common.Hash {
	var h common.Hash
	copy(h[:], "bps-devchain")
	big.NewInt(0).SetUint64(n).FillBytes(h[24:])
	return h
}
