// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	chaincfg "github.com/ethersphere/bee/v2/pkg/config"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/node"
	"github.com/spf13/viper"
)

// parseStart runs start's configuration layer on args (and the BEE_…
// environment the test set) without starting a node.
func parseStart(t *testing.T, args ...string) (node.Config, bps.Options, bool, error) {
	t.Helper()

	v, err := parseStartOptions(t, args...)
	if err != nil {
		return node.Config{}, bps.Options{}, false, err
	}
	cfg, err := nodeConfig(v)
	if err != nil {
		return cfg, bps.Options{}, false, err
	}
	o, err := bpsOptions(v)
	return cfg, o, v.GetBool(optionNameBPSEnable), err
}

// parseStartOptions runs start's flags, environment and configuration file
// on args and returns the options as start reads them.
func parseStartOptions(t *testing.T, args ...string) (*viper.Viper, error) {
	t.Helper()

	c, err := newCommand(func(c *command) { c.homeDir = t.TempDir() })
	if err != nil {
		t.Fatal(err)
	}
	cmd, rest, err := c.root.Find(append([]string{"start"}, args...))
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(rest); err != nil {
		return nil, err
	}
	if err := c.initConfig(); err != nil {
		return nil, err
	}
	if err := cmd.PreRunE(cmd, nil); err != nil {
		return nil, err
	}
	return c.config, nil
}

// parseStartAPI is the /pubsub API's options start reads from args.
func parseStartAPI(t *testing.T, args ...string) (api.Options, error) {
	t.Helper()

	v, err := parseStartOptions(t, args...)
	if err != nil {
		return api.Options{}, err
	}
	cfg, err := nodeConfig(v)
	if err != nil {
		return api.Options{}, err
	}
	return bpsAPIOptions(v, cfg.CORSAllowedOrigins)
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()

	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Not parallel: the tests set BEE_… environment variables.

func TestStartDefaultsAreBees(t *testing.T) {
	cfg, o, enabled, err := parseStart(t, "--password", "x")
	if err != nil {
		t.Fatal(err)
	}
	if enabled {
		t.Error("bps-enable is on by default")
	}
	if cfg.NetworkID != chaincfg.Mainnet.NetworkID || cfg.BlockTime != 5*time.Second ||
		!slices.Equal(cfg.Bootnodes, []string{"/dnsaddr/mainnet.ethswarm.org"}) || cfg.NeighborhoodSuggester == "" {
		t.Errorf("mainnet defaults: %+v", cfg)
	}
	if cfg.APIAddr != "127.0.0.1:1633" || cfg.P2PAddr != ":1634" || cfg.PaymentThreshold != "13500000" ||
		cfg.FullNode || cfg.SwapEnable || !cfg.ChequebookEnable || cfg.Verbosity != "info" ||
		!strings.HasSuffix(cfg.DataDir, ".bee") || cfg.BlockchainRPCDialTimeout != 30*time.Second {
		t.Errorf("defaults: %+v", cfg)
	}
	if o.MaxStreamsPerCohort != bps.DefaultMaxStreamsPerCohort || o.MaxCohorts != bps.DefaultMaxCohorts ||
		o.MaxCohortsPerPeer != bps.DefaultMaxCohortsPerPeer || o.QueueLen != bps.DefaultQueueLen ||
		o.Inactivity != bps.DefaultInactivity || o.ClaimDeadline != bps.DefaultClaimDeadline {
		t.Errorf("bps defaults: %+v", o)
	}
}

func TestStartFlagsEnvAndYAML(t *testing.T) {
	yaml := writeFile(t, "bee.yaml", `
data-dir: /from/yaml
api-addr: 127.0.0.1:2633
p2p-addr: 127.0.0.1:2634
network-id: 4242
mainnet: false
bootnode:
  - /ip4/10.0.0.1/tcp/1634/p2p/QmYZwEN3pFhsHjewqHt2tEtyviCHRk4qCgc6GyFMNc1URb
full-node: true
blockchain-rpc:
  endpoint: http://from.nested.yaml
  dial-timeout: 7s
swap-enable: true
verbosity: debug
cors-allowed-origins: [https://a.example, https://b.example]
block-time: 2
bps-enable: true
bps-max-cohorts: 7
bps-inactivity: 3m
`)
	pwFile := writeFile(t, "password", "secret\n")
	t.Setenv("BEE_BPS_QUEUE_LEN", "9")
	t.Setenv("BEE_P2P_ADDR", "127.0.0.1:3634") // environment over file
	t.Setenv("BEE_BPS_CLAIM_DEADLINE", "5s")

	cfg, o, enabled, err := parseStart(t, "--config", yaml, "--password-file", pwFile,
		"--api-addr", "127.0.0.1:4633", // flag over file
		"--bps-max-streams-per-cohort", "5")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][2]any{
		"data-dir":                    {cfg.DataDir, "/from/yaml"},
		"api-addr":                    {cfg.APIAddr, "127.0.0.1:4633"},
		"p2p-addr":                    {cfg.P2PAddr, "127.0.0.1:3634"},
		"network-id":                  {cfg.NetworkID, uint64(4242)},
		"full-node":                   {cfg.FullNode, true},
		"blockchain-rpc-endpoint":     {cfg.BlockchainRPCEndpoint, "http://from.nested.yaml"},
		"blockchain-rpc-dial-timeout": {cfg.BlockchainRPCDialTimeout, 7 * time.Second},
		"swap-enable":                 {cfg.SwapEnable, true},
		"verbosity":                   {cfg.Verbosity, "debug"},
		"block-time":                  {cfg.BlockTime, 2 * time.Second},
		"password-file":               {cfg.Password, "secret"},
		"bps-enable":                  {enabled, true},
		"bps-max-cohorts":             {o.MaxCohorts, 7},
		"bps-inactivity":              {o.Inactivity, 3 * time.Minute},
		"bps-queue-len":               {o.QueueLen, 9},
		"bps-claim-deadline":          {o.ClaimDeadline, 5 * time.Second},
		"bps-max-streams-per-cohort":  {o.MaxStreamsPerCohort, 5},
	}
	for name, v := range want {
		if v[0] != v[1] {
			t.Errorf("%s = %v, want %v", name, v[0], v[1])
		}
	}
	if len(cfg.Bootnodes) != 1 || !strings.HasPrefix(cfg.Bootnodes[0], "/ip4/10.0.0.1/") {
		t.Errorf("bootnode = %v", cfg.Bootnodes)
	}
	if !slices.Equal(cfg.CORSAllowedOrigins, []string{"https://a.example", "https://b.example"}) {
		t.Errorf("cors-allowed-origins = %v", cfg.CORSAllowedOrigins)
	}
	if cfg.NeighborhoodSuggester != "" {
		t.Errorf("neighborhood suggester off mainnet: %q", cfg.NeighborhoodSuggester)
	}
}

