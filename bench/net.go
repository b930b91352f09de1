// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	ic "github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
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

// linker connects hosts of one mocknet on demand, by peer id: what a BPS
// node does when it attaches to a candidate in the tree (bee dials the
// candidate's underlays; on mocknet the link is made in memory, with the
// network's default latency). Safe for concurrent use.
type linker struct {
	mn mocknet.Mocknet
	mu sync.Mutex // serialises check-and-link, so a pair gets one link
}

// dialer returns the dial function of host h.
func (l *linker) dialer(h host.Host) func(ctx context.Context, id peer.ID) error {
	return func(ctx context.Context, id peer.ID) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if h.Network().Connectedness(id) == network.Connected {
			return nil
		}
		if len(l.mn.LinksBetweenPeers(h.ID(), id)) == 0 {
			if _, err := l.mn.LinkPeers(h.ID(), id); err != nil {
				return fmt.Errorf("link: %w", err)
			}
		}
		if _, err := l.mn.ConnectPeers(h.ID(), id); err != nil {
			return fmt.Errorf("connect: %w", err)
		}
		return nil
	}
}
