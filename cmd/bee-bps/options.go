// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	chaincfg "github.com/ethersphere/bee/v2/pkg/config"
	"github.com/ethersphere/bps/pkg/node"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// bee's option names (cmd/bee/cmd), for the options bee-bps supports.
const (
	optionNameDataDir                      = "data-dir"
	optionNameCacheCapacity                = "cache-capacity"
	optionNameDBOpenFilesLimit             = "db-open-files-limit"
	optionNameDBBlockCacheCapacity         = "db-block-cache-capacity"
	optionNameDBWriteBufferSize            = "db-write-buffer-size"
	optionNameDBDisableSeeksCompaction     = "db-disable-seeks-compaction"
	optionNamePassword                     = "password"
	optionNamePasswordFile                 = "password-file"
	optionNameAPIAddr                      = "api-addr"
	optionNameP2PAddr                      = "p2p-addr"
	optionNameNATAddr                      = "nat-addr"
	optionNameP2PWSEnable                  = "p2p-ws-enable"
	optionNameBootnodes                    = "bootnode"
	optionNameNetworkID                    = "network-id"
	optionNameWelcomeMessage               = "welcome-message"
	optionNameCORSAllowedOrigins           = "cors-allowed-origins"
	optionNameTracingEnabled               = "tracing-enable"
	optionNameTracingEndpoint              = "tracing-endpoint"
	optionNameTracingHost                  = "tracing-host"
	optionNameTracingPort                  = "tracing-port"
	optionNameTracingServiceName           = "tracing-service-name"
	optionNameVerbosity                    = "verbosity"
	optionNamePaymentThreshold             = "payment-threshold"
	optionNamePaymentTolerance             = "payment-tolerance-percent"
	optionNamePaymentEarly                 = "payment-early-percent"
	optionNameResolverEndpoints            = "resolver-options"
	optionNameBootnodeMode                 = "bootnode-mode"
	optionNameBzzTokenAddress              = "bzz-token-address"
	optionNameSwapFactoryAddress           = "swap-factory-address"
	optionNameSwapInitialDeposit           = "swap-initial-deposit"
	optionNameSwapEnable                   = "swap-enable"
	optionNameChequebookEnable             = "chequebook-enable"
	optionNameChequebookVerification       = "chequebook-verification"
	optionNameChequebookMinBalance         = "chequebook-min-balance"
	optionNameFullNode                     = "full-node"
	optionNamePostageContractAddress       = "postage-stamp-address"
	optionNamePostageContractStartBlock    = "postage-stamp-start-block"
	optionNamePriceOracleAddress           = "price-oracle-address"
	optionNameRedistributionAddress        = "redistribution-address"
	optionNameStakingAddress               = "staking-address"
	optionNameBlockTime                    = "block-time"
	optionNameBlockSyncInterval            = "block-sync-interval"
	optionNameWarmUpTime                   = "warmup-time"
	optionNameMainNet                      = "mainnet"
	optionNameRetrievalCaching             = "cache-retrieval"
	optionNameResync                       = "resync"
	optionNameStaticNodes                  = "static-nodes"
	optionNameAllowPrivateCIDRs            = "allow-private-cidrs"
	optionNameStorageIncentivesEnable      = "storage-incentives-enable"
	optionNameStateStoreCacheCapacity      = "statestore-cache-capacity"
	optionNameTargetNeighborhood           = "target-neighborhood"
	optionNameNeighborhoodSuggester        = "neighborhood-suggester"
	optionNameWhitelistedWithdrawalAddress = "withdrawal-addresses-whitelist"
	optionNameTransactionDebugMode         = "transaction-debug-mode"
	optionNameMinimumStorageRadius         = "minimum-storage-radius"
	optionNameReserveCapacityDoubling      = "reserve-capacity-doubling"
	optionNameSkipPostageSnapshot          = "skip-postage-snapshot"
	optionNameMinimumGasTipCap             = "minimum-gas-tip-cap"
	optionNameGasLimitFallback             = "gas-limit-fallback"

	optionNameBlockchainRPCEndpoint    = "blockchain-rpc-endpoint"
	optionNameBlockchainRPCDialTimeout = "blockchain-rpc-dial-timeout"
	optionNameBlockchainRPCTLSTimeout  = "blockchain-rpc-tls-timeout"
	optionNameBlockchainRPCIdleTimeout = "blockchain-rpc-idle-timeout"
	optionNameBlockchainRPCKeepalive   = "blockchain-rpc-keepalive"
)

