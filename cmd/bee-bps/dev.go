// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ethersphere/bee/v2/pkg/metrics"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/devchain"
	"github.com/ethersphere/bps/pkg/node"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
)

const (
	optionNameDevNodes    = "nodes"
	optionNameDevInfoFile = "info-file"
	optionNameDevKeysDir  = "keys-dir"

	// devNetworkID is the dev cluster's private Swarm network id ("bp").
	devNetworkID = 0x6270
	// devConnectTimeout bounds the wait for every node to reach the broker.
	devConnectTimeout = 30 * time.Second
	// devPaymentThreshold is bee's highest payment threshold. Without
	// SWAP, a node's debt to a peer is only forgiven over time (pseudosettle,
	// 4.5M units a second; a tenth of that, and of the threshold, towards a
	// light node), so the threshold is the burst of chunks a node pushes
	// before pushsync waits for the allowance: at bee's default a light node
	// stalls after about four chunks (two persistent updates), here after
	// about thirty.
	devPaymentThreshold = "108000000"
	// maxDevNodes bounds --nodes: each is a whole bee node in this process.
	maxDevNodes = 64
)

// devCluster is what the dev command prints and writes to --info-file. The
// first node is the broker. NetworkID and Chain are what another node needs
// to join the cluster (bee-bps start, or a stock bee: see join).
type devCluster struct {
	Nodes     []devNode `json:"nodes"`
	NetworkID uint64    `json:"networkId"`
	Chain     devChain  `json:"chain"`

	dataDir string // removed at exit
}

// devChain is the development chain's endpoint.
type devChain struct {
	RPC       string `json:"rpc"`       // bee's blockchain-rpc-endpoint
	ChainID   int64  `json:"chainId"`   // what the endpoint reports
	BlockTime uint64 `json:"blockTime"` // seconds, bee's block-time
}

type devNode struct {
	Name      string   `json:"name"`
	API       string   `json:"api"`
	Overlay   string   `json:"overlay"`
	Underlays []string `json:"underlays"`
	// Batch is the id of the node's postage batch (swarm-postage-batch-id).
	Batch string `json:"batch"`
}

// join is the bee-bps start command line (bee's options: a stock bee start
// takes the same but bps-enable) for one more full node that joins c
// through its broker, with keys and state in memory, its API on apiAddr.
func (c devCluster) join(apiAddr string) []string {
	args := []string{"start", "--bps-enable", "--" + optionNameFullNode,
		"--mainnet=false", "--" + optionNameNetworkID, strconv.FormatUint(c.NetworkID, 10),
		"--" + optionNameBlockchainRPCEndpoint, c.Chain.RPC, "--" + optionNameBlockTime, strconv.FormatUint(c.Chain.BlockTime, 10),
		"--" + optionNameSwapEnable + "=false", "--" + optionNameChequebookEnable + "=false", "--" + optionNameStorageIncentivesEnable + "=false",
		"--" + optionNameDataDir, "", "--" + optionNameAPIAddr, apiAddr, "--" + optionNameP2PAddr, "127.0.0.1:0",
		"--" + optionNameAllowPrivateCIDRs, // the cluster is on loopback
		// No warm-up, as the cluster's own nodes (runDev): bee v2.8.1's
		// salud learns the network's storage radius only once a node
		// warmed up (up to 5 minutes, bee's default), and its retrieval
		// and pushsync wait for that radius — a node that joined could
		// neither retrieve (a restarted node's gap recovery timed out)
		// nor upload until then.
		"--" + optionNameWarmUpTime + "=0s",
	}
	if len(c.Nodes) > 0 && len(c.Nodes[0].Underlays) > 0 {
		args = append(args, "--"+optionNameBootnodes, c.Nodes[0].Underlays[0])
	}
	return args
}

