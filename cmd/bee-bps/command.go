// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ethersphere/bee/v2"
	"github.com/ethersphere/bps/pkg/node"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// configName is the configuration file looked for in the home directory
// when --config is not given. It is not bee's .bee.yaml: a bee-bps
// configuration may hold bps-* keys bee would refuse.
const configName = ".bee-bps"

// command is the bee-bps command line: bee's configuration layer (flags,
// BEE_… environment variables, a YAML file with the same keys) in front of
// pkg/node.
type command struct {
	root    *cobra.Command
	config  *viper.Viper
	cfgFile string
	homeDir string

	// startReady and devReady, if set, are called once the node or the dev
	// cluster is up (tests).
	startReady func(*node.Node)
	devReady   func(devCluster)
}

type option func(*command)

func newCommand(opts ...option) (*command, error) {
	c := &command{
		root: &cobra.Command{
			Use:           "bee-bps",
			Short:         "A Swarm Bee node with Broadcast Pub/Sub (BPS)",
			SilenceErrors: true,
			SilenceUsage:  true,
		},
	}
	for _, o := range opts {
		o(c)
	}
	if c.homeDir == "" {
		dir, err := os.UserHomeDir()
		if err != nil {
			return nil, err
		}
		c.homeDir = dir
	}
	c.root.PersistentFlags().StringVar(&c.cfgFile, "config", "", "config file (default is $HOME/"+configName+".yaml)")
	c.root.PersistentPreRunE = func(*cobra.Command, []string) error { return c.initConfig() }

	c.initStartCmd()
	c.initDevCmd()
	c.initVersionCmd()
	c.initPubCmd()
	c.initSubCmd()
	c.initKeygenCmd()
	c.initBenchNodeCmd()
	c.initTreeCmd()
	return c, nil
}

// initConfig reads the configuration file and sets up the environment the
// way bee does: BEE_ prefix, dashes and dots as underscores.
func (c *command) initConfig() error {
	v := viper.New()
	if c.cfgFile != "" {
		v.SetConfigFile(c.cfgFile)
	} else {
		v.AddConfigPath(c.homeDir)
		v.SetConfigName(configName)
	}
	v.SetEnvPrefix("bee")
	v.AutomaticEnv()
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	if err := v.ReadInConfig(); err != nil {
		var notFound viper.ConfigFileNotFoundError
		if !errors.As(err, &notFound) {
			return fmt.Errorf("config file: %w", err)
		}
	}
	c.config = v
	return nil
}

// bindFlags makes cmd's flags the last source of viper's values (flag >
// environment > file > flag default) and refuses configuration file keys
// that are no option of cmd: an option bee-bps does not support must not be
// silently ignored.
func (c *command) bindFlags(cmd *cobra.Command) error {
	if err := c.config.BindPFlags(cmd.Flags()); err != nil {
		return err
	}
	var unknown []string
	for _, k := range c.config.AllKeys() {
		if cmd.Flags().Lookup(k) != nil || isNestedRPCKey(k, cmd) {
			continue
		}
		unknown = append(unknown, k)
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return fmt.Errorf("unknown or unsupported parameters:\n\t%s", strings.Join(unknown, "\n\t"))
	}
	return nil
}

func (c *command) initVersionCmd() {
	c.root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the bee version bee-bps is built on",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), bee.Version)
		},
	})
}

// dataPath joins elem to the home directory (bee's default data dir).
func (c *command) dataPath(elem ...string) string {
	return filepath.Join(append([]string{c.homeDir}, elem...)...)
}
