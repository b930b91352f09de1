// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	srv      *http.Server
	ln       *trackingListener
	logger   log.Logger
	timeouts frontTimeouts
	done     chan struct{} // closed when Serve returns
}

// frontTimeouts bound what a client may hold on the API port without
// sending anything useful.
//
// bee's own API server has ReadHeaderTimeout and IdleTimeout but no
// ReadTimeout, since an upload may rightly take hours; so a request body
// trickled a byte at a time would hold a connection forever. A body
// therefore gets the minimum rate of Apache's mod_reqtimeout: it must
// arrive within BodyGrace plus one second per BodyMinRate bytes received.
// A WebSocket upgrade has no body, and gorilla's Upgrade clears the
// connection's deadlines once it hijacks it, so none of these cut a session:
// its keep-alive bounds it.
type frontTimeouts struct {
	ReadHeader  time.Duration // request line and headers
	Idle        time.Duration // a kept-alive connection between requests
	BodyGrace   time.Duration // a request body's allowance before its rate counts
	BodyMinRate int64         // bytes per second a request body must keep up
}

// defaultFrontTimeouts are bee's API server's timeouts (ReadHeader, Idle)
// and mod_reqtimeout's default body rate.
var defaultFrontTimeouts = frontTimeouts{
	ReadHeader:  3 * time.Second,
	Idle:        30 * time.Second,
	BodyGrace:   20 * time.Second,
	BodyMinRate: 500,
}

// isPubSub reports whether path is /pubsub or below it.
func isPubSub(path string) bool {
	return path == pubsubPrefix || strings.HasPrefix(path, pubsubPrefix+"/")
}

// newFront wraps a listener that is already bound (so that a busy port
// fails before bee starts) and serves nothing until serve.
func newFront(ln net.Listener, logger log.Logger) *front {
	return &front{
		ln:       &trackingListener{Listener: ln, conns: make(map[*trackedConn]struct{})},
		logger:   logger,
		timeouts: defaultFrontTimeouts,
		done:     make(chan struct{}),
	}
}

// serve starts serving: pubsub (nil: 404) under /pubsub, bee elsewhere.
func (f *front) serve(bee, pubsub http.Handler) {
	if pubsub == nil {
		pubsub = http.NotFoundHandler()
	}
	f.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.limitBody(w, r)
			if isPubSub(r.URL.Path) {
				pubsub.ServeHTTP(w, r)
				return
			}
			bee.ServeHTTP(w, r)
		}),
		IdleTimeout:       f.timeouts.Idle,
		ReadHeaderTimeout: f.timeouts.ReadHeader,
	}
	go func() {
		defer close(f.done)
		if err := f.srv.Serve(f.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.logger.Error(err, "api server stopped")
		}
	}()
}

// limitBody makes r's body, if it has one, keep up the minimum rate: the
// connection's read deadline starts at BodyGrace and moves a second later
// per BodyMinRate bytes read. net/http resets the deadline for the next
// request on the connection.
func (f *front) limitBody(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody || f.timeouts.BodyMinRate <= 0 {
		return
	}
	b := &rateBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(), t: f.timeouts}
	if err := b.rc.SetReadDeadline(b.deadline()); err != nil {
		return // not a connection that takes deadlines: nothing to limit
	}
	r.Body = b
}

// rateBody is a request body read under a deadline that moves with the
// bytes received.
type rateBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	t     frontTimeouts
	n     int64 // bytes read
}

func (b *rateBody) deadline() time.Time {
	earned := min(b.n/b.t.BodyMinRate, 1<<32) // whole seconds, capped far from overflow
	return b.start.Add(b.t.BodyGrace + time.Duration(earned)*time.Second)
}

func (b *rateBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.n += int64(n)
		_ = b.rc.SetReadDeadline(b.deadline())
	}
	if errors.Is(err, io.EOF) {
		// The whole body is in. net/http now reads the connection in the
		// background to notice a client that goes away, and a deadline
		// that passed then would cancel the request's context while the
		// handler still works; without a ReadTimeout it has none.
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// shutdown stops accepting, waits (bounded by ctx) for requests in flight,
// then closes every connection left, hijacked ones (WebSockets) included.
func (f *front) shutdown(ctx context.Context) error {
	return f.shutdownWith(ctx, nil)
}

// shutdownWith is shutdown that runs drain, if set, after the server has
// stopped accepting and before it closes the connections left: the /pubsub
// handler's Close, which ends each session with its close frame (1001), so
// that a dApp learns the node is going away rather than seeing its
// connection drop (1006). drain's error is reported with the server's.
func (f *front) shutdownWith(ctx context.Context, drain func() error) error {
	var err error
	if f.srv == nil {
		err = f.ln.Close()
		close(f.done)
	} else if err = f.srv.Shutdown(ctx); err != nil {
		err = fmt.Errorf("api server: %w", err)
		_ = f.srv.Close()
	}
	if drain != nil {
		err = errors.Join(err, drain())
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