func (c *command) initDevCmd() {
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local BPS cluster on loopback (development only)",
		Long: `Run a local cluster in one process, for development: a development chain
on loopback (not a blockchain: no transactions; it plays bee's postage
contract), a full-node broker and --nodes minus one more nodes that
bootstrap from it, all with BPS, on a private network, with data directories
in a temporary directory that is removed at exit. Each node owns a postage
batch, announced by the chain as bee's postage contract does: its id is
what swarm-postage-batch-id takes on that node. Prints each node's API URL,
overlay, batch and underlays, and writes them as JSON to --info-file
(removed at exit too), once every node is connected to the broker and can
upload and store. With --full-node=false one more full node, storer, is
listed last: light nodes store on full nodes, and the broker alone would
not store. Interrupt (Ctrl-C) or SIGTERM stops everything.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			return c.bindFlags(cmd)
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return c.runDev(cmd) },
	}
	f := cmd.Flags()
	f.Int(optionNameDevNodes, 3, "number of nodes, the broker included")
	f.String(optionNameDevInfoFile, "", "write the nodes' addresses as JSON to this file")
	f.String(optionNameDevKeysDir, "", "keep the nodes' keys in this directory across restarts (created if missing): the same overlays and, with a fixed --api-addr, the same p2p ports (API port + 1000) and underlays; empty: new keys and random p2p ports each run")
	f.String(optionNameAPIAddr, "127.0.0.1:1633", "the broker's HTTP API address; node-i listens on the next port up (port+i), or on a random loopback port if the port is 0")
	f.Uint64(optionNameNetworkID, devNetworkID, "ID of the private Swarm network")
	f.Uint64(optionNameBlockTime, 1, "development chain block time in seconds")
	f.Bool(optionNameFullNode, true, "run the nodes other than the broker in full mode (false: light, and one more full node, storer, for them to store on)")
	f.String(optionNameVerbosity, "warn", "log verbosity level 0=silent, 1=error, 2=warn, 3=info, 4=debug, 5=trace")
	f.StringSlice(optionNameCORSAllowedOrigins, devCORSAllowedOrigins, "origins with CORS headers enabled (on /pubsub, \"scheme://host:*\" is any port; bee's own paths take exact origins)")
	setBPSFlags(f, false)
	c.root.AddCommand(cmd)
}

// devReachability is "true" in a binary built with the Makefile's
// DEV_LDFLAGS (make run, make dev-bin), which also turn on bee's switch for
// local clusters (libp2p.reachabilityOverridePublic): on loopback autonat
// never finds a node reachable, and without the switch pushsync never
// stores a chunk at the closest node, so every upload bounces until it
// times out. bee's switch is unexported; this one says it was set with it.
var devReachability string

// devReachabilityWarning is what dev says at start from a binary built
// without the dev ldflags.
const devReachabilityWarning = `warning: this binary was built without the dev ldflags (make run or make dev-bin set them:
  -ldflags "-X github.com/ethersphere/bee/v2/pkg/p2p/libp2p.reachabilityOverridePublic=true -X main.devReachability=true").
  Without bee's local-cluster reachability switch, live pub/sub works but every upload
  (a persistent pub, POST /bytes) bounces for about 37 s and fails ("done split failed").
`

// devCORSAllowedOrigins are the origins the dev cluster allows by default:
// pages served from this machine's loopback on any port, where a dApp's
// development server runs. It is safe as a default: the cluster listens on
// loopback, its chain and batches are throwaway, a page on one of these
// origins is served by a program the developer runs, and a page on any
// other name — a rebound one included — is refused by the Host and Origin
// checks.
var devCORSAllowedOrigins = []string{"http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"}

func (c *command) runDev(cmd *cobra.Command) (err error) {
	if devReachability != "true" {
		fmt.Fprint(cmd.ErrOrStderr(), devReachabilityWarning)
	}
	// Every option is checked before anything starts.
	v := c.config
	count := v.GetInt(optionNameDevNodes)
	if count < 1 || count > maxDevNodes {
		return fmt.Errorf("--%s %d: must be between 1 and %d", optionNameDevNodes, count, maxDevNodes)
	}
	blockTime := time.Duration(v.GetUint64(optionNameBlockTime)) * time.Second
	if blockTime <= 0 {
		return fmt.Errorf("--%s must be positive", optionNameBlockTime)
	}
	verbosity := v.GetString(optionNameVerbosity)
	if _, err := node.ParseVerbosity(verbosity); err != nil {
		return fmt.Errorf("--%s: %w", optionNameVerbosity, err)
	}
	bpsOpts, err := bpsOptions(v)
	prices, pricesErr := bpsPrices(v)
	apiOpts, apiErr := bpsAPIOptions(v, v.GetStringSlice(optionNameCORSAllowedOrigins))
	if err = errors.Join(err, pricesErr, apiErr); err != nil {
		return err
	}
	infoFile := v.GetString(optionNameDevInfoFile)
	if err := checkInfoFile(infoFile); err != nil {
		return err
	}
	fullNodes := v.GetBool(optionNameFullNode)
	// bee stores chunks on full nodes only, and a full node learns the
	// storage radius it stores at from its full peers (see waitStorage):
	// with light nodes only beside it, the broker never would, and every
	// upload from them would wait for it until it fails. The storer is a
	// second full node for them to store on, listed last.
	withStorer := !fullNodes && count > 1
	total := count
	if withStorer {
		total++
	}
	for i := range total {
		if _, err := devAPIAddr(v.GetString(optionNameAPIAddr), i); err != nil {
			return err
		}
		if v.GetString(optionNameDevKeysDir) == "" {
			continue
		}
		if _, err := devAPIAddr(v.GetString(optionNameAPIAddr), i+devP2PPortOffset); err != nil {
			return fmt.Errorf("%w (with --%s the p2p port is the API port + %d)", err, optionNameDevKeysDir, devP2PPortOffset)
		}
	}
	out := cmd.OutOrStdout()

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	// Everything started is stopped in reverse order on the way out.
	var cleanup []func() error
	defer func() {
		stop() // a second signal during cleanup ends the process
		for i := len(cleanup) - 1; i >= 0; i-- {
			err = errors.Join(err, cleanup[i]())
		}
	}()

	logger, err := node.NewLogger(verbosity, out, "devchain")
	if err != nil {
		return err
	}
	dataDir, err := os.MkdirTemp("", "bee-bps-dev-")
	if err != nil {
		return err
	}
	cleanup = append(cleanup, func() error { return os.RemoveAll(dataDir) })
	keysDir := v.GetString(optionNameDevKeysDir)
	password, err := devPassword(keysDir)
	if err != nil {
		return err
	}
	// Each node owns a postage batch in the chain's history: its keys are
	// made first, and the chain announces a batch for each node's Ethereum
	// address, which bee's postage listener finds on the node's first sync.
	names := make([]string, count, total)
	for i := range count {
		names[i] = devNodeName(i)
	}
	if withStorer {
		names = append(names, devStorerName)
	}
	if err := devKeys(keysDir, dataDir, names, false); err != nil {
		return err
	}
	batches, err := devBatches(dataDir, password, names)
	if err != nil {
		return err
	}
	if err := devKeys(keysDir, dataDir, names, true); err != nil {
		return err
	}
	chain, err := devchain.New(devchain.Options{BlockTime: blockTime, Logger: logger, Batches: batches})
	if err != nil {
		return err
	}
	if err := chain.Start(ctx); err != nil {
		return err
	}
	cleanup = append(cleanup, chain.Close)

	cluster := devCluster{
		NetworkID: v.GetUint64(optionNameNetworkID),
		Chain:     devChain{RPC: chain.URL(), ChainID: chain.ChainID(), BlockTime: uint64(chain.BlockTime() / time.Second)},
		Nodes:     make([]devNode, len(names)),
		dataDir:   dataDir,
	}
	watch := newPeerWatch()
	plugin := bpsPlugin(bpsOpts, prices)
	lightOpts := bpsOpts
	lightOpts.RelayCapacity = 0 // a light node cannot be dialled: it relays nothing (SWIP-61)
	lightPlugin := bpsPlugin(lightOpts, prices)
	nodes := make([]*node.Node, len(names))
	// The storer starts right after the broker: the broker's first look at
	// its peers (at its first connection) then finds a full one.
	order := make([]int, 0, len(names))
	order = append(order, 0)
	if withStorer {
		order = append(order, len(names)-1)
	}
	for i := 1; i < count; i++ {
		order = append(order, i)
	}
	for _, i := range order {
		name := names[i]
		cfg := node.DefaultConfig()
		cfg.Name = name
		cfg.DataDir = filepath.Join(dataDir, name)
		cfg.Password = password
		cfg.APIAddr = "127.0.0.1:0"
		cfg.P2PAddr = "127.0.0.1:0"
		if keysDir != "" {
			if cfg.P2PAddr, err = devAPIAddr(v.GetString(optionNameAPIAddr), i+devP2PPortOffset); err != nil {
				return err
			}
		}
		cfg.NetworkID = cluster.NetworkID
		cfg.FullNode = i == 0 || fullNodes || name == devStorerName
		cfg.AllowPrivateCIDRs = true
		cfg.BlockchainRPCEndpoint = chain.URL()
		cfg.BlockTime = chain.BlockTime()
		cfg.SwapEnable = false
		cfg.ChequebookEnable = false
		cfg.StorageIncentivesEnable = false
		cfg.PaymentThreshold = devPaymentThreshold
		cfg.WarmupTime = 0
		cfg.CORSAllowedOrigins = v.GetStringSlice(optionNameCORSAllowedOrigins)
		if cfg.Logger, err = node.NewLogger(verbosity, out, name); err != nil {
			return err
		}
		cfg.Plugin = plugin
		if !cfg.FullNode {
			cfg.Plugin = lightPlugin
		}
		cfg.PubSubHandler = bpsPubSub(apiOpts)
		if cfg.APIAddr, err = devAPIAddr(v.GetString(optionNameAPIAddr), i); err != nil {
			return err
		}
		if i == 0 {
			cfg.Plugin = watch.wrap(plugin)
		}

		n, err := node.Start(ctx, cfg)
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted while starting
			}
			return fmt.Errorf("%s: %w", name, err)
		}
		cleanup = append(cleanup, n.Close)
		nodes[i] = n

		info, err := describe(name, n)
		if err != nil {
			return err
		}
		info.Batch = chain.Batches()[i].ID.Hex()[2:]
		cluster.Nodes[i] = info
		if i == 0 {
			continue
		}
		// Every other node connects to the broker as to any peer, not as
		// to a bootnode: see waitStorage.
		if err := connectDev(ctx, n, cluster.Nodes[0].Underlays); err != nil {
			if ctx.Err() != nil {
				return nil // interrupted while starting
			}
			return fmt.Errorf("%s: %w", name, err)
		}
	}

	// Wait until every node is connected to the broker.
	others := make([]swarm.Address, 0, len(names)-1)
	for _, info := range cluster.Nodes[1:] {
		others = append(others, swarm.MustParseHexAddress(info.Overlay))
	}
	wctx, cancel := context.WithTimeout(ctx, devConnectTimeout)
	err = watch.wait(wctx, others)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting
		}
		fmt.Fprintf(out, "warning: not every node reached the broker: %v\n", err)
	}
	// Then until every node can upload and store (a lone broker never can).
	if count > 1 {
		wctx, cancel := context.WithTimeout(ctx, devConnectTimeout)
		err = waitStorage(wctx, names, nodes)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return nil // interrupted while starting
			}
			fmt.Fprintf(out, "warning: uploads may wait: %v\n", err)
		}
	}

	for _, info := range cluster.Nodes {
		printDevNode(out, info)
	}
	if infoFile != "" {
		if err := writeJSON(infoFile, cluster); err != nil {
			return err
		}
		cleanup = append(cleanup, func() error { return os.Remove(infoFile) })
		fmt.Fprintf(out, "node addresses, chain and network id written to %s\n", infoFile)
	}
	fmt.Fprintf(out, "another node joins with\n  bee-bps %s\n", shellJoin(cluster.join("127.0.0.1:1643")))
	fmt.Fprintln(out, "dev cluster running; Ctrl-C to stop")
	if c.devReady != nil {
		c.devReady(cluster)
	}

	select {
	case <-ctx.Done():
	case <-nodes[0].Done():
		fmt.Fprintln(out, "the broker stopped syncing postage data")
	}
	fmt.Fprintln(out, "stopping the dev cluster")
	return nil
}

// devNodeName is the name of the dev cluster's node i.
func devNodeName(i int) string {
	if i == 0 {
		return "broker"
	}
	return fmt.Sprintf("node-%d", i)
}

// devStorerName is the full node the dev cluster adds beside light ones.
const devStorerName = "storer"

// devBatches are the postage batches of the dev cluster's nodes, one each,
// owned by the Ethereum address of the node's keys, which it makes in the
// node's data directory under dataDir (named as the node): the devchain's
// defaults (depth, a year's worth of balance at its price, immutable as
// bee's API buys).
func devBatches(dataDir, password string, names []string) ([]devchain.Batch, error) {
	batches := make([]devchain.Batch, 0, len(names))
	for _, name := range names {
		cfg := node.Config{DataDir: filepath.Join(dataDir, name), Password: password}
		owner, err := cfg.EthereumAddress()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		batches = append(batches, devchain.Batch{Owner: owner, Immutable: true})
	}
	return batches, nil
}

// connectDev connects n to the broker at one of its underlays, bounded by
// devConnectTimeout.
func connectDev(ctx context.Context, n *node.Node, underlays []string) error {
	ctx, cancel := context.WithTimeout(ctx, devConnectTimeout)
	defer cancel()
	var errs []error
	for _, u := range underlays {
		_, err := n.Connect(ctx, u)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
	}
	return fmt.Errorf("no connection to the broker: %w", errors.Join(errs...))
}

// waitStorage returns once each of nodes has its storage radius, or with
// the names of those that have none when ctx ends. bee v2.8.1's pushsync
// and retrieval wait for it, on the uploading node and on the storing one
// alike, and a node learns it from the first round of salud (GET /status
// of each full peer) that reaches a full peer other than a bootnode: the
// first round runs at the node's first connection, the next 10 s later.
// The dev nodes connect to the broker as ordinary peers, not as to a
// bootnode, so the first round finds it, and this returns within
// milliseconds of the last connection; what it waits for is bee's.
func waitStorage(ctx context.Context, names []string, nodes []*node.Node) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var missing []string
		var errs []error
		for i, n := range nodes {
			_, known, err := n.StorageRadius()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", names[i], err))
			}
			if !known {
				missing = append(missing, names[i])
			}
		}
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("no storage radius on %s: %w", strings.Join(missing, ", "), ctx.Err()), errors.Join(errs...))
		}
	}
}

// describe is a node's entry in the cluster info.
func describe(name string, n *node.Node) (devNode, error) {
	underlays, err := n.Underlays()
	if err != nil {
		return devNode{}, fmt.Errorf("%s: underlays: %w", name, err)
	}
	info := devNode{Name: name, API: n.APIURL(), Overlay: n.Overlay().String()}
	for _, u := range underlays {
		info.Underlays = append(info.Underlays, u.String())
	}
	return info, nil
}

func printDevNode(w io.Writer, n devNode) {
	fmt.Fprintf(w, "%s\n  api      %s\n  overlay  %s\n  batch    %s\n", n.Name, n.API, n.Overlay, n.Batch)
	for _, u := range n.Underlays {
		fmt.Fprintf(w, "  underlay %s\n", u)
	}
}

// shellJoin joins args for a POSIX shell, quoting the empty ones and those
// with characters the shell would read.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n\"'\\$`|&;<>()*?[]#~!{}") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

// checkInfoFile reports, before any node starts, whether path ("" is none)
// can be written: its directory exists and is one.
func checkInfoFile(path string) error {
	if path == "" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("--%s %s: is a directory", optionNameDevInfoFile, path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("--%s %s: directory %s does not exist", optionNameDevInfoFile, path, dir)
	case err != nil:
		return fmt.Errorf("--%s %s: %w", optionNameDevInfoFile, path, pathErr(err))
	case !fi.IsDir():
		return fmt.Errorf("--%s %s: %s is not a directory", optionNameDevInfoFile, path, dir)
	}
	return nil
}

// writeJSON writes v to path through a temporary file in the same
// directory, so a reader never sees half a file. Errors name path, never
// the temporary file.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeAtomic(path, append(b, '\n'), 0o644)
}

