// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"path/filepath"
	"time"

	"github.com/ethereum/go-ethereum/common"
	chaincfg "github.com/ethersphere/bee/v2/pkg/config"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	filekeystore "github.com/ethersphere/bee/v2/pkg/keystore/file"
	"github.com/ethersphere/bee/v2/pkg/log"
	beenode "github.com/ethersphere/bee/v2/pkg/node"
	"github.com/ethersphere/bee/v2/pkg/resolver/multiresolver"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// Config configures a node. Start from DefaultConfig: its values are bee's
// defaults, and several zero values are not valid. Each field names the bee
// option (flag, BEE_… environment variable, YAML key) it stands for.
type Config struct {
	// Name tells the node's log lines apart when several nodes share a
	// process (the dev cluster). Not a bee option.
	Name string

	DataDir  string // data-dir; empty keeps keys and state in memory
	Password string // password (the caller reads password-file)

	APIAddr string // api-addr: the single API port, bee's API and /pubsub
	P2PAddr string // p2p-addr
	NATAddr string // nat-addr

	NetworkID         uint64   // network-id
	ChainID           int64    // 0: derived from NetworkID as bee does (-1: the chain's)
	Bootnodes         []string // bootnode
	BootnodeMode      bool     // bootnode-mode
	FullNode          bool     // full-node
	AllowPrivateCIDRs bool     // allow-private-cidrs
	WelcomeMessage    string   // welcome-message
	StaticNodes       []string // static-nodes
	P2PWSEnable       bool     // p2p-ws-enable

	BlockchainRPCEndpoint    string        // blockchain-rpc-endpoint
	BlockchainRPCDialTimeout time.Duration // blockchain-rpc-dial-timeout
	BlockchainRPCTLSTimeout  time.Duration // blockchain-rpc-tls-timeout
	BlockchainRPCIdleTimeout time.Duration // blockchain-rpc-idle-timeout
	BlockchainRPCKeepalive   time.Duration // blockchain-rpc-keepalive
	BlockTime                time.Duration // block-time
	BlockSyncInterval        uint64        // block-sync-interval
	MinimumGasTipCap         uint64        // minimum-gas-tip-cap
	GasLimitFallback         uint64        // gas-limit-fallback
	TrxDebugMode             bool          // transaction-debug-mode

	SwapEnable              bool     // swap-enable
	SwapInitialDeposit      string   // swap-initial-deposit
	SwapFactoryAddress      string   // swap-factory-address
	ChequebookEnable        bool     // chequebook-enable
	ChequebookVerification  bool     // chequebook-verification
	ChequebookMinBalance    string   // chequebook-min-balance
	WithdrawalAddresses     []string // withdrawal-addresses-whitelist
	StorageIncentivesEnable bool     // storage-incentives-enable
	PaymentThreshold        string   // payment-threshold
	PaymentTolerance        int64    // payment-tolerance-percent
	PaymentEarly            int64    // payment-early-percent

	BzzTokenAddress           string // bzz-token-address
	PostageContractAddress    string // postage-stamp-address
	PostageContractStartBlock uint64 // postage-stamp-start-block
	PriceOracleAddress        string // price-oracle-address
	RedistributionAddress     string // redistribution-address
	StakingAddress            string // staking-address
	SkipPostageSnapshot       bool   // skip-postage-snapshot
	Resync                    bool   // resync

	CacheCapacity            uint64        // cache-capacity
	DBOpenFilesLimit         uint64        // db-open-files-limit
	DBBlockCacheCapacity     uint64        // db-block-cache-capacity
	DBWriteBufferSize        uint64        // db-write-buffer-size
	DBDisableSeeksCompaction bool          // db-disable-seeks-compaction
	StatestoreCacheCapacity  uint64        // statestore-cache-capacity
	RetrievalCaching         bool          // cache-retrieval
	WarmupTime               time.Duration // warmup-time
	ReserveCapacityDoubling  int           // reserve-capacity-doubling
	MinimumStorageRadius     uint          // minimum-storage-radius
	TargetNeighborhood       string        // target-neighborhood
	NeighborhoodSuggester    string        // neighborhood-suggester (bee uses it on mainnet only)
	ResolverOptions          []string      // resolver-options

	CORSAllowedOrigins []string // cors-allowed-origins

	TracingEnabled     bool   // tracing-enable
	TracingEndpoint    string // tracing-endpoint
	TracingServiceName string // tracing-service-name

	// Verbosity is bee's verbosity option: 0–5 or silent, error, warn,
	// info, debug, trace. Ignored when Logger is set.
	Verbosity string
	// LogSink receives the log lines. Default: standard output, as bee.
	LogSink io.Writer
	// Logger overrides Verbosity and LogSink. It must be built after
	// log.ModifyDefaults(log.WithLogMetrics()) (see NewLogger).
	Logger log.Logger

	// Plugin builds the protocol attached to the node; nil attaches
	// nothing.
	Plugin PluginFactory
	// PubSubHandler builds the handler for the API paths under /pubsub once
	// the plugin exists. nil, or a nil handler, answers 404 there.
	PubSubHandler PubSubHandlerFactory
	// ShutdownTimeout bounds Close. Default DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// DefaultShutdownTimeout bounds Close when Config.ShutdownTimeout is zero.
const DefaultShutdownTimeout = 30 * time.Second

// DefaultConfig returns bee's defaults for the options Config has, on bee's
// testnet network id, without bootnodes and in light mode.
func DefaultConfig() Config {
	return Config{
		APIAddr:                  "127.0.0.1:1633",
		P2PAddr:                  ":1634",
		NetworkID:                chaincfg.Testnet.NetworkID,
		BlockchainRPCDialTimeout: 30 * time.Second,
		BlockchainRPCTLSTimeout:  10 * time.Second,
		BlockchainRPCIdleTimeout: 90 * time.Second,
		BlockchainRPCKeepalive:   30 * time.Second,
		BlockTime:                5 * time.Second,
		BlockSyncInterval:        10,
		GasLimitFallback:         500_000,
		ChequebookMinBalance:     "110000000000000000",
		SwapInitialDeposit:       "0",
		ChequebookEnable:         true,
		StorageIncentivesEnable:  true,
		PaymentThreshold:         "13500000",
		PaymentTolerance:         25,
		PaymentEarly:             50,
		CacheCapacity:            1_000_000,
		DBOpenFilesLimit:         200,
		DBBlockCacheCapacity:     32 * 1024 * 1024,
		DBWriteBufferSize:        32 * 1024 * 1024,
		DBDisableSeeksCompaction: true,
		StatestoreCacheCapacity:  100_000,
		RetrievalCaching:         true,
		WarmupTime:               5 * time.Minute,
		TracingEndpoint:          "127.0.0.1:6831",
		TracingServiceName:       "bee",
		Verbosity:                "info",
		ShutdownTimeout:          DefaultShutdownTimeout,
	}
}

// The range bee accepts for a full node's payment threshold (node.go).
var (
	minPaymentThreshold = big.NewInt(2 * 4_500_000)
	maxPaymentThreshold = big.NewInt(24 * 4_500_000)
)

// validate checks what NewBee would otherwise fail on late, panic on, or
// silently misread.
func (c *Config) validate() error {
	if c.APIAddr == "" {
		// bee's API cannot be disabled: without it NewBee panics on the
		// first peer.
		return errors.New("api-addr is required")
	}
	if _, _, err := net.SplitHostPort(c.APIAddr); err != nil {
		return fmt.Errorf("api-addr %q: %w", c.APIAddr, err)
	}
	if c.P2PAddr == "" {
		return errors.New("p2p-addr is required")
	}
	if c.DataDir != "" && c.Password == "" {
		return errors.New("a password is required to encrypt the keys in data-dir")
	}
	if c.FullNode && c.BlockchainRPCEndpoint == "" {
		return errors.New("a full node needs blockchain-rpc-endpoint")
	}
	if c.BootnodeMode && !c.FullNode {
		return errors.New("boot node must be started as a full node")
	}
	if len(c.StaticNodes) > 0 && !c.BootnodeMode {
		return errors.New("static nodes can only be configured on bootnodes")
	}
	if c.BlockTime <= 0 {
		return fmt.Errorf("block-time %s must be positive", c.BlockTime)
	}
	t, ok := new(big.Int).SetString(c.PaymentThreshold, 10)
	if !ok {
		return fmt.Errorf("payment-threshold %q is not a base-10 integer", c.PaymentThreshold)
	}
	if t.Cmp(minPaymentThreshold) < 0 || t.Cmp(maxPaymentThreshold) > 0 {
		return fmt.Errorf("payment-threshold %s outside [%s, %s]", t, minPaymentThreshold, maxPaymentThreshold)
	}
	if c.Logger == nil {
		if _, err := ParseVerbosity(c.Verbosity); err != nil {
			return err
		}
	}
	return nil
}

// chainID is the chain id bee is told to expect on c's network: bee's
// known chains for its own network ids, else whatever the endpoint reports
// (which must then be a chain bee knows, like the devchain's).
func (c *Config) chainID() int64 {
	if c.ChainID != 0 {
		return c.ChainID
	}
	switch c.NetworkID {
	case chaincfg.Mainnet.NetworkID:
		return chaincfg.Mainnet.ChainID
	case chaincfg.Testnet.NetworkID, 5: // 5 is bee's staging network
		return chaincfg.Testnet.ChainID
	default:
		return -1
	}
}

// beeOptions translates c into NewBee's options. internalAPIAddr is where
// bee's own API server listens.
func (c *Config) beeOptions(logger log.Logger, internalAPIAddr string) (*beenode.Options, error) {
	var resolvers []multiresolver.ConnectionConfig
	if len(c.ResolverOptions) > 0 {
		var err error
		if resolvers, err = multiresolver.ParseConnectionStrings(c.ResolverOptions); err != nil {
			return nil, fmt.Errorf("resolver-options: %w", err)
		}
	}
	static := make([]swarm.Address, 0, len(c.StaticNodes))
	for _, s := range c.StaticNodes {
		a, err := swarm.ParseHexAddress(s)
		if err != nil {
			return nil, fmt.Errorf("static-nodes: %q: %w", s, err)
		}
		static = append(static, a)
	}
	var autoTLSDir string
	if c.DataDir != "" {
		autoTLSDir = filepath.Join(c.DataDir, "autotls")
	}
	for name, a := range map[string]string{
		"bzz-token-address":      c.BzzTokenAddress,
		"postage-stamp-address":  c.PostageContractAddress,
		"price-oracle-address":   c.PriceOracleAddress,
		"redistribution-address": c.RedistributionAddress,
		"staking-address":        c.StakingAddress,
	} {
		if a != "" && !common.IsHexAddress(a) {
			return nil, fmt.Errorf("%s %q is not an address", name, a)
		}
	}
	var bzzToken common.Address
	if c.BzzTokenAddress != "" {
		bzzToken = common.HexToAddress(c.BzzTokenAddress)
	}

	return &beenode.Options{
		Addr:                          c.P2PAddr,
		AllowPrivateCIDRs:             c.AllowPrivateCIDRs,
		APIAddr:                       internalAPIAddr,
		AutoTLSStorageDir:             autoTLSDir,
		BlockchainRpcEndpoint:         c.BlockchainRPCEndpoint,
		BlockchainRpcDialTimeout:      c.BlockchainRPCDialTimeout,
		BlockchainRpcTLSTimeout:       c.BlockchainRPCTLSTimeout,
		BlockchainRpcIdleTimeout:      c.BlockchainRPCIdleTimeout,
		BlockchainRpcKeepalive:        c.BlockchainRPCKeepalive,
		BlockTime:                     c.BlockTime,
		BzzTokenAddress:               bzzToken,
		BlockSyncInterval:             c.BlockSyncInterval,
		BootnodeMode:                  c.BootnodeMode,
		Bootnodes:                     c.Bootnodes,
		CacheCapacity:                 c.CacheCapacity,
		ChainID:                       c.chainID(),
		ChequebookEnable:              c.ChequebookEnable,
		ChequebookMinBalance:          c.ChequebookMinBalance,
		ChequebookVerification:        c.ChequebookVerification,
		CORSAllowedOrigins:            c.CORSAllowedOrigins,
		DataDir:                       c.DataDir,
		DBBlockCacheCapacity:          c.DBBlockCacheCapacity,
		DBDisableSeeksCompaction:      c.DBDisableSeeksCompaction,
		DBOpenFilesLimit:              c.DBOpenFilesLimit,
		DBWriteBufferSize:             c.DBWriteBufferSize,
		EnableStorageIncentives:       c.StorageIncentivesEnable,
		EnableWS:                      c.P2PWSEnable,
		FullNodeMode:                  c.FullNode,
		GasLimitFallback:              c.GasLimitFallback,
		Logger:                        logger,
		MinimumGasTipCap:              c.MinimumGasTipCap,
		MinimumStorageRadius:          c.MinimumStorageRadius,
		NATAddr:                       c.NATAddr,
		NeighborhoodSuggester:         c.NeighborhoodSuggester,
		PaymentEarly:                  c.PaymentEarly,
		PaymentThreshold:              c.PaymentThreshold,
		PaymentTolerance:              c.PaymentTolerance,
		PostageContractAddress:        c.PostageContractAddress,
		PostageContractStartBlock:     c.PostageContractStartBlock,
		PriceOracleAddress:            c.PriceOracleAddress,
		RedistributionContractAddress: c.RedistributionAddress,
		ReserveCapacityDoubling:       c.ReserveCapacityDoubling,
		ResolverConnectionCfgs:        resolvers,
		Resync:                        c.Resync,
		RetrievalCaching:              c.RetrievalCaching,
		SkipPostageSnapshot:           c.SkipPostageSnapshot,
		StakingContractAddress:        c.StakingAddress,
		StatestoreCacheCapacity:       c.StatestoreCacheCapacity,
		StaticNodes:                   static,
		SwapEnable:                    c.SwapEnable,
		SwapFactoryAddress:            c.SwapFactoryAddress,
		SwapInitialDeposit:            c.SwapInitialDeposit,
		TargetNeighborhood:            c.TargetNeighborhood,
		TracingEnabled:                c.TracingEnabled,
		TracingEndpoint:               c.TracingEndpoint,
		TracingServiceName:            c.TracingServiceName,
		TrxDebugMode:                  c.TrxDebugMode,
		WarmupTime:                    c.WarmupTime,
		WelcomeMessage:                c.WelcomeMessage,
		WhitelistedWithdrawalAddress:  c.WithdrawalAddresses,
	}, nil
}

// EthereumAddress is the Ethereum address of the node c configures: the
// address of its swarm key, which bee uses as the node's Ethereum address
// (the owner of its postage batches, what GET /addresses calls ethereum).
// It loads the keys in c.DataDir, creating them if there are none yet, so
// that a node started from c has this address. A node that keeps its keys
// in memory (no DataDir) has none before it starts.
func (c *Config) EthereumAddress() (common.Address, error) {
	if c.DataDir == "" {
		return common.Address{}, errors.New("a node without data-dir has new keys at each start: no Ethereum address before it starts")
	}
	if c.Password == "" {
		return common.Address{}, errors.New("a password is required to encrypt the keys in data-dir")
	}
	// The swarm key only: each key costs bee's keystore a scrypt round.
	key, _, err := filekeystore.New(filepath.Join(c.DataDir, "keys")).Key(swarmKeyName, c.Password, crypto.EDGSecp256_K1)
	if err != nil {
		return common.Address{}, fmt.Errorf("swarm key: %w", err)
	}
	return crypto.NewDefaultSigner(key).EthereumAddress()
}
