// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package devchain_test

import (
	"context"
	"errors"
	"io"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/ethersphere/bee/v2/pkg/config"
	"github.com/ethersphere/bps/pkg/devchain"
)

// start starts a chain and a client for it, both closed at cleanup.
func start(t *testing.T, o devchain.Options) (*devchain.Chain, *rpc.Client) {
	t.Helper()

	c, err := devchain.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c, startChain(t, c)
}

func startChain(t *testing.T, c *devchain.Chain) *rpc.Client {
	t.Helper()

	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	transport := &http.Transport{}
	rc, err := rpc.DialOptions(context.Background(), c.URL(), rpc.WithHTTPClient(&http.Client{Transport: transport}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rc.Close()
		transport.CloseIdleConnections()
	})
	return rc
}

// TestAnswersWhatBeeCalls covers the calls bee's node makes on a full node
// start with swap, chequebook and storage incentives off.
func TestAnswersWhatBeeCalls(t *testing.T) {
	t.Parallel()

	c, rc := start(t, devchain.Options{BlockTime: time.Hour})
	ec := ethclient.NewClient(rc)
	ctx := context.Background()

	if !strings.HasPrefix(c.URL(), "http://127.0.0.1:") {
		t.Fatalf("URL %q is not on loopback", c.URL())
	}

	var version string
	if err := rc.CallContext(ctx, &version, "web3_clientVersion"); err != nil || version == "" {
		t.Fatalf("web3_clientVersion: %q, %v", version, err)
	}

	id, err := ec.ChainID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id.Int64() != config.Testnet.ChainID || c.ChainID() != config.Testnet.ChainID {
		t.Fatalf("chain id %d, want bee's testnet %d", id, config.Testnet.ChainID)
	}
	if _, known := config.GetByChainID(id.Int64()); !known {
		t.Fatalf("chain id %d unknown to bee", id)
	}

	head, err := ec.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if head.Number.Uint64() <= config.Testnet.PostageStampStartBlock+10 {
		t.Fatalf("head %d not past the postage start block %d", head.Number, config.Testnet.PostageStampStartBlock)
	}
	if d := time.Since(time.Unix(int64(head.Time), 0)); d < -time.Second || d > time.Minute {
		t.Fatalf("head is %s old, bee wants it within a minute", d)
	}
	n, err := ec.BlockNumber(ctx)
	if err != nil || n != head.Number.Uint64() || n != c.Head() {
		t.Fatalf("eth_blockNumber %d (%v), head %d, Head() %d", n, err, head.Number, c.Head())
	}

	older, err := ec.HeaderByNumber(ctx, new(big.Int).SetUint64(n-10))
	if err != nil {
		t.Fatal(err)
	}
	if older.Number.Uint64() != n-10 || older.Time > head.Time {
		t.Fatalf("block %d at %d, head at %d", older.Number, older.Time, head.Time)
	}
	if _, err := ec.HeaderByNumber(ctx, new(big.Int).SetUint64(n+1)); !errors.Is(err, ethereum.NotFound) {
		t.Fatalf("future block: %v, want not found", err)
	}

	logs, err := ec.FilterLogs(ctx, ethereum.FilterQuery{
		FromBlock: new(big.Int).SetUint64(config.Testnet.PostageStampStartBlock),
		ToBlock:   new(big.Int).SetUint64(n),
		Addresses: []common.Address{config.Testnet.PostageStampAddress},
	})
	if err != nil || len(logs) != 1 {
		t.Fatalf("eth_getLogs: %v, %v: want the postage contract's price", logs, err)
	}

	out, err := ec.CallContract(ctx, ethereum.CallMsg{To: &config.Testnet.StakingAddress, Data: []byte{1, 2, 3, 4}}, nil)
	if err != nil || len(out) < 64 || new(big.Int).SetBytes(out).Sign() != 0 {
		t.Fatalf("eth_call: %x, %v", out, err)
	}

	bal, err := ec.BalanceAt(ctx, common.Address{1}, nil)
	if err != nil || bal.Sign() != 0 {
		t.Fatalf("eth_getBalance: %v, %v", bal, err)
	}
	if p, err := ec.SuggestGasPrice(ctx); err != nil || p.Sign() <= 0 {
		t.Fatalf("eth_gasPrice: %v, %v", p, err)
	}
	if s, err := ec.SyncProgress(ctx); err != nil || s != nil {
		t.Fatalf("eth_syncing: %v, %v", s, err)
	}

	batch := []rpc.BatchElem{
		{Method: "eth_chainId", Result: new(string)},
		{Method: "eth_sendRawTransaction", Args: []any{"0x00"}, Result: new(string)},
	}
	if err := rc.BatchCallContext(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if batch[0].Error != nil || *batch[0].Result.(*string) != "0xaa36a7" {
		t.Fatalf("batched eth_chainId: %v %v", *batch[0].Result.(*string), batch[0].Error)
	}
	var rerr rpc.Error
	if !errors.As(batch[1].Error, &rerr) || rerr.ErrorCode() != -32601 {
		t.Fatalf("unknown method in a batch: %v, want a method-not-found error", batch[1].Error)
	}
	if err := rc.CallContext(ctx, new(string), "eth_sendRawTransaction", "0x00"); !errors.As(err, &rerr) || rerr.ErrorCode() != -32601 {
		t.Fatalf("unknown method: %v, want a method-not-found error", err)
	}
}

// TestHeadAdvances checks that the head advances one block per block time,
// with headers that stay consistent.
func TestHeadAdvances(t *testing.T) {
	t.Parallel()

	c, err := devchain.New(devchain.Options{BlockTime: 5 * time.Millisecond, FirstBlock: 1000})
	if err != nil {
		t.Fatal(err)
	}
	blocks := make(chan uint64, 100)
	devchain.SetOnBlock(c, func(n uint64) {
		select {
		case blocks <- n:
		default:
		}
	})
	ec := ethclient.NewClient(startChain(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	want := uint64(1001)
	for want <= 1003 {
		select {
		case n := <-blocks:
			if n != want {
				t.Fatalf("block %d, want %d", n, want)
			}
			want++
		case <-ctx.Done():
			t.Fatalf("no block %d within the deadline", want)
		}
	}
	n, err := ec.BlockNumber(ctx)
	if err != nil || n < 1003 {
		t.Fatalf("eth_blockNumber %d, %v: want at least 1003", n, err)
	}
	head, err := ec.HeaderByNumber(ctx, new(big.Int).SetUint64(1003))
	if err != nil {
		t.Fatal(err)
	}
	parent, err := ec.HeaderByNumber(ctx, new(big.Int).SetUint64(1002))
	if err != nil {
		t.Fatal(err)
	}
	if head.ParentHash == (common.Hash{}) || parent.Time > head.Time {
		t.Fatalf("inconsistent headers: %+v after %+v", head, parent)
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	t.Parallel()

	c, err := devchain.New(devchain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close before start: %v", err)
	}

	c, err = devchain.New(devchain.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post(c.URL(), "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}`))
	if err == nil {
		resp.Body.Close()
		t.Fatal("closed chain still answers")
	}
}

func TestRejectsBadOptions(t *testing.T) {
	t.Parallel()

	for _, o := range []devchain.Options{
		{BlockTime: time.Microsecond},
		{ChainID: -1},
	} {
		if _, err := devchain.New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
}

func TestRejectsMalformedRequests(t *testing.T) {
	t.Parallel()

	c, _ := start(t, devchain.Options{})
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()

	resp, err := client.Get(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %s", resp.Status)
	}
	for body, want := range map[string]string{
		`{"jsonrpc":`: `"code":-32700`,
		`[]`:          `"code":-32700`,
		`{"jsonrpc":"2.0","id":7,"method":"eth_getBlockByNumber","params":[]}`:          `"id":7,"error":{"code":-32602`,
		`{"jsonrpc":"2.0","id":8,"method":"eth_getBlockByNumber","params":["0xzz"]}`:    `"id":8,"error":{"code":-32602`,
		`{"jsonrpc":"2.0","id":9,"method":"eth_getBlockByNumber","params":["0x1"]}`:     `"id":9,"result":{`,
		`{"jsonrpc":"2.0","id":10,"method":"eth_getBlockByNumber","params":["latest"]}`: `"id":10,"result":{`,
	} {
		resp, err := client.Post(c.URL(), "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Errorf("%s: got %s, want %s", body, b, want)
		}
	}
}
