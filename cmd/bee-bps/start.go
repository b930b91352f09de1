// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ethersphere/bps/pkg/node"
	"github.com/spf13/cobra"
)

func (c *command) initStartCmd() {
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Start a bee node, with BPS if --bps-enable",
		Long: `Start a bee node from bee's options (flags, BEE_… environment variables,
or the YAML file given with --config, under bee's names), with Broadcast
Pub/Sub attached when bps-enable is set. Interrupt (Ctrl-C) or SIGTERM stops
it; a second one ends the process at once.`,
		Args: cobra.NoArgs,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := c.bindFlags(cmd); err != nil {
				return err
			}
			resolveNestedRPC(c.config, cmd.Flags())
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return c.runStart(cmd) },
	}
	c.setNodeFlags(cmd.Flags())
	setBPSFlags(cmd.Flags(), true)
	c.root.AddCommand(cmd)
}

func (c *command) runStart(cmd *cobra.Command) error {
	cfg, err := nodeConfig(c.config)
	if err != nil {
		return err
	}
	o, err := bpsOptions(c.config) // checked with or without bps-enable
	prices, pricesErr := bpsPrices(c.config)
	apiOpts, apiErr := bpsAPIOptions(c.config, cfg.CORSAllowedOrigins)
	if err = errors.Join(err, pricesErr, apiErr); err != nil {
		return err
	}
	if cfg.Logger, err = node.NewLogger(cfg.Verbosity, cmd.OutOrStdout(), ""); err != nil {
		return err
	}
	if c.config.GetBool(optionNameBPSEnable) {
		if !cfg.FullNode && o.RelayCapacity > 0 {
			// A light node cannot be dialled: it relays nothing (SWIP-61).
			cfg.Logger.Info("bps: a light node does not relay; bps-relay-capacity is 0", "configured", o.RelayCapacity)
			o.RelayCapacity = 0
		}
		cfg.Plugin = bpsPlugin(o, prices)
		cfg.PubSubHandler = bpsPubSub(apiOpts)
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	n, err := node.Start(ctx, cfg)
	if err != nil {
		if ctx.Err() != nil {
			cfg.Logger.Info("interrupted while starting")
			return nil
		}
		return err
	}
	printNode(cmd.OutOrStdout(), "node", n)
	if c.startReady != nil {
		c.startReady(n)
	}

	select {
	case <-ctx.Done():
		cfg.Logger.Info("received interrupt signal, shutting down")
	case <-n.Done():
		cfg.Logger.Info("bee stopped syncing postage data, shutting down")
	}
	stop() // from now on a second signal ends the process
	return n.Close()
}

// printNode prints a node's API URL, overlay and underlays.
func printNode(w io.Writer, name string, n *node.Node) {
	fmt.Fprintf(w, "%s\n  api      %s\n  overlay  %s\n", name, n.APIURL(), n.Overlay())
	underlays, err := n.Underlays()
	if err != nil {
		fmt.Fprintf(w, "  underlay error: %v\n", err)
		return
	}
	for _, u := range underlays {
		fmt.Fprintf(w, "  underlay %s\n", u)
	}
}
