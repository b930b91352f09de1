// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package node runs a bee node with a protocol plugin attached.
//
// The node is bee itself, built with bee's node.NewBee from a Config that
// uses bee's option names. bee has no plugin hook, so the plugin is attached
// after NewBee through the seam package (the one place that reads bee's
// private fields): its protocol is registered with bee's libp2p service and
// its ConnectOut hook is run for peers that connected before that ("register,
// then catch up").
//
// The node keeps bee's API on one port: a front server on Config.APIAddr
// serves /pubsub from the plugin's handler and every other path from bee's
// own API handler, while bee's API server, which cannot be disabled, listens
// on a loopback port of its own that nothing uses. A plugin that has metrics
// (bee's metrics.Collector) has them served by bee's /metrics.
package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/addressbook"

	"github.com/ethersphere/bee/v2"
	beeapi "github.com/ethersphere/bee/v2/pkg/api"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/metrics"
	beenode "github.com/ethersphere/bee/v2/pkg/node"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/seam"
	ma "github.com/multiformats/go-multiaddr"
)

// internalAPIAddr is where bee's own API server listens: loopback, any port.
const internalAPIAddr = "127.0.0.1:0"

// Node is a running bee node with its plugin.
type Node struct {
	logger  log.Logger
	bee     *beenode.Bee
	signer  crypto.Signer // the node's bee signer: the plugin's (PluginEnv.Signer)
	in      *seam.Internals
	overlay swarm.Address
	plugin  Plugin
	pubsub  http.Handler
	front   *front
	apiURL  string
	timeout time.Duration
	cancel  context.CancelFunc // ends the context bee was built with

	shutdownOnce sync.Once
	shutdownErr  error
}

// Start builds and starts a bee node from c and attaches c.Plugin. It
// returns once the node is up, its plugin attached and the API port
// serving. Cancelling ctx aborts a start in progress; once Start has
// returned, ctx no longer matters: stop the node with Shutdown or Close.
func Start(ctx context.Context, c Config) (n *Node, err error) {
	if err := seam.Check(); err != nil {
		return nil, err
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	logger, err := c.logger()
	if err != nil {
		return nil, err
	}
	timeout := c.ShutdownTimeout
	if timeout <= 0 {
		timeout = DefaultShutdownTimeout
	}

	// Bind the API port first: a busy port should fail before bee starts.
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", c.APIAddr)
	if err != nil {
		return nil, fmt.Errorf("api listener: %w", err)
	}
	fr := newFront(ln, logger)
	defer func() {
		if err != nil {
			sctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			_ = fr.shutdown(sctx)
		}
	}()

	started := time.Now()
	b, beeCtx, cancel, signer, err := startBee(ctx, c, logger, ln.Addr())
	if err != nil {
		return nil, err
	}

	// From here on every failure shuts bee down. The deferred cleanup holds
	// its own reference: a `return nil, err` sets the named result to nil.
	built := &Node{logger: logger, bee: b, signer: signer, front: fr, timeout: timeout, cancel: cancel}
	n = built
	defer func() {
		if err != nil {
			if serr := built.shutdownBee(); serr != nil {
				err = errors.Join(err, fmt.Errorf("shutdown after a failed start: %w", serr))
			}
			cancel()
		}
	}()

	if err := n.open(beeCtx, c, ln.Addr()); err != nil {
		return nil, err
	}

	logger.Info("bee node started", "overlay", n.overlay, "api", n.apiURL, "plugin", n.plugin != nil, "elapsed", time.Since(started))
	return n, nil
}

// logger is the node's logger: c.Logger, or one writing to c.LogSink
// (default stdout) at c.Verbosity; it must count its lines on bee's
// metrics.
func (c *Config) logger() (log.Logger, error) {
	logger := c.Logger
	if logger == nil {
		sink := c.LogSink
		if sink == nil {
			sink = os.Stdout
		}
		var err error
		if logger, err = NewLogger(c.Verbosity, sink, c.Name); err != nil {
			return nil, err
		}
	}
	if err := checkLogMetrics(logger); err != nil {
		return nil, err
	}
	return logger, nil
}

// startBee builds and starts bee from c, with the keys in c.DataDir. bee
// keeps the context it is built with for its whole life, so it gets one of
// its own, beeCtx, ended by cancel; ctx may only cut the start short. On a
// failure bee has shut down what it built. signer is bee's signer.
func startBee(ctx context.Context, c Config, logger log.Logger, apiAddr net.Addr) (b *beenode.Bee, beeCtx context.Context, cancel context.CancelFunc, signer crypto.Signer, err error) {
	k, err := loadKeys(c.DataDir, c.Password)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	opts, err := c.beeOptions(logger, internalAPIAddr)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("config: %w", err)
	}
	logger.Info("starting bee node", "bee_version", bee.Version, "network_id", c.NetworkID, "full_node", c.FullNode, "api_addr", apiAddr)
	beeCtx, cancel = context.WithCancel(context.Background())
	stop := context.AfterFunc(ctx, cancel)
	b, err = beenode.NewBee(beeCtx, c.P2PAddr, &k.swarm.PublicKey, k.signer, c.NetworkID, logger, k.libp2p, k.pss, k.session(), opts)
	if !stop() && err == nil {
		err = errors.Join(ctx.Err(), b.Shutdown())
	}
	if err != nil {
		cancel()
		// NewBee shuts down what it built when it fails.
		return nil, nil, nil, nil, fmt.Errorf("bee: %w", err)
	}
	return b, beeCtx, cancel, k.signer, nil
}

