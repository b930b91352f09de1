// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/gorilla/mux"
)

// bindingNames maps the binding query parameter (lower-cased) to SWIP-60's
// TopicBinding.
var bindingNames = map[string]pb.TopicBinding{
	"anchor":   pb.TopicBinding_ANCHOR,
	"soc_id":   pb.TopicBinding_SOC_ID,
	"socid":    pb.TopicBinding_SOC_ID,
	"owner":    pb.TopicBinding_OWNER,
	"feed":     pb.TopicBinding_FEED_TOPIC,
	"mnemonic": pb.TopicBinding_MNEMONIC,
}

// sessionQuery is the query of GET /pubsub/{topic}. The spec parameters
// (binding, admin, publishers, closed, history) are SWIP-60's; the spec they
// make is validated by bps.NewSpec, which decides what this node serves.
type sessionQuery struct {
	Peer       string   `map:"peer" validate:"required"`
	Binding    *string  `map:"binding,lower" validate:"omitempty,oneof=anchor soc_id socid owner feed mnemonic"`
	Admin      hexBytes `map:"admin" validate:"omitempty,len=20"`
	Publishers *string  `map:"publishers,lower" validate:"omitempty,oneof=all"`
	Closed     *bool    `map:"closed"`
	History    *bool    `map:"history"`
	Addr       hexBytes `map:"addr" validate:"omitempty,len=20"`
	ID         hexBytes `map:"id" validate:"omitempty,len=32"`
	Index      *uint64  `map:"index"`
	// Pot turns SWIP-65's pot profile on (binding=feed).
	Pot *bool `map:"pot"`
	// The GSOC client's publishing parameters (bee-js): the SOC owner and id.
	GSOCOwner hexBytes `map:"gsoc-eth-address" validate:"omitempty,len=20"`
	GSOCID    hexBytes `map:"gsoc-topic" validate:"omitempty,len=32"`
}

// serviceQuery is the query of POST /pubsub/{topic}/service: the broker and
// the spec of the cohort whose service feed the SOC extends. A service feed
// needs an admin.
type serviceQuery struct {
	Peer       string   `map:"peer" validate:"required"`
	Binding    string   `map:"binding,lower" validate:"required,oneof=anchor soc_id socid owner feed mnemonic"`
	Admin      hexBytes `map:"admin" validate:"required,len=20"`
	Publishers *string  `map:"publishers,lower" validate:"omitempty,oneof=all"`
	Closed     *bool    `map:"closed"`
	History    *bool    `map:"history"`
}

// sessionHeaders are the headers of GET /pubsub/{topic}; each is also a
// query parameter of the same name, since a browser's WebSocket sends no
// headers (headerOrQuery).
type sessionHeaders struct {
	KeepAlive *uint64 `map:"swarm-keep-alive" validate:"omitempty,min=1"`
	SOCFields *string `map:"swarm-soc-fields"`
	// PostageBatch makes a publishing session persistent (SWIP-65).
	PostageBatch hexBytes `map:"swarm-postage-batch-id" validate:"omitempty,len=32"`
}

// layout is where the SOC id of a session's chunks comes from. Every
// session with a binding sends kind(1) ‖ index(8, BE) ‖ soc, the soc
// carrying its id (docs/api.md); the layout says what that id must be
// under implicit authorship, and the GSOC client's frame is signature(65)
// ‖ span(8, LE) ‖ payload under its session's id.
type layout int

const (
	// layoutSessionID: nothing; the id is the session's (gsoc-topic or id):
	// the GSOC client and the implicit ANCHOR cohort, whose SOC address is
	// the topic.
	layoutSessionID layout = iota
	// layoutTopicID: nothing; the id is the topic (SOC_ID).
	layoutTopicID
	// layoutIndex: FEED_TOPIC: implicit, keccak256(topic ‖ index); under
	// a session feed, the session feed's id.
	layoutIndex
	// layoutID: chosen by the dApp (implicit OWNER, MNEMONIC), or the
	// session feed's (explicit authorship, ALL).
	layoutID
)

// plan is a validated session request.
type plan struct {
	gsoc      bool // the GSOC client: no binding given, binary frames only
	layout    layout
	topic     []byte
	spec      *bps.Spec
	peer      peerRef
	publish   bool
	addr      []byte  // the address the session publishes as
	id        []byte  // layoutSessionID: the SOC id the dApp signs under
	indexHint *uint64 // a FEED_TOPIC publisher's index: its dApp's own cursor, echoed in ready
	fields    []socField
	keepAlive time.Duration
	batch     []byte  // swarm-postage-batch-id: every update published is uploaded, stamped with it
	from      *uint64 // a subscriber's index: each publisher feed resumes there (SWIP-65 recovery)
	pot       bool    // SWIP-65's pot profile: publications checked, gaps recovered by pot descent
}