func TestStartRPCEndpointForms(t *testing.T) {
	flat := writeFile(t, "flat.yaml", "blockchain-rpc-endpoint: http://flat\n")
	both := writeFile(t, "both.yaml", "blockchain-rpc-endpoint: http://flat\nblockchain-rpc:\n  endpoint: http://nested\n")

	for _, tc := range []struct {
		name string
		args []string
		env  string
		want string
	}{
		{"flat yaml", []string{"--config", flat}, "", "http://flat"},
		{"nested wins in yaml", []string{"--config", both}, "", "http://nested"},
		{"flag wins", []string{"--config", both, "--blockchain-rpc-endpoint", "http://flag"}, "", "http://flag"},
		{"environment", nil, "http://env", "http://env"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("BEE_BLOCKCHAIN_RPC_ENDPOINT", tc.env)
			}
			cfg, _, _, err := parseStart(t, append(tc.args, "--password", "x")...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.BlockchainRPCEndpoint != tc.want {
				t.Fatalf("endpoint %q, want %q", cfg.BlockchainRPCEndpoint, tc.want)
			}
		})
	}
}

func TestStartRefuses(t *testing.T) {
	unknown := writeFile(t, "unknown.yaml", "p2p-wss-enable: true\nautotls-domain: x\n")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unsupported option in file", []string{"--config", unknown, "--password", "x"}, "unknown or unsupported parameters:\n\tautotls-domain\n\tp2p-wss-enable"},
		{"network id on mainnet", []string{"--network-id", "5", "--password", "x"}, "does not match mainnet"},
		{"no password", nil, "password or password-file is required"},
		{"missing password file", []string{"--password-file", "/nonexistent"}, "password-file"},
		{"unknown flag", []string{"--p2p-wss-enable"}, "unknown flag"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := parseStart(t, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestStartTestnetAndPrivateNetworks(t *testing.T) {
	cfg, _, _, err := parseStart(t, "--mainnet=false", "--password", "x")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NetworkID != chaincfg.Testnet.NetworkID || cfg.BlockTime != 12*time.Second ||
		!slices.Equal(cfg.Bootnodes, []string{"/dnsaddr/testnet.ethswarm.org"}) {
		t.Errorf("testnet: %+v", cfg)
	}
	cfg, _, _, err = parseStart(t, "--mainnet=false", "--network-id", "4242", "--block-time", "3", "--data-dir", "", "--verbosity", "5")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NetworkID != 4242 || cfg.BlockTime != 3*time.Second || len(cfg.Bootnodes) != 0 || cfg.Password != "" || cfg.DataDir != "" {
		t.Errorf("private network: %+v", cfg)
	}
}

// TestStartAPIOptions: the /pubsub API's bounds have pkg/api's defaults and
// are read from flags, BEE_… variables and the YAML file like bee's options.
func TestStartAPIOptions(t *testing.T) {
	o, err := parseStartAPI(t, "--password", "x", "--cors-allowed-origins", "https://a.example")
	if err != nil {
		t.Fatal(err)
	}
	want := api.Options{
		MaxSessions:          api.DefaultMaxSessions,
		MaxSessionsPerClient: api.DefaultMaxSessionsPerClient,
		MaxCohortsPerClient:  api.DefaultMaxCohortsPerClient,
		MaxKeepAlive:         api.DefaultMaxKeepAlive,
		CORSAllowedOrigins:   []string{"https://a.example"},
		AllowedHosts:         []string{},
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", o, want)
	}

	yaml := writeFile(t, "bee.yaml", `
bps-api-max-sessions: 2000
bps-api-max-sessions-per-client: 7
bps-api-client-header: X-Real-IP
bps-api-allowed-hosts: [node.example, .dapps.example]
`)
	t.Setenv("BEE_BPS_API_MAX_COHORTS_PER_CLIENT", "3")
	t.Setenv("BEE_BPS_API_MAX_SESSIONS_PER_CLIENT", "9") // environment over file
	o, err = parseStartAPI(t, "--config", yaml, "--password", "x",
		"--bps-api-max-keep-alive", "90s",
		"--bps-api-client-header", "X-Forwarded-For") // flag over file
	if err != nil {
		t.Fatal(err)
	}
	want = api.Options{
		MaxSessions:          2000,
		MaxSessionsPerClient: 9,
		MaxCohortsPerClient:  3,
		MaxKeepAlive:         90 * time.Second,
		ClientHeader:         "X-Forwarded-For",
		CORSAllowedOrigins:   []string{},
		AllowedHosts:         []string{"node.example", ".dapps.example"},
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("flags, environment and file:\n got %+v\nwant %+v", o, want)
	}
}

// TestBadBPSAPIOptionsRefusedByName: every bps-api-* value out of range is
// refused before anything starts, with the option's name, by dev and by
// start (with or without bps-enable).
func TestBadBPSAPIOptionsRefusedByName(t *testing.T) {
	for _, tc := range [][]string{
		{"--bps-api-max-sessions", "0"},
		{"--bps-api-max-sessions", "-1"},
		{"--bps-api-max-sessions", "100000000"},
		{"--bps-api-max-sessions-per-client", "0"},
		{"--bps-api-max-sessions-per-client", "-128"},
		{"--bps-api-max-cohorts-per-client", "0"},
		{"--bps-api-max-cohorts-per-client", "70000"},
		{"--bps-api-max-keep-alive", "0s"},
		{"--bps-api-max-keep-alive", "-5m"},
		{"--bps-api-max-keep-alive", "500ms"},
		{"--bps-api-max-keep-alive", "1.5s"},
		{"--bps-api-max-keep-alive", "24h0m0s"},
		{"--bps-api-client-header", "X Forwarded For"},
		{"--bps-api-client-header", "X-Real-IP:"},
		{"--bps-api-allowed-hosts", "http://node.example"},
		{"--bps-api-allowed-hosts", "node.example:1633"},
	} {
		t.Run(strings.Join(tc, " "), func(t *testing.T) {
			refused(t, append([]string{"dev", "--verbosity", "0"}, tc...), []string{tc[0], tc[1]})
			refused(t, append([]string{"start", "--data-dir", "", "--bps-enable"}, tc...), []string{tc[0], tc[1]})
			refused(t, append([]string{"start", "--data-dir", ""}, tc...), []string{tc[0], tc[1]})
		})
	}
	t.Run("all at once, with a bps option", func(t *testing.T) {
		refused(t, []string{"dev", "--bps-queue-len", "0", "--bps-api-max-sessions", "0", "--bps-api-max-keep-alive", "2h0m0s"},
			[]string{"--bps-queue-len 0", "--bps-api-max-sessions 0", "--bps-api-max-keep-alive 2h0m0s"})
	})
	for _, tc := range [][]string{
		{"--bps-api-max-sessions", "1"},
		{"--bps-api-max-sessions", "65536"},
		{"--bps-api-max-keep-alive", "1s"},
		{"--bps-api-max-keep-alive", "1h"},
		{"--bps-api-client-header", "x-forwarded-for"},
		{"--bps-api-allowed-hosts", "node.example,.dapps.example"},
		{"--bps-api-allowed-hosts", "*"},
	} {
		if _, err := parseStartAPI(t, append([]string{"--password", "x"}, tc...)...); err != nil {
			t.Errorf("%v refused: %v", tc, err)
		}
	}
}

// TestDocumentedBeeYAML: the complete bee.yaml docs/configuration.md shows
// is what start reads: every key an option, every value in range, BPS on
// with its defaults.
func TestDocumentedBeeYAML(t *testing.T) {
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "## A complete `bee.yaml`")
	if !ok {
		t.Fatal("docs/configuration.md has no complete bee.yaml")
	}
	_, after, ok = strings.Cut(after, "```yaml\n")
	block, _, closed := strings.Cut(after, "```")
	if !ok || !closed {
		t.Fatal("no yaml block under the heading")
	}
	yaml := writeFile(t, "bee.yaml", block)
	pw := writeFile(t, "password", "secret\n") // the documented password-file is the operator's
	v, err := parseStartOptions(t, "--config", yaml, "--password-file", pw)
	if err != nil {
		t.Fatalf("the documented bee.yaml: %v", err)
	}
	cfg, err := nodeConfig(v)
	if err != nil {
		t.Fatal(err)
	}
	o, err := bpsOptions(v)
	if err != nil {
		t.Fatal(err)
	}
	prices, err := bpsPrices(v)
	if err != nil {
		t.Fatal(err)
	}
	ao, err := bpsAPIOptions(v, cfg.CORSAllowedOrigins)
	if err != nil {
		t.Fatal(err)
	}
	if !v.GetBool(optionNameBPSEnable) || !cfg.FullNode || cfg.NetworkID != 1 || cfg.DataDir != "/var/lib/bee-bps" ||
		cfg.Password != "secret" || cfg.BlockchainRPCEndpoint != "https://rpc.gnosischain.com" || !cfg.SwapEnable {
		t.Errorf("node: %+v", cfg)
	}
	if o.MaxStreamsPerCohort != bps.DefaultMaxStreamsPerCohort || o.MaxCohorts != bps.DefaultMaxCohorts ||
		o.MaxCohortsPerPeer != bps.DefaultMaxCohortsPerPeer || o.QueueLen != bps.DefaultQueueLen ||
		o.Inactivity != bps.DefaultInactivity || o.ClaimDeadline != bps.DefaultClaimDeadline || prices != bps.DefaultPrices() {
		t.Errorf("the documented bps-* values are not the defaults: %+v, prices %+v", o, prices)
	}
	def, err := parseStartAPI(t, "--password", "x")
	if err != nil {
		t.Fatal(err)
	}
	if ao.MaxSessions != def.MaxSessions || ao.MaxSessionsPerClient != def.MaxSessionsPerClient ||
		ao.MaxCohortsPerClient != def.MaxCohortsPerClient || ao.MaxKeepAlive != def.MaxKeepAlive || ao.ClientHeader != def.ClientHeader {
		t.Errorf("the documented bps-api-* values are not the defaults: %+v, want %+v", ao, def)
	}
}
