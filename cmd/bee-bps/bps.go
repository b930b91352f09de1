// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// This file is the only one that knows pkg/bps: its options and the adapter
// that makes a bps.Service the node's plugin.

const (
	optionNameBPSEnable              = "bps-enable"
	optionNameBPSMaxStreamsPerCohort = "bps-max-streams-per-cohort"
	optionNameBPSMaxCohorts          = "bps-max-cohorts"
	optionNameBPSMaxCohortsPerPeer   = "bps-max-cohorts-per-peer"
	optionNameBPSQueueLen            = "bps-queue-len"
	optionNameBPSInactivity          = "bps-inactivity"
	optionNameBPSClaimDeadline       = "bps-claim-deadline"
	optionNameBPSRelayCapacity       = "bps-relay-capacity"
	optionNameBPSLazyPush            = "bps-lazy-push"
	optionNameBPSProtocolIDs         = "bps-protocol-ids"
	optionNameBPSRevocationGrace     = "bps-revocation-grace"
	optionNameBPSHeartbeat           = "bps-heartbeat"

	optionNameBPSDeliveryPrice = "bps-delivery-price"
	optionNameBPSPublishPrice  = "bps-publish-price"

	optionNameBPSAPIMaxSessions          = "bps-api-max-sessions"
	optionNameBPSAPIMaxSessionsPerClient = "bps-api-max-sessions-per-client"
	optionNameBPSAPIMaxCohortsPerClient  = "bps-api-max-cohorts-per-client"
	optionNameBPSAPIMaxKeepAlive         = "bps-api-max-keep-alive"
	optionNameBPSAPIClientHeader         = "bps-api-client-header"
	optionNameBPSAPIAllowedHosts         = "bps-api-allowed-hosts"
)

var _ node.Plugin = bpsPlugged{}

// setBPSFlags defines the bps-* options; withEnable adds bps-enable (the dev
// cluster always runs BPS).
func setBPSFlags(f *pflag.FlagSet, withEnable bool) {
	if withEnable {
		f.Bool(optionNameBPSEnable, false, "attach Broadcast Pub/Sub (BPS) to the node")
	}
	d, p := bps.NodeOptions(), bps.DefaultPrices() // the node's defaults: bps-sim runs the same
	f.Int(optionNameBPSMaxStreamsPerCohort, d.MaxStreamsPerCohort, "BPS: subscriber streams per cohort")
	f.Int(optionNameBPSMaxCohorts, d.MaxCohorts, "BPS: live cohorts per node")
	f.Int(optionNameBPSMaxCohortsPerPeer, d.MaxCohortsPerPeer, "BPS: cohorts per peer connection")
	f.Int(optionNameBPSQueueLen, d.QueueLen, "BPS: outbound queue per stream, in frames (full: the stream is reset)")
	f.Duration(optionNameBPSInactivity, d.Inactivity, "BPS: a cohort without messages for this long is reclaimed")
	f.Duration(optionNameBPSClaimDeadline, d.ClaimDeadline, "BPS: time a pending or silent stream has to claim with its first valid frame (SWIP-74 Rev 8)")
	f.Duration(optionNameBPSRevocationGrace, d.RevocationGrace, "BPS: time a publisher a roster revoked may still send, tolerated, after the roster reached its stream (SWIP-60 rev 14)")
	f.StringSlice(optionNameBPSProtocolIDs, bps.DefaultProtocolIDs, "BPS: protocol ids this node joins a broker on, in order of preference (the first the broker supports is used, and remembered); it serves all three whatever this says")
	f.Int(optionNameBPSRelayCapacity, d.RelayCapacity, "BPS: children this node accepts per cohort it follows, as a relay in the cohort's tree (SWIP-61); 0: it does not relay (a light node never does)")
	f.Duration(optionNameBPSHeartbeat, d.Heartbeat, "BPS: as a cohort's root, sign and send a heartbeat down its tree this often — each publisher's latest index, so that a node whose parents withhold one sees a gap (issue 24); negative: none")
	f.Bool(optionNameBPSLazyPush, !d.NoLazyPush, "BPS: lazy push: of a node's two parents one sends each delivery whole and the other announces it, sending it when asked (about half the bytes); negotiated per stream; false: every frame whole")
	f.Uint64(optionNameBPSDeliveryPrice, p.Delivery, "BPS: accounting units a child owes its parent for each delivery, on bee's accounting, settled in batches (default: bee's base price over a relay's default fan-out; both prices 0: BPS charges nothing)")
	f.Uint64(optionNameBPSPublishPrice, p.Publish, "BPS: accounting units per hop a publication costs its sender, times its depth, owed to its parent (default: as bps-delivery-price)")
	f.Int(optionNameBPSAPIMaxSessions, api.DefaultMaxSessions, "BPS API: WebSocket sessions on this node (past it: 503)")
	f.Int(optionNameBPSAPIMaxSessionsPerClient, api.DefaultMaxSessionsPerClient, "BPS API: WebSocket sessions of one client (past it: 429)")
	f.Int(optionNameBPSAPIMaxCohortsPerClient, api.DefaultMaxCohortsPerClient, "BPS API: cohorts one client holds sessions in, at each broker (past it: 429)")
	f.Duration(optionNameBPSAPIMaxKeepAlive, api.DefaultMaxKeepAlive, "BPS API: the largest swarm-keep-alive a session may ask for, in whole seconds (larger: 400)")
	f.String(optionNameBPSAPIClientHeader, "", "BPS API: header a reverse proxy on this host sets to the client's address, e.g. X-Forwarded-For (empty: the client is the connection's address)")
	f.StringSlice(optionNameBPSAPIAllowedHosts, []string{}, "BPS API: host names /pubsub answers to besides loopback names and IP addresses (\"*\": any; \".example.org\": the names below it); other names are 403 (DNS rebinding)")
}