// control reports whether the session speaks the text frames of the session
// protocol; the GSOC client gets binary frames only.
func (p *plan) control() bool { return !p.gsoc }

// claims reports whether publishing takes a claim (explicit authorship):
// the session's AUTH, signed by its dApp under the stream's challenge.
func (p *plan) claims() bool { return p.publish && p.spec.Explicit() }

// salted reports whether the session publishes under a session feed
// (SWIP-74 Rev 8): explicit authorship or ALL, every chunk signed under
// its stream's challenge.
func (p *plan) salted() bool { return p.publish && !p.spec.Implicit() }

// isAdmin reports whether the session publishes as the cohort's admin.
func (p *plan) isAdmin() bool { return p.publish && bytes.Equal(p.addr, p.spec.Admin) }

// echoes reports whether the session publishes in the implicit ANCHOR
// cohort, where every publisher shares the GSOC key: its publisher stream
// receives nothing (the broker never sends an identity its own messages),
// so it receives on the subscriber stream, less what it sent itself.
func (p *plan) echoes() bool { return p.publish && p.layout == layoutSessionID }

// spectates reports whether the session needs the node's subscriber stream:
// a session without addr, and a GSOC publisher (above). Other publishers
// receive on their own publisher stream (SWIP-60: publishers receive;
// SWIP-74 Rev 8: an address the roster does not name holds a spectator
// stream, which receives, in an open cohort), and a closed cohort has no
// audience.
func (p *plan) spectates() bool { return !p.publish || p.echoes() }

// streamOptions describe the publisher stream the session publishes on.
func (p *plan) streamOptions() session.StreamOptions {
	return session.StreamOptions{Addr: p.addr, Receive: !p.echoes()}
}

// memberOptions say which messages the session does not receive: its own.
func (p *plan) memberOptions(echo *session.EchoFilter) session.MemberOptions {
	if !p.publish {
		if p.from == nil && p.spec.History { // a late joiner: each feed from its first update
			zero := uint64(0)
			return session.MemberOptions{From: &zero}
		}
		return session.MemberOptions{From: p.from}
	}
	return session.MemberOptions{Owner: p.addr, Echo: echo}
}

// minHexLooking is the length from which a path of hex digits only looks
// like a topic address (or an overlay, or an Ethereum address: 40 hex
// characters) rather than a name: below it, hex digits are a name like
// any other (cafe, add, 2024).
const minHexLooking = 40

// ParseTopic reads {topic}: 0x followed by 64 hex characters, or 64 hex
// characters, is the 32-byte topic itself; any other string is a name,
// hashed with keccak256. What looks like a mistyped topic address is
// refused rather than taken for a name: 0x followed by anything but 64 hex
// characters, and hex digits only, at least minHexLooking of them, but not
// 64.
func ParseTopic(s string) ([]byte, error) {
	const want = 2 * bps.TopicSize
	h, prefixed := strings.CutPrefix(s, "0x")
	if !prefixed {
		h, prefixed = strings.CutPrefix(s, "0X")
	}
	switch {
	case prefixed && utf8.RuneCountInString(h) != want:
		return nil, fmt.Errorf("0x-prefixed: a topic address is %d hex characters, got %d", want, utf8.RuneCountInString(h))
	case prefixed && !isHexDigits(h):
		return nil, fmt.Errorf("0x-prefixed: a topic address is %d hex characters, got %#U", want, firstNonHex(h))
	case prefixed || isHexDigits(s) && len(s) == want:
		return hex.DecodeString(h)
	case isHexDigits(s) && len(s) >= minHexLooking:
		return nil, fmt.Errorf("looks like a hex address but is %d characters; a topic address is %d hex characters", len(s), want)
	}
	sum, _ := crypto.LegacyKeccak256([]byte(s)) // cannot fail
	return sum, nil
}

// isHexDigits reports whether s is non-empty and hex digits only.
func isHexDigits(s string) bool { return s != "" && firstNonHex(s) < 0 }

// firstNonHex is the first character of s that is not a hex digit, -1 if
// there is none.
func firstNonHex(s string) rune {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return c
		}
	}
	return -1
}

