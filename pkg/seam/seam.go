// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package seam is the one place where BPS reaches into bee's private state.
//
// bee has no plugin hook: node.NewBee builds the libp2p service, the
// accounting and the API server and keeps them in unexported fields of
// node.Bee. A protocol added after NewBee needs the first (AddProtocol,
// NewStream, Peers, Blocklist), the bandwidth incentives need the second,
// the single API port needs the third, and SWIP-74's transport binding needs the fourth (the state store, where bee's addressbook keeps the records peers signed). This package reads exactly those
// four fields with reflect and unsafe, read-only, and nothing else.
//
// The reads are only sound while bee's struct has the shape this package was
// written against (bee v2.4.0 to v2.8.1 and master agree). Check verifies
// that shape, and Open refuses to read a node.Bee whose shape or whose field
// values are not what is expected, so a bee upgrade that moves things fails
// at start-up with a clear error instead of corrupting memory.
package seam

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"unsafe"

	"github.com/ethersphere/bee/v2/pkg/accounting"
	"github.com/ethersphere/bee/v2/pkg/node"
	"github.com/ethersphere/bee/v2/pkg/p2p/libp2p"
	"github.com/ethersphere/bee/v2/pkg/storage"
)

// The private fields of node.Bee read here, with their declared type and the
// dynamic type their value must have once NewBee has returned.
var fields = []field{
	{name: "p2pService", declared: reflect.TypeFor[io.Closer](), value: reflect.TypeFor[*libp2p.Service]()},
	{name: "accountingCloser", declared: reflect.TypeFor[io.Closer](), value: reflect.TypeFor[*accounting.Accounting]()},
	{name: "apiServer", declared: reflect.TypeFor[*http.Server](), value: reflect.TypeFor[*http.Server]()},
	{name: "stateStoreCloser", declared: reflect.TypeFor[io.Closer](), value: reflect.TypeFor[storage.StateStorer]()},
}

type field struct {
	name     string
	declared reflect.Type // the field's type in the struct declaration
	value    reflect.Type // the type of the value NewBee stores in it (an interface: one it implements)
}

// ErrChanged is wrapped by every error that reports bee's internals are not
// what this package expects.
var ErrChanged = errors.New("bee internals changed")

// Internals are the parts of a running bee node that BPS needs. They belong
// to the node: do not close them, bee's Shutdown does.
type Internals struct {
	// P2P is bee's libp2p service.
	P2P *libp2p.Service
	// Accounting is bee's accounting, the one pushsync and retrieval use.
	Accounting *accounting.Accounting
	// APIServer is the http.Server bee serves its API with. Read its
	// Handler, never assign it: bee's server goroutine reads it concurrently.
	APIServer *http.Server
	// StateStore is bee's state store, where its addressbook keeps the
	// signed address record each peer presented in its handshake.
	StateStore storage.StateStorer
}

// Check reports whether node.Bee still has the fields this package reads,
// with the declared types it expects. Call it before building a node, to
// refuse to start rather than fail after a long start-up.
func Check() error {
	return check(reflect.TypeFor[node.Bee]())
}

func check(t reflect.Type) error {
	if t.Kind() != reflect.Struct {
		return fmt.Errorf("%w: %s is a %s, not a struct", ErrChanged, t, t.Kind())
	}
	for _, f := range fields {
		sf, ok := t.FieldByName(f.name)
		if !ok {
			return fmt.Errorf("%w: field %s.%s not found", ErrChanged, t, f.name)
		}
		if len(sf.Index) != 1 {
			return fmt.Errorf("%w: field %s.%s is promoted from an embedded struct", ErrChanged, t, f.name)
		}
		if sf.Type != f.declared {
			return fmt.Errorf("%w: field %s.%s has type %s, want %s", ErrChanged, t, f.name, sf.Type, f.declared)
		}
	}
	return nil
}

// Open reads the internals of b, which must have been returned by
// node.NewBee without error. It fails if Check fails or if a field does not
// hold a non-nil value of the expected type.
func Open(b *node.Bee) (*Internals, error) {
	if b == nil {
		return nil, errors.New("seam: nil node")
	}
	values, err := read(reflect.ValueOf(b).Elem())
	if err != nil {
		return nil, err
	}
	return &Internals{
		P2P:        values[0].(*libp2p.Service),
		Accounting: values[1].(*accounting.Accounting),
		APIServer:  values[2].(*http.Server),
		StateStore: values[3].(storage.StateStorer),
	}, nil
}

// read returns the values of fields in the struct v, in the order of fields,
// each checked to be a non-nil value of the field's value type.
func read(v reflect.Value) ([]any, error) {
	t := v.Type()
	if err := check(t); err != nil {
		return nil, err
	}
	out := make([]any, len(fields))
	for i, f := range fields {
		fv := v.FieldByName(f.name)
		// An unexported field cannot be read through reflect's safe API.
		// v is addressable (it is the element of a pointer), so build an
		// exported view of the same memory with the type check just made.
		fv = reflect.NewAt(fv.Type(), unsafe.Pointer(fv.UnsafeAddr())).Elem()
		if fv.IsNil() {
			return nil, fmt.Errorf("%w: field %s.%s is nil", ErrChanged, t, f.name)
		}
		val := fv.Interface()
		got := reflect.TypeOf(val)
		if f.value.Kind() == reflect.Interface && got.Implements(f.value) {
			out[i] = val
			continue
		}
		if got != f.value {
			return nil, fmt.Errorf("%w: field %s.%s holds a %s, want %s", ErrChanged, t, f.name, got, f.value)
		}
		out[i] = val
	}
	return out, nil
}
