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

// FrontTimeouts are the API front's timeouts, for tests that shorten them.
type FrontTimeouts = frontTimeouts

// DefaultFrontTimeouts are the timeouts the node's front uses.
var DefaultFrontTimeouts = defaultFrontTimeouts

// ServeFrontWith serves the API front on ln with timeouts t and returns its
// shutdown.
func ServeFrontWith(ln net.Listener, bee, pubsub http.Handler, t FrontTimeouts) func(context.Context) error {
	f := newFront(ln, log.Noop)
	f.timeouts = t
	f.serve(bee, pubsub)
	return f.shutdown
}

// Versions is the bee and bee API version a node reports.
var Versions = versions

// BeeAPIVersions are the bee API versions per bee release.
var BeeAPIVersions = beeAPIVersions
