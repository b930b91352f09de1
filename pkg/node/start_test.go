// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bps/pkg/devchain"
	"github.com/ethersphere/bps/pkg/node"
)

// TestStartFailsAfterBee: a failure once bee is running (here the plugin's
// or the /pubsub handler's constructor) returns that error, not a panic,
// and shuts bee down: its API and p2p ports are free again, and goleak
// (TestMain) finds none of its goroutines.
func TestStartFailsAfterBee(t *testing.T) {
	if testing.Short() {
		t.Skip("starts bee nodes")
	}

	chain, err := devchain.New(devchain.Options{BlockTime: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := chain.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := chain.Close(); err != nil {
			t.Error(err)
		}
	})

	errPlugin := errors.New("plugin refused its options")
	errPubSub := errors.New("pubsub refused its options")
	for _, tc := range []struct {
		name   string
		modify func(*node.Config)
		want   error
	}{
		{"plugin", func(c *node.Config) {
			c.Plugin = func(node.PluginEnv) (node.Plugin, error) { return nil, errPlugin }
		}, errPlugin},
		{"pubsub handler", func(c *node.Config) {
			c.PubSubHandler = func(node.Plugin, node.Connector, log.Logger) (http.Handler, error) { return nil, errPubSub }
		}, errPubSub},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, tc.name, chain)
			c.APIAddr, c.P2PAddr = freeAddr(t), freeAddr(t)
			tc.modify(&c)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n, err := node.Start(ctx, c)
			if !errors.Is(err, tc.want) || n != nil {
				t.Fatalf("Start = %v, %v; want nil and %v", n, err, tc.want)
			}
			for _, addr := range []string{c.APIAddr, c.P2PAddr} {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					t.Fatalf("%s still taken after the failed start: %v", addr, err)
				}
				ln.Close()
			}
		})
	}
}

// freeAddr is a loopback address no one listens on.
func freeAddr(t *testing.T) string {
	t.Helper()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
