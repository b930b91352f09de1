// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"context"
	"net"
	"net/http"

	"github.com/ethersphere/bee/v2/pkg/log"
)

// Attach, ProtocolHost and CheckLogMetrics reach the plugin catch-up and the
// logger check without a bee node.
var (
	Attach          = attach
	CheckLogMetrics = checkLogMetrics
	ErrNoLogMetrics = errNoLogMetrics
)

type ProtocolHost = protocolHost

// Validate runs the configuration checks Start runs first.
func (c Config) Validate() error { return c.validate() }

// ServeFrontDrained serves the API front on ln and returns its shutdown,
// which runs drain before it closes the connections left.
func ServeFrontDrained(ln net.Listener, bee, pubsub http.Handler, drain func() error) func(context.Context) error {
	f := newFront(ln, log.Noop)
	f.serve(bee, pubsub)
	return func(ctx context.Context) error { return f.shutdownWith(ctx, drain) }
}

// ServeFront serves the API front on ln and returns its shutdown.
func ServeFront(ln net.Listener, bee, pubsub http.Handler) func(context.Context) error {
	f := newFront(ln, log.Noop)
	f.serve(bee, pubsub)
	return f.shutdown
}
