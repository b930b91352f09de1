// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package api is the WebSocket bridge between dApps and BPS (SWIP-60 "API"):
// an http.Handler for /pubsub and the paths below it, mounted by the node on
// its one API port next to bee's own API.
//
//   - GET /pubsub/{topic} upgrades to a WebSocket session on a cohort: a
//     subscriber session receives the cohort's messages, a publishing session
//     sends SOCs signed by the dApp. The node holds no publisher keys: where
//     the broker asks for a claim, the session hands the dApp the challenge
//     and relays the signature it gets back (docs/api.md, "The claim").
//   - POST /pubsub/{topic}/service relays a service SOC the admin's dApp
//     signed (a roster, the end of the stream) on the admin's publisher
//     stream of a session on this node.
//   - GET /pubsub/ (and /pubsub) lists the node's topics: the cohorts it
//     brokers and the streams its sessions share.
//
// The sessions share the node's p2p streams through session.Mux: every
// session watching a cohort at a broker shares one subscriber stream, every
// session publishing as one address one publisher stream, and the cohort's
// room hands each message once to each session (a session.Session) and
// keeps the service feed as the node verified it. Each session has one
// bounded queue and one writer goroutine; a session whose queue is full is
// closed, never waited for, so a slow dApp stalls neither a stream nor the
// other sessions.
//
// Files: bps.go holds the handlers, bps_dto.go the bodies they answer;
// session.go a session's lifetime and its publisher state; frames.go the
// frames both ways; request.go and params.go the request's parameters;
// clients.go a client's share; status.go the statuses and close codes of
// failures.
//
// The original GSOC pubsub client (bee-js) keeps working unchanged: a
// session without a binding is the implicit ANCHOR cohort of the SOC address
// in the path, with its binary frames and no text frames at all.
//
// Ownership: the Server's mutex guards the session set and the clients'
// shares; the mux guards what the sessions share. Every goroutine the
// Server starts is counted in its WaitGroup and waited for by Close, which
// then closes the mux.
package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/log"
	m "github.com/ethersphere/bee/v2/pkg/metrics"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/internal/owned"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/go-playground/validator/v10"
	"github.com/gorilla/mux"
	"github.com/gorilla/websocket"
	"github.com/prometheus/client_golang/prometheus"
)

// loggerName is the tree path name of the logger for this package.
const loggerName = "bps_api"