// open reaches bee's internals through the seam, attaches the plugin and
// the /pubsub handler of c, and serves the API port at apiAddr.
func (n *Node) open(beeCtx context.Context, c Config, apiAddr net.Addr) (err error) {
	if n.in, err = seam.Open(n.bee); err != nil {
		return err
	}
	beeAPI := n.in.APIServer.Handler // read once, never assigned
	if n.overlay, err = overlayOf(beeAPI); err != nil {
		return err
	}
	if err := n.attachPlugin(beeCtx, c.Plugin, beeAPI); err != nil {
		return err
	}
	if err := n.servePubSub(c.PubSubHandler, beeAPI); err != nil {
		return err
	}
	n.front.serve(beeAPI, n.pubsub)
	n.apiURL = "http://" + dialable(apiAddr)
	return nil
}

// attachPlugin builds the plugin with all the node has for it (PluginEnv),
// registers it with bee's libp2p service and its metrics with bee's, and
// keeps the peers holding its streams out of kademlia's counts. No plugin:
// nothing.
func (n *Node) attachPlugin(beeCtx context.Context, factory PluginFactory, beeAPI http.Handler) (err error) {
	if factory == nil {
		return nil
	}
	env := PluginEnv{
		Overlay:   n.overlay,
		Signer:    n.signer,
		Logger:    n.logger,
		PeerCheck: TransportBinding(addressbook.New(n.in.StateStore)),
	}
	if n.in.Accounting != nil {
		env.Accounting = n.in.Accounting
	}
	if n.plugin, err = attach(beeCtx, n.in.P2P, env, factory); err != nil {
		return err
	}
	if err := registerMetrics(beeAPI, n.plugin); err != nil {
		return errors.Join(err, n.plugin.Close())
	}
	if h, ok := n.plugin.(StreamHolder); ok {
		if err := keepStreamPeers(n.bee, n.in, h); err != nil {
			return errors.Join(err, n.plugin.Close())
		}
	}
	return nil
}

// servePubSub builds the handler of /pubsub over the plugin and registers
// its metrics; on a failure it closes the plugin too. No factory: nothing.
func (n *Node) servePubSub(factory PubSubHandlerFactory, beeAPI http.Handler) (err error) {
	if factory == nil {
		return nil
	}
	conn := storageConn{Connector: n.in.P2P, Storage: &Storage{bee: beeAPI}, book: addressbook.New(n.in.StateStore)}
	if n.pubsub, err = factory(n.plugin, conn, n.logger); err != nil {
		err = fmt.Errorf("pubsub api: %w", err)
		if n.plugin != nil {
			err = errors.Join(err, n.plugin.Close())
		}
		return err
	}
	// The handler's own series (bee_bps_api_*: the WebSocket sessions,
	// the shared streams) beside the plugin's.
	if err = registerMetrics(beeAPI, n.pubsub); err != nil {
		if c, ok := n.pubsub.(io.Closer); ok {
			err = errors.Join(err, c.Close())
		}
		if n.plugin != nil {
			err = errors.Join(err, n.plugin.Close())
		}
		return err
	}
	return nil
}

