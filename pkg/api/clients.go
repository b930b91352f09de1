// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
)

// clientShare is what one client holds of the node: its sessions (set up
// or being set up) and, per broker, the cohorts those sessions are in.
// Guarded by Server.mu.
type clientShare struct {
	sessions int
	cohorts  map[string]int // cohortKey → the client's sessions in it
	brokers  map[string]int // broker overlay → cohorts in cohorts at it
}

// limitError is a request refused by a bound; msg says which.
type limitError struct {
	status int // 429 for a client's share, 503 for the node's
	msg    string
}

func (e *limitError) Error() string { return e.msg }

// clientOf identifies the client of r: the remote IP address of the
// connection (an IPv6 address by its /64, which one host commonly holds
// whole) or, behind a reverse proxy on this host, the address the proxy
// names in ClientHeader.
func (s *Server) clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if s.opts.ClientHeader != "" && ip != nil && ip.IsLoopback() {
		if vs := r.Header.Values(s.opts.ClientHeader); len(vs) > 0 {
			parts := strings.Split(vs[len(vs)-1], ",")
			if c := strings.TrimSpace(parts[len(parts)-1]); c != "" {
				host, ip = c, net.ParseIP(c)
			}
		}
	}
	if ip != nil && ip.To4() == nil && !ip.IsLoopback() {
		return (&net.IPNet{IP: ip.Mask(net.CIDRMask(64, 128)), Mask: net.CIDRMask(64, 128)}).String()
	}
	return host
}

// enterCohort counts a session of client in the cohort key at broker
// against MaxCohortsPerClient; the caller undoes it with leaveCohort.
func (s *Server) enterCohort(client string, broker swarm.Address, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[client] // reserved: present
	b := broker.ByteString()
	if c.cohorts[key] == 0 {
		if c.brokers[b] >= s.opts.MaxCohortsPerClient {
			return &limitError{status: http.StatusTooManyRequests,
				msg: fmt.Sprintf("client cohort limit: %s has sessions in %d cohorts at broker %s, at most %d per client", client, c.brokers[b], broker, s.opts.MaxCohortsPerClient)}
		}
		c.brokers[b]++
	}
	c.cohorts[key]++
	return nil
}

// leaveCohort undoes enterCohort.
func (s *Server) leaveCohort(client string, broker swarm.Address, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.clients[client]
	if c.cohorts[key]--; c.cohorts[key] > 0 {
		return
	}
	delete(c.cohorts, key)
	b := broker.ByteString()
	if c.brokers[b]--; c.brokers[b] == 0 {
		delete(c.brokers, b)
	}
}

// dropClientLocked releases one session of client; the caller holds s.mu.
func (s *Server) dropClientLocked(client string) {
	c := s.clients[client]
	if c.sessions--; c.sessions == 0 {
		delete(s.clients, client)
	}
}

// cohortKey names a cohort at a broker in a client's share.
func cohortKey(broker swarm.Address, sp *bps.Spec) string {
	return broker.ByteString() + string(sp.Canonical())
}
