// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"strings"
	"testing"
	"time"

	accountingmock "github.com/ethersphere/bee/v2/pkg/accounting/mock"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// TestNewRejectsInvalidGroup: New refuses an invalid option, naming its
// group and its field; each group's defaults, and the zero Options, pass.
func TestNewRejectsInvalidGroup(t *testing.T) {
	t.Parallel()
	net := streamtest.New()
	t.Cleanup(func() { _ = net.Close() })
	for _, tc := range []struct {
		name string
		o    bps.Options
		want string // "" if valid
	}{
		{"zero", bps.Options{}, ""},
		{"node", bps.NodeOptions(), ""},
		{"defaults", bps.Options{Bounds: bps.DefaultBounds(), Timing: bps.DefaultTiming(), Tree: bps.DefaultTree(), Pricing: bps.DefaultPricing()}, ""},
		{"bounds", bps.Options{Bounds: bps.Bounds{QueueLen: -1}}, "bounds: QueueLen must not be negative"},
		{"timing", bps.Options{Timing: bps.Timing{WriteTimeout: -time.Second}}, "timing: WriteTimeout must not be negative"},
		{"backoff", bps.Options{Timing: bps.Timing{BackoffMin: time.Minute, BackoffMax: time.Second}}, "timing: BackoffMin 1m0s exceeds BackoffMax 1s"},
		{"tree", bps.Options{Tree: bps.Tree{RelayCapacity: -2}}, "tree: RelayCapacity must not be negative"},
		{"tree wait", bps.Options{Tree: bps.Tree{LazyWait: -time.Millisecond}}, "tree: LazyWait must not be negative"},
		{"pricing", bps.Options{Pricing: bps.Pricing{Settlement: bps.Settlement{Frames: -1}}}, "pricing: Settlement.Frames must not be negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			nd := net.NewNode()
			svc, err := bps.New(nd, nd.Overlay(), tc.o)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("valid options refused: %v", err)
				}
				if err := svc.Close(); err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				_ = svc.Close()
				t.Fatalf("accepted, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestPricingAtConstruction: a service charges only if it is built with
// both an accounting and prices, and then settles at the defaults of the
// fields it was not given.
func TestPricingAtConstruction(t *testing.T) {
	t.Parallel()
	net := streamtest.New()
	t.Cleanup(func() { _ = net.Close() })
	acc := accountingmock.NewAccounting()
	for _, tc := range []struct {
		name  string
		o     bps.Options
		want  bps.Prices
		frame int
	}{
		{"no accounting", bps.Options{Pricing: bps.DefaultPricing()}, bps.Prices{}, 0},
		{"no prices", bps.Options{Deps: bps.Deps{Accounting: acc}}, bps.Prices{}, 0},
		{"node", bps.Options{Pricing: bps.Pricing{Prices: testPrices, Settlement: bps.Settlement{Frames: 3}}, Deps: bps.Deps{Accounting: acc}}, testPrices, 3},
	} {
		nd := net.NewNode()
		svc, err := bps.New(nd, nd.Overlay(), tc.o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = svc.Close() })
		st := svc.Settlement()
		if svc.Prices() != tc.want || st.Frames != tc.frame {
			t.Errorf("%s: charges %+v settling every %d frames, want %+v and %d", tc.name, svc.Prices(), st.Frames, tc.want, tc.frame)
		}
		if tc.frame != 0 && (st.Credit != bps.DefaultSettleCredit || st.Interval != bps.DefaultSettleInterval) {
			t.Errorf("%s: settlement %+v, want the defaults besides Frames", tc.name, st)
		}
	}
}
