// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node"
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
)

var (
	_ node.Plugin      = (*bps.Service)(nil)
	_ node.PeerChecker = bpsPeerCheck{}
)

// setBPSFlags defines the bps-* options; withEnable adds bps-enable (the dev
// cluster always runs BPS).
func setBPSFlags(f *pflag.FlagSet, withEnable bool) {
	if withEnable {
		f.Bool(optionNameBPSEnable, false, "attach Broadcast Pub/Sub (BPS) to the node")
	}
	f.Int(optionNameBPSMaxStreamsPerCohort, bps.DefaultMaxStreamsPerCohort, "BPS: subscriber streams per cohort")
	f.Int(optionNameBPSMaxCohorts, bps.DefaultMaxCohorts, "BPS: live cohorts per node")
	f.Int(optionNameBPSMaxCohortsPerPeer, bps.DefaultMaxCohortsPerPeer, "BPS: cohorts per peer connection")
	f.Int(optionNameBPSQueueLen, bps.DefaultQueueLen, "BPS: outbound queue per stream, in frames (full: the stream is reset)")
	f.Duration(optionNameBPSInactivity, bps.DefaultInactivity, "BPS: a cohort without messages for this long is reclaimed")
	f.Duration(optionNameBPSClaimDeadline, bps.DefaultClaimDeadline, "BPS: time an unclaimed publisher seat is held")
}

// The bounds bee-bps accepts for the bps-* options. The upper ones keep a
// typo from allocating gigabytes (a stream's queue is allocated whole).
const (
	maxBPSCount    = 1 << 16 // streams per cohort, cohorts per peer, queue length
	maxBPSCohorts  = 1 << 20
	minBPSDuration = time.Second
)

// bpsOptions reads the bps-* options and checks each, naming the option
// that is out of range: they are all checked before any node starts.
func bpsOptions(v *viper.Viper) (bps.Options, error) {
	o := bps.Options{
		MaxStreamsPerCohort: v.GetInt(optionNameBPSMaxStreamsPerCohort),
		MaxCohorts:          v.GetInt(optionNameBPSMaxCohorts),
		MaxCohortsPerPeer:   v.GetInt(optionNameBPSMaxCohortsPerPeer),
		QueueLen:            v.GetInt(optionNameBPSQueueLen),
		Inactivity:          v.GetDuration(optionNameBPSInactivity),
		ClaimDeadline:       v.GetDuration(optionNameBPSClaimDeadline),
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
	} {
		if c.v < minBPSDuration {
			errs = append(errs, fmt.Errorf("--%s %s: must be at least %s", c.name, c.v, minBPSDuration))
		}
	}
	return o, errors.Join(errs...)
}

// bpsPlugin attaches a bps.Service with options o to a node.
func bpsPlugin(o bps.Options) node.PluginFactory {
	return func(streamer p2p.Streamer, overlay swarm.Address, logger log.Logger) (node.Plugin, error) {
		o.Logger = logger
		s, err := bps.New(streamer, overlay, o)
		if err != nil {
			return nil, err
		}
		return bpsPeerCheck{s}, nil
	}
}

// serviceOf finds the bps.Service behind a node's plugin.
func serviceOf(pl node.Plugin) *bps.Service {
	switch p := pl.(type) {
	case *bps.Service:
		return p
	case bpsPeerCheck:
		return p.Service
	case *watchedPlugin:
		return serviceOf(p.Plugin)
	}
	return nil
}

// bpsPubSub serves /pubsub (pkg/api, the WebSocket bridge) on the node's API
// port, over the node's BPS service; cors is bee's cors-allowed-origins.
func bpsPubSub(cors []string) node.PubSubHandlerFactory {
	return func(pl node.Plugin, conn node.Connector, logger log.Logger) (http.Handler, error) {
		svc := serviceOf(pl)
		if svc == nil {
			return nil, errors.New("bee-bps: /pubsub needs the BPS plugin")
		}
		return api.New(svc, conn, logger, api.Options{CORSAllowedOrigins: cors})
	}
}

// bpsPeerCheck makes the BPS service take the node's transport binding check.
type bpsPeerCheck struct{ *bps.Service }

func (p bpsPeerCheck) SetPeerCheck(c node.PeerCheck) { p.Service.SetPeerCheck(c) }
