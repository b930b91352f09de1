// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package seam

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"unsafe"

	"github.com/ethersphere/bee/v2/pkg/node"
	"github.com/ethersphere/bee/v2/pkg/p2p/libp2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bee/v2/pkg/topology/kademlia"
	"github.com/ethersphere/bee/v2/pkg/topology/pslice"
)

// Kademlia reads bee's kademlia, the topology driver NewBee keeps in
// node.Bee's topologyCloser, with the same checks as Open.
func Kademlia(b *node.Bee) (*kademlia.Kad, error) {
	if b == nil {
		return nil, errors.New("seam: nil node")
	}
	v := reflect.ValueOf(b).Elem()
	f, err := private(v, "topologyCloser", reflect.Interface)
	if err != nil {
		return nil, err
	}
	k, ok := f.Interface().(*kademlia.Kad)
	if !ok || k == nil {
		return nil, fmt.Errorf("%w: %s.topologyCloser holds a %T, want *kademlia.Kad", ErrChanged, v.Type(), f.Interface())
	}
	return k, nil
}

// The signatures of kademlia's bin saturation and prune count functions
// (its kadOptions.SaturationFunc and PruneCountFunc) as bee v2.8.1 declares
// them: func(bin uint8, connected *pslice.PSlice, exclude func(swarm.Address) bool) (bool | int, int).
var (
	excludeIn = []reflect.Type{reflect.TypeFor[swarm.Address]()}
	countIn   = []reflect.Type{reflect.TypeFor[uint8](), reflect.TypeFor[*pslice.PSlice](), nil /* exclude */}
)

// KeepPeers makes bee's kademlia k leave the peers for which keep reports
// true out of its bin counts, as it leaves static nodes out: they never
// make a bin oversaturated, so they are never the reason another peer is
// refused (the handshake's Pick, Connected). And kademlia never prunes a bin
// that holds one of them: its prune picks its victims at random among all
// the bin's peers, which would cut their connections. keep runs under
// kademlia's peer-slice lock and must not call into the topology.
//
// It replaces k's SaturationFunc and PruneCountFunc with wrappers around the
// functions bee built (nothing of bee's logic is copied), while holding the
// locks that order the write before the later reads: the handshake
// service's mutex (Pick reads it, and an inbound peer's Connected follows
// its handshake on the same goroutine), libp2p's protocol mutex, and
// kademlia's depth mutex (the prune loop takes it before counting). Call it
// once, right after NewBee. It refuses, changing nothing, if any of these
// private fields is not what bee v2.8.1 has.
func KeepPeers(p2ps *libp2p.Service, k *kademlia.Kad, keep func(swarm.Address) bool) error {
	if p2ps == nil || k == nil || keep == nil {
		return errors.New("seam: KeepPeers needs bee's libp2p service, its kademlia and a predicate")
	}
	return keepPeers(reflect.ValueOf(p2ps).Elem(), reflect.ValueOf(k).Elem(), keep)
}

// keepPeers is KeepPeers on the structs lv (libp2p.Service) and kv
// (kademlia.Kad), which must be addressable.
func keepPeers(lv, kv reflect.Value, keep func(swarm.Address) bool) error {
	// First the shape, by type; then the values.
	opt, err := private(kv, "opt", reflect.Struct)
	if err != nil {
		return err
	}
	sat, err := private(opt, "SaturationFunc", reflect.Func)
	if err != nil {
		return err
	}
	prune, err := private(opt, "PruneCountFunc", reflect.Func)
	if err != nil {
		return err
	}
	if err := checkFunc(sat, reflect.TypeFor[bool]()); err != nil {
		return err
	}
	if err := checkFunc(prune, reflect.TypeFor[int](), reflect.TypeFor[int]()); err != nil {
		return err
	}
	depthMu, err := mutex(kv, "depthMu")
	if err != nil {
		return err
	}
	protocolsMu, err := mutex(lv, "protocolsmu")
	if err != nil {
		return err
	}
	hs, err := private(lv, "handshakeService", reflect.Pointer)
	if err != nil {
		return err
	}
	if hs.Type().Elem().Kind() != reflect.Struct {
		return fmt.Errorf("%w: %s.handshakeService is a %s, want a pointer to a struct", ErrChanged, lv.Type(), hs.Type())
	}
	hsv := reflect.New(hs.Type().Elem()).Elem() // the shape, for now
	if !hs.IsNil() {
		hsv = hs.Elem()
	}
	if _, err := private(hsv, "picker", reflect.Interface); err != nil {
		return err
	}
	hsMu, err := mutex(hsv, "mu")
	if err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		v    reflect.Value
	}{{"kademlia's SaturationFunc", sat}, {"kademlia's PruneCountFunc", prune}, {"libp2p's handshakeService", hs}} {
		if f.v.IsNil() {
			return fmt.Errorf("%w: %s is nil", ErrChanged, f.name)
		}
	}

	newSat := keepOut(sat, keep, nil)
	newPrune := keepOut(prune, keep, func(bin uint8, connected *pslice.PSlice, out []reflect.Value) []reflect.Value {
		if out[1].Int() <= 0 {
			return out
		}
		for _, p := range connected.BinPeers(bin) {
			if keep(p) {
				return []reflect.Value{out[0], reflect.ValueOf(0)}
			}
		}
		return out
	})
	hsMu.Lock()
	protocolsMu.Lock()
	depthMu.Lock()
	sat.Set(newSat)
	prune.Set(newPrune)
	depthMu.Unlock()
	protocolsMu.Unlock()
	hsMu.Unlock()
	return nil
}