// Options configure a Server. Zero values take the defaults below.
type Options struct {
	// MaxSessions bounds the WebSocket sessions of the node, including those
	// being set up; past it an upgrade is answered 503. Default 1024.
	MaxSessions int
	// MaxSessionsPerClient bounds the sessions of one client (see
	// ClientHeader for what a client is), including those being set up;
	// past it an upgrade is answered 429. Default
	// DefaultMaxSessionsPerClient.
	MaxSessionsPerClient int
	// MaxCohortsPerClient bounds the cohorts at one broker in which one
	// client holds sessions: a session on one more is answered 429. A
	// broker bounds the cohorts of each node it serves (bps
	// MaxCohortsPerPeer, 16 by default), so this is a client's share of
	// the node's cohorts there. Default DefaultMaxCohortsPerClient.
	MaxCohortsPerClient int
	// MaxKeepAlive bounds the swarm-keep-alive header: a larger value is
	// answered 400. Default DefaultMaxKeepAlive.
	MaxKeepAlive time.Duration
	// ClientHeader, if set, names a header — such as X-Forwarded-For or
	// X-Real-IP — that a reverse proxy on the node's own host sets to the
	// address of the client it forwards: for a request from a loopback
	// address, the last address the header lists is the client. Otherwise
	// (and always for a request from another host) the client is the
	// remote IP address of the connection, an IPv6 address by its /64.
	ClientHeader string
	// ReadLimit is the largest message a dApp may send, in bytes; a larger
	// one closes the session with 1009. Default DefaultReadLimit.
	ReadLimit int64
	// PingPeriod is the keep-alive of a session that does not send the
	// swarm-keep-alive header. Default 60 s.
	PingPeriod time.Duration
	// WriteTimeout bounds one frame written to a dApp. Default 10 s.
	WriteTimeout time.Duration
	// JoinTimeout bounds reaching the broker and joining it before a
	// session is upgraded. Default bps.DefaultHandshakeTimeout (30 s).
	JoinTimeout time.Duration
	// SessionQueue is the outbound queue of one session, in frames; a full
	// queue closes the session with 1008. Default 64.
	SessionQueue int
	// SilentWait bounds how long a publishing session's stream may stay
	// unclaimed where the broker holds it to a claim deadline (SWIP-74 Rev
	// 8): a pending stream (the admin's, or a rostered address's) whose
	// dApp sent no AUTH, or a closed cohort's silent stream that no roster
	// names. The node closes it then (1008). It must be shorter than the
	// broker's claim deadline (30 s), at which the broker disconnects the
	// stream as a violation and blocklists the whole node. Default
	// DefaultSilentWait.
	SilentWait time.Duration
	// CORSAllowedOrigins are the origins besides the node's own that may
	// use /pubsub from a page, as bee's cors-allowed-origins option ("*":
	// any; "http://localhost:*": that scheme and host on any port). Their
	// requests are answered with CORS headers, preflights included; a
	// request from another origin is 403. Requests without an Origin
	// header are always allowed.
	CORSAllowedOrigins []string
	// AllowedHosts are the names besides loopback ones and IP addresses
	// that the node answers to in a request's Host header ("*": any;
	// ".example.org": the names below example.org); a request to another
	// name is 403, which defeats DNS rebinding.
	AllowedHosts []string
	// Storage is the node's Swarm storage (SWIP-65): a publishing session
	// that names swarm-postage-batch-id uploads every update it publishes
	// through it, and subscribing sessions recover missed feed updates
	// from it. Nil: the Connector given to New, if it is also a
	// bps.Storage (pkg/node's is: bee's own upload and retrieval), else
	// none — live only, and a session naming a batch is refused.
	Storage bps.Storage
	// PersistTimeout bounds the upload of one published update. Default
	// DefaultPersistTimeout.
	PersistTimeout time.Duration
	// RecoverMax and RecoverTimeout bound one gap's recovery (session.MuxOptions;
	// defaults session.DefaultRecoverMax, session.DefaultRecoverTimeout).
	RecoverMax     int
	RecoverTimeout time.Duration
}

// Default values of Options.
const (
	DefaultMaxSessions          = 1024
	DefaultMaxSessionsPerClient = 128
	DefaultMaxCohortsPerClient  = 8
	DefaultMaxKeepAlive         = 5 * time.Minute
	DefaultPingPeriod           = 60 * time.Second
	DefaultWriteTimeout         = 10 * time.Second
	DefaultSessionQueue         = 64
	DefaultSilentWait           = session.DefaultSilentWait
	DefaultPersistTimeout       = 30 * time.Second
	// DefaultReadLimit fits the largest frame a dApp sends — index (8),
	// signature (65), span (8) and a 4096-byte payload — with room to spare
	// for a 32-byte id prefix and the text frames.
	DefaultReadLimit = 4096 + 256
)

// closeGrace bounds the closing handshake of a session: after its close
// frame is sent the dApp has this long to answer before the connection is
// dropped.
const closeGrace = 2 * time.Second

// closeTimeout bounds how long Close waits for the sessions and streams.
const closeTimeout = 10 * time.Second