// writeAtomic writes b to path through a temporary file in the same
// directory and a rename. Errors name path, never the temporary file.
func writeAtomic(path string, b []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, pathErr(err))
	}
	_, err = tmp.Write(b)
	err = errors.Join(err, tmp.Chmod(perm), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, pathErr(err))
	}
	return nil
}

// pathErr is err without the path an *os.PathError or *os.LinkError carries.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// devP2PPortOffset places a node's p2p port above its API port when the
// cluster keeps its keys (--keys-dir): fixed ports, so that the broker's
// underlay is the same after a restart.
const devP2PPortOffset = 1000

// devPassword is the password of the nodes' keys: a new random one, or with
// keysDir the one kept there (made on the first run, readable by the owner
// only).
func devPassword(keysDir string) (string, error) {
	if keysDir == "" {
		return randomPassword()
	}
	if err := os.MkdirAll(keysDir, 0o700); err != nil {
		return "", fmt.Errorf("--%s: %w", optionNameDevKeysDir, err)
	}
	file := filepath.Join(keysDir, "password")
	b, err := os.ReadFile(file)
	switch {
	case err == nil && len(b) > 0:
		return strings.TrimSpace(string(b)), nil
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("--%s: %w", optionNameDevKeysDir, err)
	}
	pw, err := randomPassword()
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(file, []byte(pw+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("--%s: %w", optionNameDevKeysDir, err)
	}
	return pw, nil
}

// devKeys copies each node's keys between keysDir/<name> and the node's
// data directory: into the data directory before the keys are made (a node
// whose keys are kept starts with them), and back after (keys made on this
// run are kept for the next). Without keysDir it does nothing.
func devKeys(keysDir, dataDir string, names []string, save bool) error {
	if keysDir == "" {
		return nil
	}
	for _, name := range names {
		kept, data := filepath.Join(keysDir, name), filepath.Join(dataDir, name, "keys")
		src, dst := kept, data
		if save {
			src, dst = data, kept
		}
		entries, err := os.ReadDir(src)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("--%s: %w", optionNameDevKeysDir, err)
		}
		if err := os.MkdirAll(dst, 0o700); err != nil {
			return fmt.Errorf("--%s: %w", optionNameDevKeysDir, err)
		}
		for _, e := range entries {
			if !e.Type().IsRegular() {
				continue
			}
			to := filepath.Join(dst, e.Name())
			if _, err := os.Stat(to); err == nil {
				continue // kept keys are never overwritten
			}
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				return fmt.Errorf("--%s: %w", optionNameDevKeysDir, err)
			}
			if err := os.WriteFile(to, b, 0o600); err != nil {
				return fmt.Errorf("--%s: %w", optionNameDevKeysDir, err)
			}
		}
	}
	return nil
}

