// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	accountingmock "github.com/ethersphere/bee/v2/pkg/accounting/mock"
	"github.com/ethersphere/bps/pkg/api"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
	"github.com/prometheus/client_golang/prometheus"
)

// fqName reads a Desc's fully qualified name (Desc exposes it only in its
// String).
var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// registeredSeries are the names of every series a bee-bps node registers
// on bee's /metrics — the BPS plugin's (bee_bps_*, with its pricing) and
// the /pubsub handler's (bee_bps_api_*, with the session mux's) — from the
// collectors' descriptions, so that vectors without a child yet count.
func registeredSeries(t *testing.T) map[string]bool {
	t.Helper()
	net := streamtest.New()
	t.Cleanup(func() { _ = net.Close() })
	nd := net.NewNode()
	// Charging, so that the accounting's series exist (bee_bps_accounting_*).
	svc, err := bps.New(nd, nd.Overlay(), bps.Options{
		Pricing: bps.Pricing{Prices: bps.DefaultPrices()},
		Deps:    bps.Deps{Accounting: accountingmock.NewAccounting()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	srv, err := api.New(svc, nil, nil, api.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	names := map[string]bool{}
	for _, c := range append(bpsPlugged{Service: svc}.Metrics(), srv.Metrics()...) {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no name in %s", d)
			}
			names[m[1]] = true
		}
	}
	return names
}

// dashboardQueries are every PromQL query in a Grafana dashboard's JSON:
// each "expr", and each template variable's query.
func dashboardQueries(v any, inQuery bool) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if inQuery && v["type"] == "datasource" {
			return nil // a data source variable: its query is a plugin's name
		}
		for k, x := range v {
			switch {
			case k == "expr" || inQuery && k == "query":
				if s, ok := x.(string); ok {
					out = append(out, s)
					continue
				}
			case k == "definition":
				continue // the query's label in Grafana's editor
			}
			out = append(out, dashboardQueries(x, inQuery || k == "templating")...)
		}
	case []any:
		for _, x := range v {
			out = append(out, dashboardQueries(x, inQuery)...)
		}
	}
	return out
}

// bpsSeries matches a BPS series name in PromQL.
var bpsSeries = regexp.MustCompile(`\bbee_bps_[a-z0-9_]+`)

// TestGrafanaDashboard: docs/grafana-bps.json queries only series a node
// registers, and every series a node registers is on it.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../docs/grafana-bps.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("docs/grafana-bps.json: %v", err)
	}
	registered := registeredSeries(t)
	queried := map[string]bool{}
	queries := dashboardQueries(dash, false)
	if len(queries) < 10 {
		t.Fatalf("%d queries in the dashboard", len(queries))
	}
	for _, q := range queries {
		names := bpsSeries.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("query %q reads no bee_bps_ series", q)
		}
		for _, n := range names {
			queried[n] = true
			if !registered[n] {
				t.Errorf("query %q reads %s, which no node registers", q, n)
			}
		}
	}
	var missing []string
	for n := range registered {
		if !queried[n] {
			missing = append(missing, n)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("registered but on no panel of docs/grafana-bps.json (add a query for each to a panel): %s", strings.Join(missing, ", "))
	}
}