// rpcNested maps each blockchain-rpc-* option to bee's nested YAML form
// (blockchain-rpc: {endpoint: …}), which bee accepts too and prefers.
var rpcNested = map[string]string{
	optionNameBlockchainRPCEndpoint:    "blockchain-rpc.endpoint",
	optionNameBlockchainRPCDialTimeout: "blockchain-rpc.dial-timeout",
	optionNameBlockchainRPCTLSTimeout:  "blockchain-rpc.tls-timeout",
	optionNameBlockchainRPCIdleTimeout: "blockchain-rpc.idle-timeout",
	optionNameBlockchainRPCKeepalive:   "blockchain-rpc.keepalive",
}

// isNestedRPCKey reports whether k is the nested form of a blockchain-rpc
// option cmd has.
func isNestedRPCKey(k string, cmd *cobra.Command) bool {
	for flat, nested := range rpcNested {
		if k == nested && cmd.Flags().Lookup(flat) != nil {
			return true
		}
	}
	return false
}

// resolveNestedRPC gives each blockchain-rpc option the value of its nested
// YAML form when there is one and the flag was not given on the command
// line, as bee does.
func resolveNestedRPC(v *viper.Viper, flags *pflag.FlagSet) {
	for flat, nested := range rpcNested {
		if f := flags.Lookup(flat); f == nil || f.Changed || !v.IsSet(nested) {
			continue
		}
		v.Set(flat, v.Get(nested))
	}
}

