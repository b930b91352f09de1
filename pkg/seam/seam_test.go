// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package seam_test

import (
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/node"
	"github.com/ethersphere/bee/v2/pkg/p2p/libp2p"
	statestore "github.com/ethersphere/bee/v2/pkg/statestore/mock"
	"github.com/ethersphere/bps/pkg/seam"
)

// TestCheckPinsBee pins the shape of node.Bee this project was written
// against (bee v2.8.1). If it fails after a bee upgrade, re-read node.go
// before touching the seam.
func TestCheckPinsBee(t *testing.T) {
	t.Parallel()

	if err := seam.Check(); err != nil {
		t.Fatalf("bee v2.8.1 shape: %v", err)
	}
}

// beeLike has the fields the seam reads, declared as bee declares them.
type beeLike struct {
	logger           any //nolint:unused // a field bee has and the seam does not read
	p2pService       io.Closer
	apiServer        *http.Server
	accountingCloser io.Closer
	stateStoreCloser io.Closer
}

type closer struct{}

func (closer) Close() error { return nil }

func TestCheckRefusesChangedShapes(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		typ  reflect.Type
		want string
	}{
		{
			name: "missing field",
			typ: reflect.TypeFor[struct {
				p2pService io.Closer
				apiServer  *http.Server
			}](),
			want: "field struct { p2pService io.Closer; apiServer *http.Server }.accountingCloser not found",
		},
		{
			name: "field renamed",
			typ: reflect.TypeFor[struct {
				p2p              io.Closer
				accountingCloser io.Closer
				apiServer        *http.Server
			}](),
			want: ".p2pService not found",
		},
		{
			name: "field retyped",
			typ: reflect.TypeFor[struct {
				p2pService       *libp2p.Service
				accountingCloser io.Closer
				apiServer        *http.Server
			}](),
			want: ".p2pService has type *libp2p.Service, want io.Closer",
		},
		{
			name: "api server retyped",
			typ: reflect.TypeFor[struct {
				p2pService       io.Closer
				accountingCloser io.Closer
				apiServer        io.Closer
			}](),
			want: ".apiServer has type io.Closer, want *http.Server",
		},
		{
			name: "not a struct",
			typ:  reflect.TypeFor[*node.Bee](),
			want: "is a ptr, not a struct",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			err := seam.CheckType(tc.typ)
			if !errors.Is(err, seam.ErrChanged) {
				t.Fatalf("got %v, want an error wrapping %v", err, seam.ErrChanged)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q, want it to contain %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), "bee internals changed: field ") && tc.name != "not a struct" {
				t.Fatalf("got %q, want the \"bee internals changed: field\" prefix", err)
			}
		})
	}

	if err := seam.CheckType(reflect.TypeFor[beeLike]()); err != nil {
		t.Fatalf("look-alike with extra fields and another order: %v", err)
	}
}

func TestReadChecksValues(t *testing.T) {
	t.Parallel()

	p2ps, acc, srv := new(libp2p.Service), new(accounting.Accounting), new(http.Server)
	store := statestore.NewStateStore()

	t.Run("good", func(t *testing.T) {
		t.Parallel()

		b := &beeLike{p2pService: p2ps, accountingCloser: acc, apiServer: srv, stateStoreCloser: store}
		got, err := seam.ReadStruct(reflect.ValueOf(b).Elem())
		if err != nil {
			t.Fatal(err)
		}
		if got[0] != p2ps || got[1] != acc || got[2] != srv || got[3] != store {
			t.Fatalf("read %v, want the stored pointers", got)
		}
	})

	for _, tc := range []struct {
		name string
		bee  *beeLike
		want string
	}{
		{
			name: "nil p2p",
			bee:  &beeLike{accountingCloser: acc, apiServer: srv, stateStoreCloser: store},
			want: ".p2pService is nil",
		},
		{
			name: "nil api server",
			bee:  &beeLike{p2pService: p2ps, accountingCloser: acc, stateStoreCloser: store},
			want: ".apiServer is nil",
		},
		{
			name: "other accounting",
			bee:  &beeLike{p2pService: p2ps, accountingCloser: closer{}, apiServer: srv, stateStoreCloser: store},
			want: ".accountingCloser holds a seam_test.closer, want *accounting.Accounting",
		},
		{
			name: "state store that is no state store",
			bee:  &beeLike{p2pService: p2ps, accountingCloser: acc, apiServer: srv, stateStoreCloser: closer{}},
			want: ".stateStoreCloser holds a seam_test.closer, want storage.StateStorer",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			_, err := seam.ReadStruct(reflect.ValueOf(tc.bee).Elem())
			if !errors.Is(err, seam.ErrChanged) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestOpenRefusesAnUnbuiltNode(t *testing.T) {
	t.Parallel()

	if _, err := seam.Open(nil); err == nil {
		t.Fatal("Open(nil): no error")
	}
	_, err := seam.Open(new(node.Bee))
	if !errors.Is(err, seam.ErrChanged) || !strings.Contains(err.Error(), "node.Bee.p2pService is nil") {
		t.Fatalf("got %v", err)
	}
}