func randomPassword() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// peerWatch learns, through a plugin's connect hooks, which peers a node is
// connected to.
type peerWatch struct {
	mu      sync.Mutex // guards seen
	seen    map[string]bool
	changed chan struct{} // signalled after seen grows
}

func newPeerWatch() *peerWatch {
	return &peerWatch{seen: make(map[string]bool), changed: make(chan struct{}, 1)}
}

// wrap makes the plugins f builds report their peers to w.
func (w *peerWatch) wrap(f node.PluginFactory) node.PluginFactory {
	return func(env node.PluginEnv) (node.Plugin, error) {
		p, err := f(env)
		if err != nil {
			return nil, err
		}
		return &watchedPlugin{Plugin: p, w: w}, nil
	}
}

func (w *peerWatch) saw(p swarm.Address) {
	w.mu.Lock()
	w.seen[p.ByteString()] = true
	w.mu.Unlock()
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// wait returns when every peer has been seen, or with ctx's error.
func (w *peerWatch) wait(ctx context.Context, peers []swarm.Address) error {
	for {
		w.mu.Lock()
		var missing []swarm.Address
		for _, p := range peers {
			if !w.seen[p.ByteString()] {
				missing = append(missing, p)
			}
		}
		w.mu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			return fmt.Errorf("%d peers missing (%v): %w", len(missing), missing, ctx.Err())
		}
	}
}