// keepOut wraps the counting function f (SaturationFunc or PruneCountFunc)
// so that its exclude argument also excludes the peers keep reports; then,
// if after is not nil, it may change the results.
func keepOut(f reflect.Value, keep func(swarm.Address) bool, after func(bin uint8, connected *pslice.PSlice, out []reflect.Value) []reflect.Value) reflect.Value {
	orig := reflect.ValueOf(f.Interface()) // a copy: f is about to be overwritten
	excludeType := f.Type().In(2)
	yes, no := []reflect.Value{reflect.ValueOf(true)}, []reflect.Value{reflect.ValueOf(false)}
	return reflect.MakeFunc(f.Type(), func(args []reflect.Value) []reflect.Value {
		exclude := args[2]
		args[2] = reflect.MakeFunc(excludeType, func(a []reflect.Value) []reflect.Value {
			if keep(a[0].Interface().(swarm.Address)) {
				return yes
			}
			if exclude.IsNil() {
				return no
			}
			return exclude.Call(a)
		})
		bin, connected := uint8(args[0].Uint()), args[1].Interface().(*pslice.PSlice)
		out := orig.Call(args)
		if after != nil {
			out = after(bin, connected, out)
		}
		return out
	})
}

// checkFunc checks that f is a non-nil func(uint8, *pslice.PSlice,
// func(swarm.Address) bool) returning out.
func checkFunc(f reflect.Value, out ...reflect.Type) error {
	t := f.Type()
	bad := func() error { return fmt.Errorf("%w: kademlia's counting function is a %s", ErrChanged, t) }
	if t.NumIn() != len(countIn) || t.NumOut() != len(out) || t.IsVariadic() {
		return bad()
	}
	for i, want := range countIn {
		if want != nil && t.In(i) != want {
			return bad()
		}
	}
	ex := t.In(2)
	if ex.Kind() != reflect.Func || ex.NumIn() != len(excludeIn) || ex.In(0) != excludeIn[0] || ex.NumOut() != 1 || ex.Out(0) != reflect.TypeFor[bool]() {
		return bad()
	}
	for i, want := range out {
		if t.Out(i) != want {
			return bad()
		}
	}
	return nil
}

// private returns a settable view of v's field name, which must exist, be
// v's own (not promoted) and be of kind k.
func private(v reflect.Value, name string, k reflect.Kind) (reflect.Value, error) {
	sf, ok := v.Type().FieldByName(name)
	if !ok || len(sf.Index) != 1 {
		return reflect.Value{}, fmt.Errorf("%w: field %s.%s not found", ErrChanged, v.Type(), name)
	}
	if sf.Type.Kind() != k {
		return reflect.Value{}, fmt.Errorf("%w: field %s.%s is a %s, want a %s", ErrChanged, v.Type(), name, sf.Type.Kind(), k)
	}
	f := v.Field(sf.Index[0])
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem(), nil
}

// mutex returns v's field name, which must be a sync.RWMutex.
func mutex(v reflect.Value, name string) (*sync.RWMutex, error) {
	f, err := private(v, name, reflect.Struct)
	if err != nil {
		return nil, err
	}
	if f.Type() != reflect.TypeFor[sync.RWMutex]() {
		return nil, fmt.Errorf("%w: field %s.%s is a %s, want sync.RWMutex", ErrChanged, v.Type(), name, f.Type())
	}
	return f.Addr().Interface().(*sync.RWMutex), nil
}