// The bounds bee-bps accepts for the bps-* options. The upper ones keep a
// typo from allocating gigabytes (a stream's queue is allocated whole).
const (
	maxBPSCount    = 1 << 16 // streams per cohort, cohorts per peer, queue length
	maxBPSCohorts  = 1 << 20
	minBPSDuration = time.Second

	maxBPSAPIKeepAlive = time.Hour
)

// bpsOptions reads the bps-* options and checks each, naming the option
// that is out of range: they are all checked before any node starts.
func bpsOptions(v *viper.Viper) (bps.Options, error) {
	o := bps.Options{
		Bounds: bps.Bounds{
			MaxStreamsPerCohort: v.GetInt(optionNameBPSMaxStreamsPerCohort),
			MaxCohorts:          v.GetInt(optionNameBPSMaxCohorts),
			MaxCohortsPerPeer:   v.GetInt(optionNameBPSMaxCohortsPerPeer),
			QueueLen:            v.GetInt(optionNameBPSQueueLen),
		},
		Timing: bps.Timing{
			Inactivity:      v.GetDuration(optionNameBPSInactivity),
			ClaimDeadline:   v.GetDuration(optionNameBPSClaimDeadline),
			RevocationGrace: v.GetDuration(optionNameBPSRevocationGrace),
		},
		Wire: bps.Wire{ProtocolIDs: v.GetStringSlice(optionNameBPSProtocolIDs)},
		Tree: bps.Tree{
			RelayCapacity: v.GetInt(optionNameBPSRelayCapacity),
			NoLazyPush:    !v.GetBool(optionNameBPSLazyPush),
			Heartbeat:     v.GetDuration(optionNameBPSHeartbeat),
		},
	}
	if h := o.Heartbeat; h == 0 || h > time.Minute || (h > 0 && h < 100*time.Millisecond) {
		return o, fmt.Errorf("--%s %s: must be between 100ms and 1m, or negative (none)", optionNameBPSHeartbeat, h)
	}
	if o.RelayCapacity < 0 || o.RelayCapacity > maxBPSCount {
		return o, fmt.Errorf("--%s %d: must be between 0 and %d", optionNameBPSRelayCapacity, o.RelayCapacity, maxBPSCount)
	}
	var errs []error
	for _, c := range []struct {
		name     string
		v, limit int
	}{
		{optionNameBPSMaxStreamsPerCohort, o.MaxStreamsPerCohort, maxBPSCount},
		{optionNameBPSMaxCohorts, o.MaxCohorts, maxBPSCohorts},
		{optionNameBPSMaxCohortsPerPeer, o.MaxCohortsPerPeer, maxBPSCount},
		{optionNameBPSQueueLen, o.QueueLen, maxBPSCount},
	} {
		if c.v < 1 || c.v > c.limit {
			errs = append(errs, fmt.Errorf("--%s %d: must be between 1 and %d", c.name, c.v, c.limit))
		}
	}
	for _, c := range []struct {
		name string
		v    time.Duration
	}{
		{optionNameBPSInactivity, o.Inactivity},
		{optionNameBPSClaimDeadline, o.ClaimDeadline},
		{optionNameBPSRevocationGrace, o.RevocationGrace},
	} {
		if c.v < minBPSDuration {
			errs = append(errs, fmt.Errorf("--%s %s: must be at least %s", c.name, c.v, minBPSDuration))
		}
	}
	for _, id := range o.ProtocolIDs {
		if parts := strings.Split(id, "/"); len(parts) != 5 || parts[0] != "" || parts[1] != "swarm" || parts[2] == "" || parts[3] == "" || parts[4] == "" {
			errs = append(errs, fmt.Errorf("--%s %q: want /swarm/name/version/stream", optionNameBPSProtocolIDs, id))
		}
	}
	if len(o.ProtocolIDs) == 0 {
		errs = append(errs, fmt.Errorf("--%s: at least one id", optionNameBPSProtocolIDs))
	}
	return o, errors.Join(errs...)
}