// parseSession validates a session request; on failure it returns the
// message and a reason per parameter for a 400.
func (s *Server) parseSession(r *http.Request) (*plan, string, []jsonhttp.Reason) {
	topic, err := ParseTopic(mux.Vars(r)["topic"])
	if err != nil {
		return nil, "invalid path params", []jsonhttp.Reason{{Field: "topic", Error: err.Error()}}
	}
	p := &plan{topic: topic, keepAlive: s.opts.PingPeriod}

	if reasons := checkQuery(r, sessionQuery{}, sessionHeaders{}); len(reasons) > 0 {
		return nil, "invalid query params", reasons
	}
	var q sessionQuery
	if reasons := s.mapParams(queryGetter(r), &q); len(reasons) > 0 {
		return nil, "invalid query params", reasons
	}
	var h sessionHeaders
	var conflicts []jsonhttp.Reason
	hreasons := s.mapParams(headerOrQuery(r, &conflicts), &h)
	if hreasons = append(conflicts, hreasons...); len(hreasons) > 0 {
		return nil, "invalid header params", hreasons
	}

	var reasons reasonList
	bad := reasons.add

	p.peer = s.parsePeerParam(q.Peer, &reasons)
	if q.Binding == nil {
		p.gsoc = true
		parseGSOC(p, &q, &reasons)
	} else {
		parseBinding(p, &q, &reasons)
	}
	if p.from != nil && s.opts.Storage == nil {
		bad("index", "this node has no storage: a subscriber cannot resume from an index")
	}
	if p.spec != nil && p.spec.History && !p.publish && s.opts.Storage == nil {
		bad("history", "this node has no storage: it cannot read a history cohort's history")
	}
	if len(reasons) > 0 {
		return nil, "invalid query params", reasons
	}

	reasons = nil
	if h.KeepAlive != nil {
		if limit := uint64(s.opts.MaxKeepAlive / time.Second); *h.KeepAlive > limit {
			bad("swarm-keep-alive", "want at most %d seconds: this node's bound on keep-alive", limit)
		}
		p.keepAlive = time.Duration(*h.KeepAlive) * time.Second
	}
	p.fields = defaultFields(p.gsoc)
	if h.SOCFields != nil {
		fields, err := parseSOCFields(*h.SOCFields, p.spec.Binding == pb.TopicBinding_FEED_TOPIC)
		if err != nil {
			bad("swarm-soc-fields", "%v", err)
		}
		p.fields = fields
	}
	if h.PostageBatch != nil {
		switch {
		case !p.publish:
			bad("swarm-postage-batch-id", "only a publishing session uploads: give addr (or gsoc-eth-address and gsoc-topic)")
		case s.opts.Storage == nil:
			bad("swarm-postage-batch-id", "this node has no storage: it publishes live only")
		}
		p.batch = h.PostageBatch
	}
	if p.publish && p.spec.History && p.batch == nil {
		bad("swarm-postage-batch-id", "required to publish in a history cohort: its history is read from storage")
	}
	if len(reasons) > 0 {
		return nil, "invalid header params", reasons
	}
	return p, "", nil
}

