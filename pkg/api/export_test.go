// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"net/http"
	"strings"
)

// Route is a served route, for the OpenAPI test.
type Route struct{ Method, Path string }

// Routes is the route table.
func Routes() []Route {
	out := make([]Route, len(routes))
	for i, r := range routes {
		out[i] = Route{Method: r.method, Path: r.path}
	}
	return out
}

// SessionParams are the query parameters and headers GET /pubsub/{topic}
// reads, by their map tags: every header is a query parameter too.
func SessionParams() (query, headers []string) {
	return mapNames(sessionQuery{}, sessionHeaders{}), mapNames(sessionHeaders{})
}

// ServiceParams are the query parameters POST /pubsub/{topic}/service reads.
func ServiceParams() []string { return mapNames(serviceQuery{}) }

// ParseSOCFields exposes the swarm-soc-fields parser.
func ParseSOCFields(s string, feed bool) ([]string, error) {
	fs, err := parseSOCFields(s, feed)
	if err != nil {
		return nil, err
	}
	return strings.Split(fieldNames(fs), ","), nil
}

// ClientOf is the client identity the Server with options o gives a
// request from remote carrying h.
func ClientOf(o Options, remote string, h http.Header) string {
	s := &Server{opts: o}
	return s.clientOf(&http.Request{RemoteAddr: remote, Header: h})
}
