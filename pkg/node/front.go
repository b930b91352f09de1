// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/log"
)

// pubsubPrefix is the API path the plugin's handler serves.
const pubsubPrefix = "/pubsub"

// front is the server on the node's one API port. Paths under /pubsub go to
// the plugin's handler, everything else to bee's own API handler.
//
// bee's handler is called in process, not through a proxy: bee's server
// keeps listening on its internal loopback port (its API cannot be
// disabled), but the handler it serves is read once from the seam and never
// assigned, so nothing races with bee's server goroutine. WebSocket upgrades
// work as on bee's own port, since the handler hijacks this server's
// connections.
type front struct {
	srv    *http.Server
	ln     *trackingListener
	logger log.Logger
	done   chan struct{} // closed when Serve returns
}

// isPubSub reports whether path is /pubsub or below it.
func isPubSub(path string) bool {
	return path == pubsubPrefix || strings.HasPrefix(path, pubsubPrefix+"/")
}

// newFront wraps a listener that is already bound (so that a busy port
// fails before bee starts) and serves nothing until serve.
func newFront(ln net.Listener, logger log.Logger) *front {
	return &front{
		ln:     &trackingListener{Listener: ln, conns: make(map[*trackedConn]struct{})},
		logger: logger,
		done:   make(chan struct{}),
	}
}

// serve starts serving: pubsub (nil: 404) under /pubsub, bee elsewhere.
func (f *front) serve(bee, pubsub http.Handler) {
	if pubsub == nil {
		pubsub = http.NotFoundHandler()
	}
	f.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if isPubSub(r.URL.Path) {
				pubsub.ServeHTTP(w, r)
				return
			}
			bee.ServeHTTP(w, r)
		}),
		// bee's own API server's timeouts.
		IdleTimeout:       30 * time.Second,
		ReadHeaderTimeout: 3 * time.Second,
	}
	go func() {
		defer close(f.done)
		if err := f.srv.Serve(f.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.logger.Error(err, "api server stopped")
		}
	}()
}

// shutdown stops accepting, waits (bounded by ctx) for requests in flight,
// then closes every connection left, hijacked ones (WebSockets) included.
func (f *front) shutdown(ctx context.Context) error {
	var err error
	if f.srv == nil {
		err = f.ln.Close()
		close(f.done)
	} else if err = f.srv.Shutdown(ctx); err != nil {
		err = fmt.Errorf("api server: %w", err)
		_ = f.srv.Close()
	}
	f.ln.closeConns()
	select {
	case <-f.done:
	case <-ctx.Done():
		return errors.Join(err, fmt.Errorf("api server: %w", ctx.Err()))
	}
	return err
}

// trackingListener keeps the connections it accepted until they close, so
// that shutdown can close hijacked ones, which http.Server forgets.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex // guards conns
	conns map[*trackedConn]struct{}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

func (l *trackingListener) closeConns() {
	l.mu.Lock()
	conns := make([]*trackedConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}
