// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/gorilla/mux"
)

// sessionQuery is the query of GET /pubsub/{topic}. The spec parameters
// (binding, admin, publishers, closed, history) are SWIP-60's; the spec they
// make is validated by bps.NewSpec, which decides what this node serves. The
// bridge itself speaks two bindings: feed (an admin) and anchor (implicit);
// the others need their frame layouts first.
type sessionQuery struct {
	Peer       string   `map:"peer" validate:"required"`
	Binding    *string  `map:"binding,lower" validate:"omitempty,oneof=feed anchor"`
	Admin      hexBytes `map:"admin" validate:"omitempty,len=20"`
	Publishers *string  `map:"publishers,lower" validate:"omitempty,oneof=all"`
	Closed     *bool    `map:"closed"`
	History    *bool    `map:"history"`
	Addr       hexBytes `map:"addr" validate:"omitempty,len=20"`
	ID         hexBytes `map:"id" validate:"omitempty,len=32"`
	Index      *uint64  `map:"index"`
	// The GSOC client's publishing parameters (bee-js): the SOC owner and id.
	GSOCOwner hexBytes `map:"gsoc-eth-address" validate:"omitempty,len=20"`
	GSOCID    hexBytes `map:"gsoc-topic" validate:"omitempty,len=32"`
}

// sessionHeaders are the headers of GET /pubsub/{topic}.
type sessionHeaders struct {
	KeepAlive *uint64 `map:"swarm-keep-alive" validate:"omitempty,min=1"`
	SOCFields *string `map:"swarm-soc-fields"`
}

// mode is what kind of session a request opens.
type mode int

const (
	// modeGSOC is the original GSOC client (bee-js): no binding given; the
	// implicit ANCHOR cohort of the SOC address in the path; no text frames.
	modeGSOC mode = iota
	// modeAnchor is binding=anchor: the implicit ANCHOR cohort, with the
	// session protocol's text frames.
	modeAnchor
	// modeFeed is binding=feed: SWIP-74's live feed of the admin.
	modeFeed
)

// plan is a validated session request.
type plan struct {
	mode      mode
	topic     []byte
	spec      *bps.Spec
	peer      peerRef
	publish   bool
	addr      []byte // the address the session publishes as
	id        []byte // ANCHOR: the SOC id the dApp signs under
	index     uint64 // FEED_TOPIC: the publisher's cursor, signed into its claim
	fields    []socField
	keepAlive time.Duration
}

// control reports whether the session speaks the text frames of the session
// protocol; the GSOC client gets binary frames only.
func (p *plan) control() bool { return p.mode != modeGSOC }

// subscribes reports whether the session receives the cohort's messages:
// every session but a feed publisher's (SWIP-74: the admin is the only
// publisher, so it would receive nothing but its own updates).
func (p *plan) subscribes() bool { return !(p.publish && p.mode == modeFeed) }

// claims reports whether publishing takes a claim (explicit authorship).
func (p *plan) claims() bool {
	return p.publish && !p.spec.Implicit() && p.spec.Publishers != pb.PublisherRegime_ALL
}

// parseTopic reads {topic}: 64 hex characters (0x optional) are the 32-byte
// topic itself, anything else is a mnemonic hashed with keccak256.
func parseTopic(s string) []byte {
	h := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if len(h) == 2*bps.TopicSize {
		if b, err := decodeHex(h); err == nil {
			return b
		}
	}
	sum, _ := crypto.LegacyKeccak256([]byte(s)) // cannot fail
	return sum
}

// parseSession validates a session request; on failure it returns the
// message and a reason per parameter for a 400.
func (s *Server) parseSession(r *http.Request) (*plan, string, []jsonhttp.Reason) {
	p := &plan{topic: parseTopic(mux.Vars(r)["topic"]), keepAlive: s.opts.PingPeriod}

	var q sessionQuery
	if reasons := s.mapParams(queryGetter(r), &q); len(reasons) > 0 {
		return nil, "invalid query params", reasons
	}
	var h sessionHeaders
	if reasons := s.mapParams(headerGetter(r), &h); len(reasons) > 0 {
		return nil, "invalid header params", reasons
	}

	var reasons reasonList
	bad := reasons.add

	ref, err := parsePeer(q.Peer)
	switch {
	case err != nil:
		bad("peer", "%v", err)
	case ref.addr != nil && !s.peers.canDial():
		bad("peer", "this node dials no multiaddrs: give the broker's overlay")
	}
	p.peer = ref

	if q.Binding == nil {
		p.mode = modeGSOC
		parseGSOC(p, &q, &reasons)
	} else {
		parseBinding(p, &q, &reasons)
	}
	if len(reasons) > 0 {
		return nil, "invalid query params", reasons
	}

	reasons = nil
	if h.KeepAlive != nil {
		if *h.KeepAlive > uint64(24*time.Hour/time.Second) {
			bad("swarm-keep-alive", "want at most 86400 seconds")
		}
		p.keepAlive = time.Duration(*h.KeepAlive) * time.Second
	}
	p.fields = defaultFields(p.mode)
	if h.SOCFields != nil {
		fields, err := parseSOCFields(*h.SOCFields, p.mode == modeFeed)
		if err != nil {
			bad("swarm-soc-fields", "%v", err)
		}
		p.fields = fields
	}
	if len(reasons) > 0 {
		return nil, "invalid header params", reasons
	}
	return p, "", nil
}