// parsePeerParam reads peer, the broker.
func (s *Server) parsePeerParam(peer string, reasons *reasonList) peerRef {
	ref, err := parsePeer(peer)
	switch {
	case err != nil:
		reasons.add("peer", "%v", err)
	case ref.addr != nil && !s.peers.canDial():
		reasons.add("peer", "this node dials no multiaddrs: give the broker's overlay")
	}
	return ref
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
		{"pot", q.Pot != nil},
	} {
		if g.ok {
			bad(g.name, "only with binding")
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
	p.spec, p.layout = sp, layoutSessionID
}

// specParams are the SWIP-60 spec parameters of a request.
type specParams struct {
	binding    string
	admin      []byte
	publishers *string
	closed     *bool
	history    *bool
}

// buildSpec assembles the cohort spec on topic and validates it with
// bps.NewSpec, the authority on what this node serves; a refusal names the
// SWIP-60 parameter that makes the spec unserved. It returns nil after
// reporting a reason.
func buildSpec(topic []byte, sp specParams, reasons *reasonList) *bps.Spec {
	c := &pb.CohortSpec{Topic: topic, Binding: bindingNames[sp.binding], Admin: sp.admin}
	if sp.publishers != nil {
		c.Publishers = pb.PublisherRegime_ALL
	}
	if sp.closed != nil {
		c.Closed = *sp.closed
	}
	if sp.history != nil {
		c.History = *sp.history
	}
	spec, err := bps.NewSpec(c)
	if err != nil {
		field := "binding"
		for _, g := range []given{{"history", c.History}, {"closed", c.Closed}, {"publishers", sp.publishers != nil}} {
			if g.ok {
				field = g.name
				break
			}
		}
		reason := "not served by this node"
		switch field {
		case "history":
			reason = "history only with binding=feed and an admin: a self-indexed feed's history is read from storage (SWIP-65); no other history is delivered"
		case "publishers":
			reason = "publishers=all takes an admin"
		case "closed":
			reason = "closed takes an admin and not publishers=all: under ALL and implicit authorship everyone attached may publish"
		}
		reasons.add(field, "%s: %v", reason, err)
		return nil
	}
	return spec
}

// parseBinding reads a SWIP-60 query: the spec, and for a publishing session
// addr, with id under the implicit ANCHOR binding and index under an
// explicit FEED_TOPIC one.
func parseBinding(p *plan, q *sessionQuery, reasons *reasonList) {
	bad := reasons.add
	if q.GSOCOwner != nil || q.GSOCID != nil {
		bad("gsoc-eth-address", "only without binding (the GSOC client); give addr")
	}
	sp := buildSpec(p.topic, specParams{binding: *q.Binding, admin: q.Admin, publishers: q.Publishers, closed: q.Closed, history: q.History}, reasons)
	if sp == nil {
		return
	}
	p.spec = sp
	if q.Addr != nil {
		p.publish, p.addr = true, q.Addr
	}
	switch {
	case sp.Binding == pb.TopicBinding_FEED_TOPIC:
		p.layout = layoutIndex
	case sp.Binding == pb.TopicBinding_SOC_ID:
		p.layout = layoutTopicID
	case sp.Binding == pb.TopicBinding_ANCHOR && sp.Implicit():
		p.layout = layoutSessionID
	default:
		p.layout = layoutID
	}

	if p.layout == layoutSessionID {
		switch {
		case q.Addr != nil && q.ID == nil:
			bad("id", "required with addr under binding=anchor without admin (the GSOC's id)")
		case q.Addr == nil && q.ID != nil:
			bad("addr", "required with id")
		case q.Addr != nil:
			if addr, err := soc.CreateAddress(soc.ID(q.ID), q.Addr); err != nil || !bytes.Equal(addr.Bytes(), p.topic) {
				bad("id", "keccak256(id ‖ addr) is not the topic")
			}
		}
		p.id = q.ID
	} else if q.ID != nil {
		bad("id", "only with binding=anchor without admin: here %s", idRule(p.layout))
	}

	if q.Index != nil {
		switch {
		case p.layout == layoutIndex && !p.publish:
			p.from = q.Index // a subscriber resuming: SWIP-65 recovery from there
		case p.layout == layoutIndex:
			p.indexHint = q.Index // the dApp's own cursor: echoed, nothing else
		default:
			bad("index", "only with binding=feed: without addr the index a subscriber resumes at, with addr the dApp's own feed cursor (echoed in ready)")
		}
	}
	if q.Pot != nil {
		if sp.Binding != pb.TopicBinding_FEED_TOPIC {
			bad("pot", "only with binding=feed: the pot profile is a self-indexed feed's")
		}
		p.pot = *q.Pot
	}
	if sp.Closed && q.Addr == nil {
		bad("addr", "closed cohort: only publishers attend; give addr")
	}
	if p.publish && sp.Implicit() {
		switch sp.Binding {
		case pb.TopicBinding_OWNER:
			if h, _ := crypto.LegacyKeccak256(q.Addr); !bytes.Equal(h, p.topic) {
				bad("addr", "binding=owner without admin: keccak256(addr) is not the topic")
			}
		case pb.TopicBinding_SOC_ID:
			if a, err := soc.CreateAddress(soc.ID(p.topic), q.Addr); err != nil || swarm.Proximity(a.Bytes(), p.topic) < bps.PoMin {
				bad("addr", "binding=soc_id without admin: keccak256(topic ‖ addr) shares fewer than %d leading bits with the topic", bps.PoMin)
			}
		}
	}
}

// idRule says where the SOC id of a frame comes from under l.
func idRule(l layout) string {
	switch l {
	case layoutTopicID:
		return "the id is the topic"
	case layoutIndex:
		return "the id is keccak256(topic ‖ index), or the session feed's under an admin"
	default:
		return "each frame's soc carries its id"
	}
}