// Overlay is the node's Swarm address.
func (n *Node) Overlay() swarm.Address { return n.overlay }

// Underlays are the node's libp2p addresses, each ending in /p2p/<peer id>.
func (n *Node) Underlays() ([]ma.Multiaddr, error) { return n.in.P2P.Addresses() }

// APIURL is the URL of the node's API port, e.g. http://127.0.0.1:1633.
func (n *Node) APIURL() string { return n.apiURL }

// Plugin is the attached plugin, nil without one.
func (n *Node) Plugin() Plugin { return n.plugin }

// Done is closed when bee asks to be stopped (postage syncing stopped);
// the owner should then call Shutdown.
func (n *Node) Done() <-chan struct{} { return n.bee.SyncingStopped() }

// Close is Shutdown bounded by Config.ShutdownTimeout.
func (n *Node) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), n.timeout)
	defer cancel()
	return n.Shutdown(ctx)
}

// Shutdown stops the API port (requests in flight may finish), closes the
// /pubsub handler if it is an io.Closer (its sessions get their 1001 close
// frames), then the connections left, the plugin, then bee. It gives up waiting when ctx ends, and then reports the steps that
// had not finished; those keep running. Later calls return the first
// call's result.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutdownOnce.Do(func() {
		started := time.Now()
		// The /pubsub handler closes its sessions (1001) once the port
		// accepts no more, before the front drops the connections left.
		var drain func() error
		if c, ok := n.pubsub.(io.Closer); ok {
			drain = func() error { return bounded(ctx, "pubsub api", c.Close) }
		}
		errs := []error{n.front.shutdownWith(ctx, drain)}
		if n.plugin != nil {
			errs = append(errs, bounded(ctx, "plugin", n.plugin.Close))
		}
		errs = append(errs, bounded(ctx, "bee", n.shutdownBee))
		n.cancel()
		n.shutdownErr = errors.Join(errs...)
		n.logger.Info("bee node stopped", "elapsed", time.Since(started), "error", n.shutdownErr)
	})
	return n.shutdownErr
}

// shutdownBee shuts bee down; a second call is not an error.
func (n *Node) shutdownBee() error {
	if err := n.bee.Shutdown(); err != nil && !errors.Is(err, beenode.ErrShutdownInProgress) {
		return err
	}
	return nil
}

// bounded runs f and waits for it until ctx ends.
func bounded(ctx context.Context, name string, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: shutdown not finished: %w", name, ctx.Err())
	}
}

// registerMetrics adds the metrics of v — the plugin, the /pubsub handler
// — if it has any (bee's metrics.Collector), to bee's registry, so that
// bee's /metrics serves them. bee's API handler is its api.Service, which
// exposes the registry.
func registerMetrics(beeAPI http.Handler, v any) error {
	mc, ok := v.(metrics.Collector)
	if !ok {
		return nil
	}
	svc, ok := beeAPI.(*beeapi.Service)
	if !ok {
		return fmt.Errorf("%w: the API handler is a %T, want *api.Service", seam.ErrChanged, beeAPI)
	}
	reg := svc.MetricsRegistry()
	for _, c := range mc.Metrics() {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("metrics of %T: %w", v, err)
		}
	}
	return nil
}

// overlayOf asks bee's API handler for the node's overlay, which bee keeps
// to itself otherwise.
func overlayOf(api http.Handler) (swarm.Address, error) {
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/addresses", nil))
	if rec.Code != http.StatusOK {
		return swarm.ZeroAddress, fmt.Errorf("bee /addresses: status %d: %s", rec.Code, rec.Body)
	}
	var resp struct {
		Overlay swarm.Address `json:"overlay"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		return swarm.ZeroAddress, fmt.Errorf("bee /addresses: %w", err)
	}
	if resp.Overlay.IsZero() {
		return swarm.ZeroAddress, errors.New("bee /addresses: no overlay")
	}
	return resp.Overlay, nil
}

// dialable turns a listener address into one a client can dial: an
// unspecified host (":1633", "[::]:1633") becomes loopback.
func dialable(a net.Addr) string {
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
