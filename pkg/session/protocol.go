// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"context"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Protocol is what the mux uses of the node's BPS service: joining a broker
// as a subscriber or as a publisher, and the backoff a failed join leaves.
// Node is the node's own; pkg/session/mock is one without a network.
type Protocol interface {
	Subscribe(ctx context.Context, broker swarm.Address, sp *bps.Spec) (Subscription, error)
	Publish(ctx context.Context, broker swarm.Address, sp *bps.Spec, o bps.PublishOptions) (Publisher, error)
	// Backoff reports when this node may next join sp at broker (zero:
	// now) and why its last attempt there failed (nil if unknown).
	Backoff(broker swarm.Address, sp *bps.Spec) (time.Time, error)
}

// Subscription is a subscriber stream (a *bps.Subscription).
type Subscription interface {
	C() <-chan bps.Delivery
	Err() error
	Dropped() uint64
	Close() error
}

// Publisher is a publisher stream (a *bps.Publisher).
type Publisher interface {
	C() <-chan bps.Delivery
	Err() error
	Send(ctx context.Context, b *pb.Broadcast) error
	Challenge() []byte
	Close() error
}

// Node is the node's BPS service as the mux uses it; every other method of
// the service is its own.
type Node struct{ *bps.Service }

var _ Protocol = Node{}

// Subscribe joins broker as a subscriber of sp (bps.Service.Subscribe).
func (n Node) Subscribe(ctx context.Context, broker swarm.Address, sp *bps.Spec) (Subscription, error) {
	sub, err := n.Service.Subscribe(ctx, broker, sp)
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// Publish joins broker as a publisher in sp (bps.Service.Publish).
func (n Node) Publish(ctx context.Context, broker swarm.Address, sp *bps.Spec, o bps.PublishOptions) (Publisher, error) {
	p, err := n.Service.Publish(ctx, broker, sp, o)
	if err != nil {
		return nil, err
	}
	return p, nil
}