// reasonList collects the reasons a request is refused, one per parameter.
type reasonList []jsonhttp.Reason

func (l *reasonList) add(field, format string, a ...any) {
	*l = append(*l, jsonhttp.Reason{Field: field, Error: fmt.Sprintf(format, a...)})
}

// given pairs a parameter name with whether the request carries it.
type given struct {
	name string
	ok   bool
}

// parseGSOC reads the query of the GSOC client: no spec parameter at all;
// gsoc-eth-address and gsoc-topic together make the session publish.
func parseGSOC(p *plan, q *sessionQuery, reasons *reasonList) {
	bad := reasons.add
	for _, g := range []given{
		{"admin", q.Admin != nil}, {"publishers", q.Publishers != nil}, {"closed", q.Closed != nil},
		{"history", q.History != nil}, {"addr", q.Addr != nil}, {"id", q.ID != nil}, {"index", q.Index != nil},
	} {
		if g.ok {
			bad(g.name, "only with binding (feed or anchor)")
		}
	}
	switch {
	case q.GSOCOwner != nil && q.GSOCID == nil:
		bad("gsoc-topic", "required with gsoc-eth-address")
	case q.GSOCOwner == nil && q.GSOCID != nil:
		bad("gsoc-eth-address", "required with gsoc-topic")
	case q.GSOCOwner != nil:
		if addr, err := soc.CreateAddress(soc.ID(q.GSOCID), q.GSOCOwner); err != nil || !bytes.Equal(addr.Bytes(), p.topic) {
			bad("gsoc-topic", "keccak256(gsoc-topic ‖ gsoc-eth-address) is not the topic")
		}
		p.publish, p.addr, p.id = true, q.GSOCOwner, q.GSOCID
	}
	sp, err := bps.NewAnchorSpec(p.topic)
	if err != nil {
		bad("binding", "not served by this node: %v", err)
	}
	p.spec = sp
}

// parseBinding reads a SWIP-60 query: the spec, and addr (with id under
// ANCHOR, index under FEED_TOPIC) for a publishing session.
func parseBinding(p *plan, q *sessionQuery, reasons *reasonList) {
	bad := reasons.add
	if q.GSOCOwner != nil || q.GSOCID != nil {
		bad("gsoc-eth-address", "only without binding (the GSOC client); give addr and id")
	}
	c := &pb.CohortSpec{Topic: p.topic, Admin: q.Admin}
	switch *q.Binding {
	case "feed":
		p.mode = modeFeed
		c.Binding = pb.TopicBinding_FEED_TOPIC
		if q.Admin == nil {
			bad("admin", "required with binding=feed")
		}
		if q.ID != nil {
			bad("id", "only with binding=anchor: a feed update's id is keccak256(topic ‖ index)")
		}
		if q.Addr != nil && q.Admin != nil && !bytes.Equal(q.Addr, q.Admin) {
			// The broker punishes a claim by anyone else as a violation.
			bad("addr", "under binding=feed only the admin publishes (SWIP-74)")
		}
	default: // anchor
		p.mode = modeAnchor
		c.Binding = pb.TopicBinding_ANCHOR
		if q.Admin != nil {
			bad("admin", "binding=anchor with an admin is not served yet: omit admin for the implicit ANCHOR cohort")
		}
		if q.Index != nil {
			bad("index", "only with binding=feed")
		}
		switch {
		case q.Addr != nil && q.ID == nil:
			bad("id", "required with addr under binding=anchor")
		case q.Addr == nil && q.ID != nil:
			bad("addr", "required with id")
		case q.Addr != nil:
			if addr, err := soc.CreateAddress(soc.ID(q.ID), q.Addr); err != nil || !bytes.Equal(addr.Bytes(), p.topic) {
				bad("id", "keccak256(id ‖ addr) is not the topic")
			}
		}
	}
	if q.Index != nil && q.Addr == nil {
		bad("index", "only with addr")
	}
	if q.Publishers != nil {
		c.Publishers = pb.PublisherRegime_ALL
	}
	if q.Closed != nil {
		c.Closed = *q.Closed
	}
	if q.History != nil {
		c.History = *q.History
	}
	if len(*reasons) > 0 {
		return
	}
	// NewSpec is the authority on what this node serves; the parameter
	// named is the SWIP-60 one that makes the spec unserved, if any.
	sp, err := bps.NewSpec(c)
	if err != nil {
		field := "binding"
		for _, g := range []given{{"publishers", q.Publishers != nil}, {"closed", c.Closed}, {"history", c.History}} {
			if g.ok {
				field = g.name
				break
			}
		}
		bad(field, "not served by this node: %v", err)
		return
	}
	p.spec = sp
	if q.Addr != nil {
		p.publish, p.addr, p.id = true, q.Addr, q.ID
	}
	if q.Index != nil {
		p.index = *q.Index
	}
}
