// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"strings"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	accountingmock "github.com/ethersphere/bee/v2/pkg/accounting/mock"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"github.com/ethersphere/bps/pkg/node"
)

// TestBPSPrices: bps-delivery-price and bps-publish-price default to bee's
// base price, take a value, and a price past bee's smallest payment
// threshold is refused by name.
func TestBPSPrices(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    bps.Prices
		wantErr string
	}{
		{nil, bps.DefaultPrices(), ""},
		{[]string{"--bps-delivery-price", "0", "--bps-publish-price", "0"}, bps.Prices{}, ""},
		{[]string{"--bps-delivery-price", "25000", "--bps-publish-price", "7"}, bps.Prices{Delivery: 25000, Publish: 7}, ""},
		{[]string{"--bps-publish-price", "9000001"}, bps.Prices{}, "--bps-publish-price 9000001: must be at most 9000000"},
	} {
		v, err := parseStartOptions(t, tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		got, err := bpsPrices(v)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%v: error %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
}

// TestPluginTakesAccounting: every plugin bee-bps attaches hands bee's
// accounting on to BPS at construction, which then charges the configured
// prices; a node without accounting charges nothing.
func TestPluginTakesAccounting(t *testing.T) {
	t.Parallel()
	prices := bps.Prices{Delivery: 3, Publish: 5}
	net := streamtest.New()
	t.Cleanup(func() { _ = net.Close() })
	for _, tc := range []struct {
		name    string
		factory node.PluginFactory
		acc     accounting.Interface
		want    bps.Prices
	}{
		{"plugin", bpsPlugin(bps.Options{}, prices), accountingmock.NewAccounting(), prices},
		{"watched plugin", newPeerWatch().wrap(bpsPlugin(bps.Options{}, prices)), accountingmock.NewAccounting(), prices},
		{"no accounting", bpsPlugin(bps.Options{}, prices), nil, bps.Prices{}},
	} {
		nd := net.NewNode()
		pl, err := tc.factory(node.PluginEnv{Streamer: nd, Overlay: nd.Overlay(), Accounting: tc.acc})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		t.Cleanup(func() { _ = pl.Close() })
		if got := serviceOf(pl).Prices(); got != tc.want {
			t.Errorf("%s: charges %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
