// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package seam_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/p2p/libp2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bee/v2/pkg/topology/kademlia"
	"github.com/ethersphere/bee/v2/pkg/topology/pslice"
	"github.com/ethersphere/bps/pkg/seam"
)

// Look-alikes of the private fields of kademlia.Kad and libp2p.Service that
// KeepPeers reads and writes, declared as bee v2.8.1 declares them.
type (
	excludeFunc func(peer swarm.Address) bool
	kadOptions  struct {
		SaturationFunc func(bin uint8, connected *pslice.PSlice, exclude excludeFunc) bool
		PruneCountFunc func(bin uint8, connected *pslice.PSlice, exclude excludeFunc) (int, int)
	}
	kadLike struct {
		opt     kadOptions
		depthMu sync.RWMutex
	}
	handshakeLike struct {
		picker p2p.Picker
		mu     sync.RWMutex
	}
	libp2pLike struct {
		protocolsmu      sync.RWMutex
		handshakeService *handshakeLike
	}
)

// newKadLike counts like bee: a bin is saturated at limit peers not
// excluded, and prunes the excess.
func newKadLike(limit int) *kadLike {
	count := func(bin uint8, connected *pslice.PSlice, exclude excludeFunc) int {
		n := 0
		for _, p := range connected.BinPeers(bin) {
			if exclude == nil || !exclude(p) {
				n++
			}
		}
		return n
	}
	return &kadLike{opt: kadOptions{
		SaturationFunc: func(bin uint8, c *pslice.PSlice, ex excludeFunc) bool { return count(bin, c, ex) >= limit },
		PruneCountFunc: func(bin uint8, c *pslice.PSlice, ex excludeFunc) (int, int) {
			n := count(bin, c, ex)
			return n, n - limit
		},
	}}
}

// peersIn returns n random addresses in bin of base.
func peersIn(t *testing.T, base swarm.Address, bin uint8, n int) []swarm.Address {
	t.Helper()
	var out []swarm.Address
	for len(out) < n {
		if a := swarm.RandAddress(t); swarm.Proximity(base.Bytes(), a.Bytes()) == bin {
			out = append(out, a)
		}
	}
	return out
}

// TestKeepPeers: peers that keep reports are left out of kademlia's bin
// counts, so a bin they fill is not saturated, and a bin that holds one is
// never pruned; other bins count and prune as before.
func TestKeepPeers(t *testing.T) {
	t.Parallel()
	base := swarm.RandAddress(t)
	connected := pslice.New(int(swarm.MaxBins), base)
	kept := peersIn(t, base, 0, 3)
	others := peersIn(t, base, 0, 5)
	bin1 := peersIn(t, base, 1, 7)
	bin2 := peersIn(t, base, 2, 8)
	kept = append(kept, bin2[0])
	for _, ps := range [][]swarm.Address{kept[:3], others, bin1, bin2} {
		connected.Add(ps...)
	}
	keep := func(a swarm.Address) bool { return swarm.ContainsAddress(kept, a) }
	notReachable := func(a swarm.Address) bool { return a.Equal(others[0]) }

	kad := newKadLike(5)
	if !kad.opt.SaturationFunc(0, connected, notReachable) {
		t.Fatal("look-alike: bin 0 not saturated before")
	}
	if err := seam.KeepPeersIn(&libp2pLike{handshakeService: new(handshakeLike)}, kad, keep); err != nil {
		t.Fatal(err)
	}

	// bin 0: 8 peers, 3 kept; with bee's own exclude, 4 count.
	if !kad.opt.SaturationFunc(0, connected, nil) {
		t.Error("bin 0 with 5 peers counted not saturated at 5")
	}
	if kad.opt.SaturationFunc(0, connected, notReachable) {
		t.Error("bin 0 saturated although only 4 of its peers count")
	}
	// bin 1: nothing kept, as before.
	if !kad.opt.SaturationFunc(1, connected, nil) {
		t.Error("bin 1 no longer saturated")
	}
	if n, prune := kad.opt.PruneCountFunc(1, connected, nil); n != 7 || prune != 2 {
		t.Errorf("bin 1: count %d, prune %d; want 7, 2 (as before)", n, prune)
	}
	// bin 2: 8 peers, 1 kept: 7 count, 2 over, but never pruned.
	if n, prune := kad.opt.PruneCountFunc(2, connected, nil); n != 7 || prune != 0 {
		t.Errorf("bin 2: count %d, prune %d; want 7, 0 (it holds a kept peer)", n, prune)
	}
}

// TestKeepPeersRefusesChangedShapes: KeepPeers changes nothing and says what
// differs when bee's fields are not what it was written against.
func TestKeepPeersRefusesChangedShapes(t *testing.T) {
	t.Parallel()
	keep := func(swarm.Address) bool { return true }
	hs := func() *libp2pLike { return &libp2pLike{handshakeService: new(handshakeLike)} }

	type wrongSig struct {
		SaturationFunc func(bin int, connected *pslice.PSlice, exclude excludeFunc) bool
		PruneCountFunc func(bin uint8, connected *pslice.PSlice, exclude excludeFunc) (int, int)
	}
	for _, tc := range []struct {
		name     string
		p2p, kad any
		want     string
	}{
		{"no depth mutex", hs(), &struct{ opt kadOptions }{opt: newKadLike(1).opt}, "depthMu not found"},
		{"a plain mutex", hs(), &struct {
			opt     kadOptions
			depthMu sync.Mutex
		}{opt: newKadLike(1).opt}, "want sync.RWMutex"},
		{"another signature", hs(), &struct {
			opt     wrongSig
			depthMu sync.RWMutex
		}{opt: wrongSig{SaturationFunc: func(int, *pslice.PSlice, excludeFunc) bool { return false }}}, "counting function is a func(int"},
		{"no options", hs(), &struct{ depthMu sync.RWMutex }{}, "opt not found"},
		{"no handshake picker", &struct {
			protocolsmu      sync.RWMutex
			handshakeService *struct{ mu sync.RWMutex }
		}{handshakeService: new(struct{ mu sync.RWMutex })}, newKadLike(1), "picker not found"},
		{"no handshake service", &libp2pLike{}, newKadLike(1), "handshakeService is nil"},
		{"nil saturation function", hs(), &kadLike{}, "SaturationFunc is nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := seam.KeepPeersIn(tc.p2p, tc.kad, keep)
			if !errors.Is(err, seam.ErrChanged) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want ErrChanged with %q", err, tc.want)
			}
		})
	}

	if err := seam.KeepPeers(nil, nil, keep); err == nil {
		t.Fatal("KeepPeers on nothing: no error")
	}
}

// TestKeepPeersPinsBee: bee v2.8.1's libp2p.Service and kademlia.Kad have
// every field KeepPeers reads, with the types it expects (their zero values
// stop it only at the first nil function).
func TestKeepPeersPinsBee(t *testing.T) {
	t.Parallel()
	err := seam.KeepPeersIn(new(libp2p.Service), new(kademlia.Kad), func(swarm.Address) bool { return false })
	if !errors.Is(err, seam.ErrChanged) || !strings.Contains(err.Error(), "kademlia's SaturationFunc is nil") {
		t.Fatalf("bee v2.8.1 shape: %v", err)
	}
}
