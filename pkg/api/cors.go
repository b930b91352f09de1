// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"net"
	"net/http"
	"strings"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
)

// What a page on another origin may send and read on /pubsub: the
// headers the routes read (each is also a query parameter, since a
// browser's WebSocket sends none) and the body's type; Retry-After, which a
// refusal that may pass carries.
const (
	corsAllowMethods  = "GET, POST, OPTIONS"
	corsAllowHeaders  = "Content-Type, Swarm-Postage-Batch-Id, Swarm-Keep-Alive, Swarm-Soc-Fields"
	corsExposeHeaders = "Retry-After"
	corsMaxAge        = "3600"
)

// guard checks the Host and the Origin of every /pubsub request before
// its route sees it, and speaks CORS:
//
//   - a Host the node does not answer to is 403 (DNS rebinding: a page on
//     a name that resolves to the node shares the node's origin, so the
//     Origin rule alone would let it in);
//   - an Origin that is not allowed is 403, without CORS headers, so that a
//     page on it cannot read the answer;
//   - an allowed Origin gets Access-Control-Allow-Origin on every answer,
//     refusals included, so that a page reads why; a preflight (OPTIONS) is
//     answered 204.
func (s *Server) guard(w http.ResponseWriter, r *http.Request) bool {
	if !s.checkHost(r.Host) {
		jsonhttp.Forbidden(w, "host not allowed: this node answers to loopback names, IP addresses and bps-api-allowed-hosts")
		return false
	}
	origin := r.Header.Get("Origin")
	if origin != "" {
		if !s.checkOrigin(r) {
			jsonhttp.Forbidden(w, "origin not allowed: add it to the node's cors-allowed-origins")
			return false
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	}
	if r.Method == http.MethodOptions {
		h := w.Header()
		if origin != "" {
			h.Set("Access-Control-Allow-Methods", corsAllowMethods)
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
		}
		h.Set("Allow", corsAllowMethods)
		w.WriteHeader(http.StatusNoContent)
		return false
	}
	return true
}

// checkHost reports whether the node answers to host, a request's Host
// (with or without a port): an IP address (a rebinding page is on a name,
// never on an address), localhost and the names below it (RFC 6761), and
// the names of Options.AllowedHosts ("*": any; ".example.org": the names
// below example.org). A request without a Host (HTTP/1.0) is answered.
func (s *Server) checkHost(host string) bool {
	if host == "" {
		return true
	}
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.TrimSuffix(strings.ToLower(strings.Trim(name, "[]")), ".")
	if net.ParseIP(name) != nil || name == "localhost" || strings.HasSuffix(name, ".localhost") {
		return true
	}
	for _, a := range s.opts.AllowedHosts {
		a = strings.TrimSuffix(strings.ToLower(a), ".")
		switch {
		case a == "*", a == name:
			return true
		case strings.HasPrefix(a, ".") && strings.HasSuffix(name, a):
			return true
		}
	}
	return false
}

// checkOrigin allows requests without an Origin, from the node's own origin
// (safe since checkHost: the Host is a name the node answers to), and from
// the configured origins, as bee's API does: "*" is any origin, and an
// origin whose port is "*" (http://localhost:*) is that scheme and host on
// any port.
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if strings.EqualFold(origin, scheme+"://"+r.Host) {
		return true
	}
	for _, o := range s.opts.CORSAllowedOrigins {
		if originMatches(o, origin) {
			return true
		}
	}
	return false
}

// originMatches reports whether origin is allowed by pattern: "*", the
// origin itself (case-insensitive), or scheme://host:* for any port of
// that scheme and host.
func originMatches(pattern, origin string) bool {
	if pattern == "*" || strings.EqualFold(pattern, origin) {
		return true
	}
	prefix, ok := strings.CutSuffix(pattern, ":*")
	if ok && strings.EqualFold(origin, prefix) { // the scheme's default port
		return true
	}
	if !ok || len(origin) <= len(prefix)+1 || !strings.EqualFold(origin[:len(prefix)], prefix) || origin[len(prefix)] != ':' {
		return false
	}
	port := origin[len(prefix)+1:]
	for _, c := range port {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(port) <= 5
}