// setNodeFlags defines the node options of start, with bee's defaults.
func (c *command) setNodeFlags(f *pflag.FlagSet) {
	d := node.DefaultConfig()
	f.String(optionNameDataDir, c.dataPath(".bee"), "data directory")
	f.Uint64(optionNameCacheCapacity, d.CacheCapacity, "cache capacity in chunks")
	f.Uint64(optionNameDBOpenFilesLimit, d.DBOpenFilesLimit, "number of open files allowed by database")
	f.Uint64(optionNameDBBlockCacheCapacity, d.DBBlockCacheCapacity, "size of block cache of the database in bytes")
	f.Uint64(optionNameDBWriteBufferSize, d.DBWriteBufferSize, "size of the database write buffer in bytes")
	f.Bool(optionNameDBDisableSeeksCompaction, d.DBDisableSeeksCompaction, "disables db compactions triggered by seeks")
	f.String(optionNamePassword, "", "password for decrypting keys")
	f.String(optionNamePasswordFile, "", "path to a file that contains password for decrypting keys")
	f.String(optionNameAPIAddr, d.APIAddr, "HTTP API listen address (bee's API and /pubsub)")
	f.String(optionNameP2PAddr, d.P2PAddr, "P2P listen address")
	f.String(optionNameNATAddr, "", "NAT exposed address")
	f.Bool(optionNameP2PWSEnable, false, "enable P2P WebSocket transport")
	f.StringSlice(optionNameBootnodes, []string{"/dnsaddr/mainnet.ethswarm.org"}, "initial nodes to connect to")
	f.Uint64(optionNameNetworkID, chaincfg.Mainnet.NetworkID, "ID of the Swarm network")
	f.StringSlice(optionNameCORSAllowedOrigins, []string{}, "origins with CORS headers enabled")
	f.Bool(optionNameTracingEnabled, false, "enable tracing")
	f.String(optionNameTracingEndpoint, d.TracingEndpoint, "endpoint to send tracing data")
	f.String(optionNameTracingHost, "", "host to send tracing data")
	f.String(optionNameTracingPort, "", "port to send tracing data")
	f.String(optionNameTracingServiceName, d.TracingServiceName, "service name identifier for tracing")
	f.String(optionNameVerbosity, d.Verbosity, "log verbosity level 0=silent, 1=error, 2=warn, 3=info, 4=debug, 5=trace")
	f.String(optionNameWelcomeMessage, "", "send a welcome message string during handshakes")
	f.String(optionNamePaymentThreshold, d.PaymentThreshold, "threshold in BZZ where you expect to get paid from your peers")
	f.Int64(optionNamePaymentTolerance, d.PaymentTolerance, "excess debt above payment threshold in percentages where you disconnect from your peer")
	f.Int64(optionNamePaymentEarly, d.PaymentEarly, "percentage below the peers payment threshold when we initiate settlement")
	f.StringSlice(optionNameResolverEndpoints, []string{}, "ENS compatible API endpoint for a TLD and with contract address, can be repeated, format [tld:][contract-addr@]url")
	f.Bool(optionNameBootnodeMode, false, "cause the node to always accept incoming connections")
	f.String(optionNameBlockchainRPCEndpoint, "", "rpc blockchain endpoint")
	f.Duration(optionNameBlockchainRPCDialTimeout, d.BlockchainRPCDialTimeout, "blockchain rpc TCP dial timeout")
	f.Duration(optionNameBlockchainRPCTLSTimeout, d.BlockchainRPCTLSTimeout, "blockchain rpc TLS handshake timeout")
	f.Duration(optionNameBlockchainRPCIdleTimeout, d.BlockchainRPCIdleTimeout, "blockchain rpc idle connection timeout")
	f.Duration(optionNameBlockchainRPCKeepalive, d.BlockchainRPCKeepalive, "blockchain rpc TCP keepalive interval")
	f.String(optionNameSwapFactoryAddress, "", "swap factory addresses")
	f.String(optionNameBzzTokenAddress, "", "bzz token contract address")
	f.String(optionNameSwapInitialDeposit, d.SwapInitialDeposit, "initial deposit if deploying a new chequebook")
	f.Bool(optionNameSwapEnable, false, "enable swap")
	f.Bool(optionNameChequebookEnable, d.ChequebookEnable, "enable chequebook")
	f.Bool(optionNameChequebookVerification, false, "reject full-node hive/handshake records that carry no chequebook address")
	f.String(optionNameChequebookMinBalance, d.ChequebookMinBalance, "minimum chequebook token balance required for verification, in token small units")
	f.Bool(optionNameFullNode, false, "cause the node to start in full mode")
	f.String(optionNamePostageContractAddress, "", "postage stamp contract address")
	f.Uint64(optionNamePostageContractStartBlock, 0, "postage stamp contract start block number")
	f.String(optionNamePriceOracleAddress, "", "price oracle contract address")
	f.String(optionNameRedistributionAddress, "", "redistribution contract address")
	f.String(optionNameStakingAddress, "", "staking contract address")
	f.Uint64(optionNameBlockTime, 5, "chain block time in seconds")
	f.Uint64(optionNameBlockSyncInterval, d.BlockSyncInterval, "block number cache sync interval in blocks")
	f.Duration(optionNameWarmUpTime, d.WarmupTime, "maximum node warmup duration; proceeds when stable or after this time")
	f.Bool(optionNameMainNet, true, "triggers connect to main net bootnodes.")
	f.Bool(optionNameRetrievalCaching, d.RetrievalCaching, "enable forwarded content caching")
	f.Bool(optionNameResync, false, "forces the node to resync postage contract data")
	f.StringSlice(optionNameStaticNodes, []string{}, "protect nodes from getting kicked out on bootnode")
	f.Bool(optionNameAllowPrivateCIDRs, false, "allow to advertise private CIDRs to the public network")
	f.Bool(optionNameStorageIncentivesEnable, d.StorageIncentivesEnable, "enable storage incentives feature")
	f.Uint64(optionNameStateStoreCacheCapacity, d.StatestoreCacheCapacity, "lru memory caching capacity in number of statestore entries")
	f.String(optionNameTargetNeighborhood, "", "neighborhood to target in binary format (ex: 111111001) for mining the initial overlay")
	f.String(optionNameNeighborhoodSuggester, "https://api.swarmscan.io/v1/network/neighborhoods/suggestion", "suggester for target neighborhood (mainnet only)")
	f.StringSlice(optionNameWhitelistedWithdrawalAddress, []string{}, "withdrawal target addresses")
	f.Bool(optionNameTransactionDebugMode, false, "skips the gas estimate step for contract transactions")
	f.Uint(optionNameMinimumStorageRadius, 0, "minimum radius storage threshold")
	f.Int(optionNameReserveCapacityDoubling, 0, "reserve capacity doubling")
	f.Bool(optionNameSkipPostageSnapshot, false, "skip postage snapshot")
	f.Uint64(optionNameMinimumGasTipCap, 0, "minimum gas tip cap in wei for transactions, 0 means use suggested gas tip cap")
	f.Uint64(optionNameGasLimitFallback, d.GasLimitFallback, "gas limit fallback when estimation fails for contract transactions")
}