type watchedPlugin struct {
	node.Plugin
	w *peerWatch
}

// Metrics passes the wrapped plugin's metrics on.
func (p *watchedPlugin) Metrics() []prometheus.Collector {
	if mc, ok := p.Plugin.(metrics.Collector); ok {
		return mc.Metrics()
	}
	return nil
}

// HoldsStreams passes the wrapped plugin's answer on (node.StreamHolder):
// bee's kademlia does not count, nor prune, the peers holding BPS streams.
func (p *watchedPlugin) HoldsStreams(peer swarm.Address) bool {
	h, ok := p.Plugin.(node.StreamHolder)
	return ok && h.HoldsStreams(peer)
}

func (p *watchedPlugin) Protocol() p2p.ProtocolSpec {
	spec := p.Plugin.Protocol()
	spec.ConnectIn = p.hook(spec.ConnectIn)
	spec.ConnectOut = p.hook(spec.ConnectOut)
	return spec
}

func (p *watchedPlugin) hook(next func(context.Context, p2p.Peer) error) func(context.Context, p2p.Peer) error {
	return func(ctx context.Context, peer p2p.Peer) error {
		p.w.saw(peer.Address)
		if next == nil {
			return nil
		}
		return next(ctx, peer)
	}
}

// devAPIAddr is node i's API address: the broker's (i = 0), then the ports
// above it; a zero port stays zero (random) for every node.
func devAPIAddr(broker string, i int) (string, error) {
	host, port, err := net.SplitHostPort(broker)
	if err != nil {
		return "", fmt.Errorf("--%s: %w", optionNameAPIAddr, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p+i > 65535 {
		return "", fmt.Errorf("--%s: bad port %q", optionNameAPIAddr, port)
	}
	if p == 0 {
		return broker, nil
	}
	return net.JoinHostPort(host, strconv.Itoa(p+i)), nil
}
