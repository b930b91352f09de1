// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"crypto/rand"
	"fmt"
	"time"

	ic "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
	ma "github.com/multiformats/go-multiaddr"
)

// newMocknet is the transport of one run: go-libp2p's in-memory network,
// every link with the same one-way latency.
func newMocknet(latency time.Duration) mocknet.Mocknet {
	mn := mocknet.New()
	mn.SetLinkDefaults(mocknet.LinkOptions{Latency: latency})
	return mn
}

// addHosts adds n hosts with Ed25519 identities (libp2p's default key
// type; gossipsub signs every message with it) on blackhole addresses that
// nothing dials: mocknet connects hosts in memory.
func addHosts(mn mocknet.Mocknet, n int) ([]host.Host, error) {
	hosts := make([]host.Host, 0, n)
	base := len(mn.Peers())
	for i := range n {
		sk, _, err := ic.GenerateEd25519Key(rand.Reader)
		if err != nil {
			return nil, err
		}
		k := base + i
		a, err := ma.NewMultiaddr(fmt.Sprintf("/ip6/100::%x:%x/tcp/4242", k>>16, k&0xffff))
		if err != nil {
			return nil, err
		}
		h, err := mn.AddPeer(sk, a)
		if err != nil {
			return nil, err
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// connect links a and b and connects them, a dialing.
func connect(mn mocknet.Mocknet, a, b host.Host) error {
	if _, err := mn.LinkPeers(a.ID(), b.ID()); err != nil {
		return fmt.Errorf("link: %w", err)
	}
	if _, err := mn.ConnectPeers(a.ID(), b.ID()); err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	return nil
}