func (o *Options) setDefaults() {
	if o.MaxSessions == 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.MaxSessionsPerClient == 0 {
		o.MaxSessionsPerClient = DefaultMaxSessionsPerClient
	}
	if o.MaxCohortsPerClient == 0 {
		o.MaxCohortsPerClient = DefaultMaxCohortsPerClient
	}
	if o.MaxKeepAlive == 0 {
		o.MaxKeepAlive = DefaultMaxKeepAlive
	}
	if o.ReadLimit == 0 {
		o.ReadLimit = DefaultReadLimit
	}
	if o.PingPeriod == 0 {
		o.PingPeriod = DefaultPingPeriod
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.JoinTimeout == 0 {
		o.JoinTimeout = bps.DefaultHandshakeTimeout
	}
	if o.SessionQueue == 0 {
		o.SessionQueue = DefaultSessionQueue
	}
	if o.SilentWait == 0 {
		o.SilentWait = DefaultSilentWait
	}
	if o.PersistTimeout == 0 {
		o.PersistTimeout = DefaultPersistTimeout
	}
}

func (o *Options) validate() error {
	for name, n := range map[string]int{
		"MaxSessions": o.MaxSessions, "MaxSessionsPerClient": o.MaxSessionsPerClient,
		"MaxCohortsPerClient": o.MaxCohortsPerClient, "SessionQueue": o.SessionQueue,
	} {
		if n < 0 {
			return fmt.Errorf("api: option %s must not be negative, got %d", name, n)
		}
	}
	if o.ReadLimit < 0 {
		return fmt.Errorf("api: ReadLimit must not be negative")
	}
	for name, d := range map[string]time.Duration{
		"PingPeriod": o.PingPeriod, "WriteTimeout": o.WriteTimeout,
		"JoinTimeout": o.JoinTimeout, "SilentWait": o.SilentWait,
		"MaxKeepAlive": o.MaxKeepAlive, "PersistTimeout": o.PersistTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("api: option %s must not be negative, got %s", name, d)
		}
	}
	return nil
}

// ErrServerClosed is returned for requests that arrive after Close.
var ErrServerClosed = errors.New("api: server closed")

// Protocol is what the API uses of the node's BPS service: the joins its
// sessions share (session.Protocol) and what GET /pubsub/ shows of the node.
// session.Node is the node's own; pkg/session/mock is one without a network.
type Protocol interface {
	session.Protocol
	Overlay() swarm.Address
	Tree() []bps.Position
	Cohorts() []bps.CohortInfo
	CohortPeers(sp *bps.Spec) []swarm.Address
	Audience() bps.Audience
	Prices() bps.Prices
	Charges() []bps.PeerCharges
}

// Server serves the /pubsub API of one node.
type Server struct {
	svc      Protocol
	peers    *peerResolver
	logger   log.Logger
	opts     Options
	metrics  metrics
	router   *mux.Router
	validate *validator.Validate
	upgrader websocket.Upgrader

	mux    session.Mux     // the streams the sessions share
	ctx    context.Context // ended by Close: bounds every join
	cancel context.CancelFunc
	wg     sync.WaitGroup // sessions and their handlers

	mu       sync.Mutex // guards everything below
	closed   bool
	sessions map[*wsSession]struct{} // upgraded sessions
	pending  int                     // sessions being set up
	clients  map[string]*clientShare
}

// New builds the /pubsub handler for the node running svc. conn reaches
// brokers given as multiaddrs (bee's p2p service satisfies Connector); with a
// nil conn only broker overlays are accepted as peer.
func New(svc *bps.Service, conn Connector, logger log.Logger, o Options) (*Server, error) {
	return NewWith(session.Node{Service: svc}, conn, logger, o)
}

// NewWith is New over any Protocol: pkg/session/mock's, say.
func NewWith(svc Protocol, conn Connector, logger log.Logger, o Options) (*Server, error) {
	o.setDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	if st, ok := conn.(bps.Storage); ok && o.Storage == nil {
		o.Storage = st
	}
	if logger == nil {
		logger = log.Noop
	}
	logger = logger.WithName(loggerName).Register()
	s := &Server{
		svc:      svc,
		peers:    newPeerResolver(conn),
		logger:   logger,
		opts:     o,
		metrics:  newMetrics(),
		validate: newValidator(),
		sessions: make(map[*wsSession]struct{}),
		clients:  make(map[string]*clientShare),
		mux: session.NewMux(svc, session.MuxOptions{JoinTimeout: o.JoinTimeout, SilentWait: o.SilentWait,
			Storage: o.Storage, RecoverMax: o.RecoverMax, RecoverTimeout: o.RecoverTimeout, Logger: logger}),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.upgrader = websocket.Upgrader{
		ReadBufferSize:  4096,
		WriteBufferSize: 4096,
		CheckOrigin:     s.checkOrigin,
	}
	s.router = s.newRouter()
	return s, nil
}

// route is one entry of the route table: the router is built from it, and
// the OpenAPI test enumerates it.
type route struct {
	method  string
	path    string
	handler func(*Server, http.ResponseWriter, *http.Request)
}

// routes is every route the handler serves.
var routes = []route{
	{http.MethodGet, "/pubsub", (*Server).topicsHandler},
	{http.MethodGet, "/pubsub/", (*Server).topicsHandler},
	{http.MethodGet, "/pubsub/{topic}", (*Server).pubsubWsHandler},
	{http.MethodPost, "/pubsub/{topic}/service", (*Server).serviceHandler},
}

func (s *Server) newRouter() *mux.Router {
	r := mux.NewRouter()
	r.NotFoundHandler = http.HandlerFunc(jsonhttp.NotFoundHandler)
	byPath := make(map[string]jsonhttp.MethodHandler)
	var order []string
	for _, rt := range routes {
		if byPath[rt.path] == nil {
			byPath[rt.path] = jsonhttp.MethodHandler{}
			order = append(order, rt.path)
		}
		h := rt.handler
		byPath[rt.path][rt.method] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h(s, w, r) })
	}
	for _, p := range order {
		r.Handle(p, byPath[p])
	}
	return r
}