// maxBPSPrice bounds bps-delivery-price and bps-publish-price: bee's
// smallest accepted payment threshold (2 × its refresh rate), so that no
// single frame is owed past what a peer may owe.
const maxBPSPrice = 9_000_000

// bpsPrices reads bps-delivery-price and bps-publish-price, checked as
// bpsOptions checks its options.
func bpsPrices(v *viper.Viper) (bps.Prices, error) {
	p := bps.Prices{Delivery: v.GetUint64(optionNameBPSDeliveryPrice), Publish: v.GetUint64(optionNameBPSPublishPrice)}
	var errs []error
	for _, c := range []struct {
		name string
		v    uint64
	}{
		{optionNameBPSDeliveryPrice, p.Delivery},
		{optionNameBPSPublishPrice, p.Publish},
	} {
		if c.v > maxBPSPrice {
			errs = append(errs, fmt.Errorf("--%s %d: must be at most %d", c.name, c.v, maxBPSPrice))
		}
	}
	return p, errors.Join(errs...)
}

// bpsAPIOptions reads the bps-api-* options, the bounds of the /pubsub API
// (the node's sessions, and each client's share of them and of the node's
// cohorts at a broker), and checks each, naming the option that is out of
// range, as bpsOptions does. cors is bee's cors-allowed-origins.
func bpsAPIOptions(v *viper.Viper, cors []string) (api.Options, error) {
	o := api.Options{
		MaxSessions:          v.GetInt(optionNameBPSAPIMaxSessions),
		MaxSessionsPerClient: v.GetInt(optionNameBPSAPIMaxSessionsPerClient),
		MaxCohortsPerClient:  v.GetInt(optionNameBPSAPIMaxCohortsPerClient),
		MaxKeepAlive:         v.GetDuration(optionNameBPSAPIMaxKeepAlive),
		ClientHeader:         v.GetString(optionNameBPSAPIClientHeader),
		CORSAllowedOrigins:   cors,
		AllowedHosts:         v.GetStringSlice(optionNameBPSAPIAllowedHosts),
	}
	var errs []error
	for _, c := range []struct {
		name string
		v    int
	}{
		{optionNameBPSAPIMaxSessions, o.MaxSessions},
		{optionNameBPSAPIMaxSessionsPerClient, o.MaxSessionsPerClient},
		{optionNameBPSAPIMaxCohortsPerClient, o.MaxCohortsPerClient},
	} {
		if c.v < 1 || c.v > maxBPSCount {
			errs = append(errs, fmt.Errorf("--%s %d: must be between 1 and %d", c.name, c.v, maxBPSCount))
		}
	}
	// swarm-keep-alive is in seconds: the bound is too.
	if k := o.MaxKeepAlive; k < minBPSDuration || k > maxBPSAPIKeepAlive || k%time.Second != 0 {
		errs = append(errs, fmt.Errorf("--%s %s: must be whole seconds between %s and %s", optionNameBPSAPIMaxKeepAlive, k, minBPSDuration, maxBPSAPIKeepAlive))
	}
	if h := o.ClientHeader; h != "" && !isHeaderName(h) {
		errs = append(errs, fmt.Errorf("--%s %q: not an HTTP header name", optionNameBPSAPIClientHeader, h))
	}
	for _, h := range o.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/: ") {
			errs = append(errs, fmt.Errorf("--%s %q: not a host name (no scheme, port or path)", optionNameBPSAPIAllowedHosts, h))
		}
	}
	return o, errors.Join(errs...)
}

