// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/ethersphere/bee/v2/pkg/jsonhttp"
	"github.com/ethersphere/bps/pkg/bps"
)

// topicInfo is one entry of GET /pubsub/. topicAddress, mode, role and
// connections are the fields the GSOC client reads, with the types bee-js's
// listTopics checks (a string, an integer, one of three strings, an array
// of strings); the rest is this node's.
type topicInfo struct {
	TopicAddress string `json:"topicAddress"`
	// Mode is the cohort's binding number (SWIP-60 TopicBinding): ANCHOR = 1
	// is the GSOC client's mode 1, FEED_TOPIC = 4.
	Mode int `json:"mode"`
	// Role is this node's: broker (it brokers the cohort), subscriber (a
	// subscriber stream its sessions share) or publisher (a publisher stream
	// its sessions share).
	Role string `json:"role"`
	// Connections are the peers of the entry's p2p streams, hex overlays:
	// broker — the peers whose streams are attached to the cohort, each
	// once; subscriber and publisher — the broker.
	Connections []string `json:"connections"`
	// Sessions: subscriber and publisher — the WebSocket sessions sharing
	// the stream.
	Sessions *int   `json:"sessions,omitempty"`
	Binding  string `json:"binding"`
	Admin    string `json:"admin,omitempty"`
	Cohort   string `json:"cohort"`           // short name of the canonical spec
	Broker   string `json:"broker,omitempty"` // subscriber, publisher: the broker's overlay
	Addr     string `json:"addr,omitempty"`   // publisher: the address it publishes as
	Streams  int    `json:"streams"`          // p2p streams behind the entry

	// broker
	Subscribers *int         `json:"subscribers,omitempty"`
	Publishers  *int         `json:"publishers,omitempty"`
	Cursor      *uint64      `json:"cursor,omitempty"`
	Accepted    *uint64      `json:"accepted,omitempty"`
	Counters    bps.Counters `json:"counters,omitempty"`
	Created     *time.Time   `json:"created,omitempty"`
	LastAccept  *time.Time   `json:"lastAccept,omitempty"`

	// subscriber, publisher
	Received *uint64 `json:"received,omitempty"` // deliveries handed to the sessions
	Dropped  *uint64 `json:"dropped,omitempty"`  // deliveries the subscription dropped (stale, invalid)
	Sent     *uint64 `json:"sent,omitempty"`     // frames published
	// publisher, explicit authorship: the broker made it a publisher
	// stream, as far as the node can tell (a closed cohort: admitted).
	Taken *bool `json:"taken,omitempty"`

	// The admin's service feed (a cohort with an admin): at a broker as it
	// accepted it, at a client as the node verified it.
	Roster      *[]string `json:"roster,omitempty"`      // the publishers the roster in force names (admin excluded), hex
	ServiceNext *uint64   `json:"serviceNext,omitempty"` // the lowest service index taken next (0: none yet)
	Ended       *bool     `json:"ended,omitempty"`       // END_OF_STREAM taken
}

type topicsResponse struct {
	Topics []topicInfo `json:"topics"`
}

func ptr[T any](v T) *T { return &v }

// topicsHandler serves GET /pubsub/: the cohorts this node brokers, then the
// subscriber and publisher streams its sessions share.
func (s *Server) topicsHandler(w http.ResponseWriter, _ *http.Request) {
	out := topicsResponse{Topics: []topicInfo{}}
	for _, c := range s.svc.Cohorts() {
		t := specInfo(c.Spec)
		t.Role = "broker"
		t.Streams = c.Subscribers + c.Publishers
		for _, p := range s.svc.CohortPeers(c.Spec) {
			t.Connections = append(t.Connections, p.String())
		}
		t.Subscribers, t.Publishers = ptr(c.Subscribers), ptr(c.Publishers)
		t.Accepted, t.Counters = ptr(c.Accepted), c.Counters
		t.Created, t.LastAccept = ptr(c.Created.UTC()), ptr(c.LastAccept.UTC())
		if !c.Spec.Implicit() {
			t.Cursor = ptr(c.Cursor)
			roster := make([]string, len(c.Roster))
			for i, p := range c.Roster {
				roster[i] = hex.EncodeToString(p)
			}
			t.Roster, t.ServiceNext, t.Ended = &roster, ptr(c.ServiceNext), ptr(c.Ended)
		}
		out.Topics = append(out.Topics, t)
	}

	s.mu.Lock()
	hubs := make([]*hub, 0, len(s.hubs))
	for _, h := range s.hubs {
		hubs = append(hubs, h)
	}
	pubs := make([]*pubStream, 0, len(s.pubs))
	for _, e := range s.pubs {
		pubs = append(pubs, e)
	}
	s.mu.Unlock()
	slices.SortFunc(hubs, func(a, b *hub) int { return strings.Compare(a.key, b.key) })
	slices.SortFunc(pubs, func(a, b *pubStream) int { return strings.Compare(a.key, b.key) })

	for _, h := range hubs {
		if !isClosed(h.ready) || h.err != nil {
			continue // still joining
		}
		t := specInfo(h.spec)
		t.Role = "subscriber"
		t.Connections = []string{h.broker.String()}
		t.Sessions = ptr(h.count())
		t.Streams = 1
		t.Broker = h.broker.String()
		t.Received, t.Dropped = ptr(h.delivered.Load()), ptr(h.sub.Dropped())
		t.addService(h.room)
		out.Topics = append(out.Topics, t)
	}
	for _, e := range pubs {
		if !isClosed(e.ready) || e.err != nil {
			continue
		}
		t := specInfo(e.spec)
		t.Role = "publisher"
		t.Connections = []string{e.broker.String()}
		t.Sessions = ptr(e.count())
		t.Streams = 1
		t.Broker = e.broker.String()
		t.Addr = hex.EncodeToString(e.addr)
		t.Sent = ptr(e.sent.Load())
		if e.claims {
			t.Taken = ptr(e.taken.Load())
		}
		t.addService(e.room)
		out.Topics = append(out.Topics, t)
	}
	jsonhttp.OK(w, out)
}

// addService adds the service feed as the node knows it, for a cohort
// with an admin.
func (t *topicInfo) addService(rm *room) {
	if rm.spec.Implicit() {
		return
	}
	st := rm.service()
	t.Roster, t.ServiceNext, t.Ended = &st.roster, ptr(st.next), ptr(st.ended)
}

func specInfo(sp *bps.Spec) topicInfo {
	t := topicInfo{
		Connections:  []string{},
		TopicAddress: hex.EncodeToString(sp.Topic),
		Mode:         int(sp.Binding),
		Binding:      bindingName(sp.Binding),
		Cohort:       sp.String(),
	}
	if !sp.Implicit() {
		t.Admin = hex.EncodeToString(sp.Admin)
	}
	return t
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