// ServeHTTP serves /pubsub and the paths below it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.guard(w, r) {
		return
	}
	s.router.ServeHTTP(w, r)
}

// Metrics returns the Server's Prometheus collectors, its mux's included.
func (s *Server) Metrics() []prometheus.Collector {
	return append(m.PrometheusCollectorsFromFields(s.metrics), s.mux.Metrics()...)
}

// Close closes every session with 1001 (going away) and a reason, ends the
// shared streams, and waits for every goroutine the Server started, at most
// closeTimeout. Requests arriving later are answered 503.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	all := make([]*wsSession, 0, len(s.sessions))
	for ss := range s.sessions {
		all = append(all, ss)
	}
	s.mu.Unlock()

	s.cancel()
	for _, ss := range all {
		ss.close(websocket.CloseGoingAway, "node shutting down", nil)
	}

	if !owned.Wait(&s.wg, closeTimeout) {
		return errors.Join(errors.New("api: close timed out waiting for sessions"), s.mux.Close())
	}
	return s.mux.Close()
}

// reserve counts a session of client being set up against MaxSessions and
// MaxSessionsPerClient and registers its goroutine with the Server; it
// fails once the Server is closed or either bound is reached.
func (s *Server) reserve(client string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if n := len(s.sessions) + s.pending; n >= s.opts.MaxSessions {
		return &limitError{status: http.StatusServiceUnavailable,
			msg: fmt.Sprintf("node session limit: %d sessions open on this node, at most %d", n, s.opts.MaxSessions)}
	}
	c := s.clients[client]
	if c == nil {
		c = &clientShare{cohorts: make(map[string]int), brokers: make(map[string]int)}
		s.clients[client] = c
	}
	if c.sessions >= s.opts.MaxSessionsPerClient {
		return &limitError{status: http.StatusTooManyRequests,
			msg: fmt.Sprintf("client session limit: %d sessions open from %s, at most %d per client", c.sessions, client, s.opts.MaxSessionsPerClient)}
	}
	c.sessions++
	s.pending++
	s.wg.Add(1)
	return nil
}

// unreserve undoes reserve for a session that was never upgraded.
func (s *Server) unreserve(client string) {
	s.mu.Lock()
	s.pending--
	s.dropClientLocked(client)
	s.mu.Unlock()
	s.wg.Done()
}

// register turns a reservation into a live session; it reports false if the
// Server closed meanwhile (Close did not see the session, so the caller
// closes it).
func (s *Server) register(ss *wsSession) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending--
	s.sessions[ss] = struct{}{}
	s.metrics.Sessions.Inc()
	s.metrics.SessionsOpen.WithLabelValues(sessionRole(ss.plan)).Inc()
	return !s.closed
}

// unregister removes an ended session and releases its reservation.
func (s *Server) unregister(ss *wsSession) {
	s.mu.Lock()
	delete(s.sessions, ss)
	s.dropClientLocked(ss.client)
	s.metrics.Sessions.Dec()
	s.metrics.SessionsOpen.WithLabelValues(sessionRole(ss.plan)).Dec()
	// The session has ended (run waits for its reader and writer): its
	// code is set.
	s.metrics.SessionsClosed.WithLabelValues(closeCodeLabel(ss.code)).Inc()
	s.mu.Unlock()
	s.wg.Done()
}