// isHeaderName reports whether s is an HTTP field name: a token (RFC 9110,
// section 5.1).
func isHeaderName(s string) bool {
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// bpsPlugin attaches a bps.Service with options o to a node, built with
// the node's logger, transport binding check, dialer and accounting, on
// which it charges prices.
func bpsPlugin(o bps.Options, prices bps.Prices) node.PluginFactory {
	return func(env node.PluginEnv) (node.Plugin, error) {
		o := o // each node its own: the factory builds many (bee-bps dev)
		o.Prices = prices
		o.Logger, o.PeerCheck, o.Accounting, o.Signer = env.Logger, env.PeerCheck, env.Accounting, env.Signer
		o.Connect, o.Underlays = env.Connect, env.Underlays
		s, err := bps.New(env.Streamer, env.Overlay, o)
		if err != nil {
			return nil, err
		}
		return bpsPlugged{Service: s}, nil
	}
}

// serviceOf finds the bps.Service behind a node's plugin.
func serviceOf(pl node.Plugin) *bps.Service {
	switch p := pl.(type) {
	case *bps.Service:
		return p
	case bpsPlugged:
		return p.Service
	case *watchedPlugin:
		return serviceOf(p.Plugin)
	}
	return nil
}

// bpsPubSub serves /pubsub (pkg/api, the WebSocket bridge) on the node's API
// port, over the node's BPS service, with options o (bpsAPIOptions).
func bpsPubSub(o api.Options) node.PubSubHandlerFactory {
	return func(pl node.Plugin, conn node.Connector, logger log.Logger) (http.Handler, error) {
		svc := serviceOf(pl)
		if svc == nil {
			return nil, errors.New("bee-bps: /pubsub needs the BPS plugin")
		}
		return api.New(svc, conn, logger, o)
	}
}

// bpsPlugged is the BPS service as the node's plugin, whose metrics are
// the service's and those of its accounting.
type bpsPlugged struct {
	*bps.Service
}

// Metrics are the service's and those of its accounting.
func (p bpsPlugged) Metrics() []prometheus.Collector {
	return append(p.Service.Metrics(), p.Service.PricingMetrics()...)
}