// nodeConfig reads the node options the way bee's start command does.
func nodeConfig(v *viper.Viper) (node.Config, error) {
	c := node.DefaultConfig()

	// bee: mainnet (the default) means network id 1; a network id given
	// with mainnet on must be 1; without mainnet the default is testnet's.
	networkID := chaincfg.Testnet.NetworkID
	mainnet := v.GetBool(optionNameMainNet)
	if v.IsSet(optionNameNetworkID) {
		networkID = v.GetUint64(optionNameNetworkID)
		if mainnet && networkID != chaincfg.Mainnet.NetworkID {
			return c, errors.New("provided network ID does not match mainnet")
		}
	} else if mainnet {
		networkID = chaincfg.Mainnet.NetworkID
	}
	c.NetworkID = networkID

	// Per-network bootnodes and block time, as bee; explicit values win.
	blockTime := time.Duration(v.GetUint64(optionNameBlockTime)) * time.Second
	switch networkID {
	case chaincfg.Mainnet.NetworkID:
		c.Bootnodes = []string{"/dnsaddr/mainnet.ethswarm.org"}
		blockTime = 5 * time.Second
		c.NeighborhoodSuggester = v.GetString(optionNameNeighborhoodSuggester)
	case chaincfg.Testnet.NetworkID:
		c.Bootnodes = []string{"/dnsaddr/testnet.ethswarm.org"}
		blockTime = 12 * time.Second
	default:
		c.Bootnodes = nil
	}
	if v.IsSet(optionNameBootnodes) {
		c.Bootnodes = v.GetStringSlice(optionNameBootnodes)
	}
	if bt := v.GetUint64(optionNameBlockTime); v.IsSet(optionNameBlockTime) && bt != 0 {
		blockTime = time.Duration(bt) * time.Second
	}
	c.BlockTime = blockTime

	password, err := readPassword(v)
	if err != nil {
		return c, err
	}
	c.Password = password

	c.DataDir = v.GetString(optionNameDataDir)
	c.APIAddr = v.GetString(optionNameAPIAddr)
	c.P2PAddr = v.GetString(optionNameP2PAddr)
	c.NATAddr = v.GetString(optionNameNATAddr)
	c.P2PWSEnable = v.GetBool(optionNameP2PWSEnable)
	c.BootnodeMode = v.GetBool(optionNameBootnodeMode)
	c.FullNode = v.GetBool(optionNameFullNode)
	c.AllowPrivateCIDRs = v.GetBool(optionNameAllowPrivateCIDRs)
	c.WelcomeMessage = v.GetString(optionNameWelcomeMessage)
	c.StaticNodes = v.GetStringSlice(optionNameStaticNodes)
	c.CORSAllowedOrigins = v.GetStringSlice(optionNameCORSAllowedOrigins)
	c.Verbosity = v.GetString(optionNameVerbosity)

	c.BlockchainRPCEndpoint = v.GetString(optionNameBlockchainRPCEndpoint)
	c.BlockchainRPCDialTimeout = v.GetDuration(optionNameBlockchainRPCDialTimeout)
	c.BlockchainRPCTLSTimeout = v.GetDuration(optionNameBlockchainRPCTLSTimeout)
	c.BlockchainRPCIdleTimeout = v.GetDuration(optionNameBlockchainRPCIdleTimeout)
	c.BlockchainRPCKeepalive = v.GetDuration(optionNameBlockchainRPCKeepalive)
	c.BlockSyncInterval = v.GetUint64(optionNameBlockSyncInterval)
	c.MinimumGasTipCap = v.GetUint64(optionNameMinimumGasTipCap)
	c.GasLimitFallback = v.GetUint64(optionNameGasLimitFallback)
	c.TrxDebugMode = v.GetBool(optionNameTransactionDebugMode)

	c.SwapEnable = v.GetBool(optionNameSwapEnable)
	c.SwapInitialDeposit = v.GetString(optionNameSwapInitialDeposit)
	c.SwapFactoryAddress = v.GetString(optionNameSwapFactoryAddress)
	c.ChequebookEnable = v.GetBool(optionNameChequebookEnable)
	c.ChequebookVerification = v.GetBool(optionNameChequebookVerification)
	c.ChequebookMinBalance = v.GetString(optionNameChequebookMinBalance)
	c.WithdrawalAddresses = v.GetStringSlice(optionNameWhitelistedWithdrawalAddress)
	c.StorageIncentivesEnable = v.GetBool(optionNameStorageIncentivesEnable)
	c.PaymentThreshold = v.GetString(optionNamePaymentThreshold)
	c.PaymentTolerance = v.GetInt64(optionNamePaymentTolerance)
	c.PaymentEarly = v.GetInt64(optionNamePaymentEarly)

	c.BzzTokenAddress = v.GetString(optionNameBzzTokenAddress)
	c.PostageContractAddress = v.GetString(optionNamePostageContractAddress)
	c.PostageContractStartBlock = v.GetUint64(optionNamePostageContractStartBlock)
	c.PriceOracleAddress = v.GetString(optionNamePriceOracleAddress)
	c.RedistributionAddress = v.GetString(optionNameRedistributionAddress)
	c.StakingAddress = v.GetString(optionNameStakingAddress)
	c.SkipPostageSnapshot = v.GetBool(optionNameSkipPostageSnapshot)
	c.Resync = v.GetBool(optionNameResync)

	c.CacheCapacity = v.GetUint64(optionNameCacheCapacity)
	c.DBOpenFilesLimit = v.GetUint64(optionNameDBOpenFilesLimit)
	c.DBBlockCacheCapacity = v.GetUint64(optionNameDBBlockCacheCapacity)
	c.DBWriteBufferSize = v.GetUint64(optionNameDBWriteBufferSize)
	c.DBDisableSeeksCompaction = v.GetBool(optionNameDBDisableSeeksCompaction)
	c.StatestoreCacheCapacity = v.GetUint64(optionNameStateStoreCacheCapacity)
	c.RetrievalCaching = v.GetBool(optionNameRetrievalCaching)
	c.WarmupTime = v.GetDuration(optionNameWarmUpTime)
	c.ReserveCapacityDoubling = v.GetInt(optionNameReserveCapacityDoubling)
	c.MinimumStorageRadius = v.GetUint(optionNameMinimumStorageRadius)
	c.TargetNeighborhood = v.GetString(optionNameTargetNeighborhood)
	c.ResolverOptions = v.GetStringSlice(optionNameResolverEndpoints)

	c.TracingEnabled = v.GetBool(optionNameTracingEnabled)
	c.TracingEndpoint = v.GetString(optionNameTracingEndpoint)
	if v.IsSet(optionNameTracingHost) && v.IsSet(optionNameTracingPort) {
		c.TracingEndpoint = v.GetString(optionNameTracingHost) + ":" + v.GetString(optionNameTracingPort)
	}
	c.TracingServiceName = v.GetString(optionNameTracingServiceName)
	return c, nil
}

// readPassword reads password, else the first line of password-file. bee
// prompts on the terminal without either; bee-bps requires one.
func readPassword(v *viper.Viper) (string, error) {
	if p := v.GetString(optionNamePassword); p != "" {
		return p, nil
	}
	pf := v.GetString(optionNamePasswordFile)
	if pf == "" {
		if v.GetString(optionNameDataDir) == "" {
			return "", nil // keys in memory
		}
		return "", errors.New("password or password-file is required to encrypt the keys in data-dir")
	}
	b, err := os.ReadFile(pf)
	if err != nil {
		return "", fmt.Errorf("password-file: %w", err)
	}
	return string(bytes.Trim(b, "\n")), nil
}
