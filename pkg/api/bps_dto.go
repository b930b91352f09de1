// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"encoding/hex"
	"time"

	"github.com/ethersphere/bps/pkg/bps"
)

// The bodies of the /pubsub answers (openapi/bps.yaml).

// serviceResponse answers a relayed service SOC.
type serviceResponse struct {
	Index uint64 `json:"index"`
}

// topicInfo is one entry of GET /pubsub/. topicAddress, mode, role and
// connections are the fields the GSOC client reads, with the types bee-js's
// listTopics checks (a string, an integer, one of three strings, an array
// of strings); the rest is this node's.
type topicInfo struct {
	TopicAddress string `json:"topicAddress"`
	// Mode is the cohort's binding number (SWIP-60 TopicBinding): ANCHOR = 1
	// is the GSOC client's mode 1, FEED_TOPIC = 4.
	Mode int `json:"mode"`
	// Role is this node's in the cohort, one entry per cohort: broker (it
	// is the root), publisher (its sessions share a publisher stream) or
	// subscriber — the three values bee-js's listTopics accepts. Relay says
	// whether a subscriber or publisher also relays: it has children.
	Role  string `json:"role"`
	Relay bool   `json:"relay"`
	// Connections are the peers of the entry's p2p streams, hex overlays,
	// each once: a broker's children; a relay's, subscriber's or
	// publisher's parents and children.
	Connections []string `json:"connections"`
	// Sessions: the WebSocket sessions on the streams the node's sessions
	// share, a session counted once per stream it uses.
	Sessions *int   `json:"sessions,omitempty"`
	Binding  string `json:"binding"`
	Admin    string `json:"admin,omitempty"`
	Cohort   string `json:"cohort"`           // short name of the canonical spec
	Broker   string `json:"broker,omitempty"` // the broker the node's sessions joined at
	Addr     string `json:"addr,omitempty"`   // publisher: the address it publishes as
	Streams  int    `json:"streams"`          // p2p streams behind the entry: children, and the shared streams

	// The node's place in the cohort's tree (SWIP-61), per cohort: a
	// broker's entry is the root; a node's subscriber and publisher entries
	// of one cohort share one position.
	Depth    uint32   `json:"depth"`    // 0 at the root; one below the shallowest parent's stated depth
	Parents  []string `json:"parents"`  // the nodes this one receives the cohort from, hex overlays
	Children int      `json:"children"` // the nodes this one fans the cohort out to
	// ParentLag is, per parent in Parents' order, the deliveries it missed
	// that its sister gave in the current lag epoch (a withholding parent
	// is dropped at bps MaxLag). Probes counts the probes this node
	// answered, Reparents its moves on a parent's Reparent, Withheld the
	// parents it dropped for lagging.
	ParentLag []int  `json:"parentLag"`
	Probes    uint64 `json:"probes"`
	Reparents uint64 `json:"reparents"`
	Withheld  uint64 `json:"withheld"`

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
	// Audience says what bounds this node's audience as a broker.
	Audience audienceInfo `json:"audience"`
	// Pricing is what BPS charges each peer on bee's accounting (pricing.go).
	Pricing *pricingInfo `json:"pricing,omitempty"`
}

// What bee v2.8.1 bounds of a broker's audience, fixed in bee (its
// libp2p service's light-node limit, its kademlia's oversaturation): the
// node makes kademlia not count peers that hold BPS streams, so the second
// bounds only newcomers whose bin is full of peers without one.
const (
	beeLightNodes      = 100
	beeFullNodesPerBin = 18
)

// audienceInfo is what bounds a broker's audience in practice: this node's
// BPS bounds and bee's own (docs/protocol.md, "What bounds a broker's
// audience").
type audienceInfo struct {
	StreamsPerCohort    int `json:"streamsPerCohort"`    // subscriber streams per cohort (FULL past it)
	PublishersPerCohort int `json:"publishersPerCohort"` // claimed publisher streams per cohort
	Cohorts             int `json:"cohorts"`             // live cohorts
	CohortsPerPeer      int `json:"cohortsPerPeer"`      // cohorts one peer connection may hold
	LightNodes          int `json:"lightNodes"`          // bee: light peers of the node, all cohorts together
	FullNodesPerBin     int `json:"fullNodesPerBin"`     // bee: reachable full peers without a BPS stream per kademlia bin
}

func ptr[T any](v T) *T { return &v }

// position fills in the entry's place in its cohort's tree; a zero Position
// (the stream or cohort ended in between) reads as the root alone.
func (t *topicInfo) position(p bps.Position) {
	t.Depth, t.Children = p.Depth, len(p.Children)
	t.ParentLag = p.Lag
	if t.ParentLag == nil {
		t.ParentLag = make([]int, len(p.Parents))
	}
	t.Probes, t.Reparents, t.Withheld = p.Probes, p.Reparents, p.Withheld
	t.Parents = make([]string, len(p.Parents))
	for i, a := range p.Parents {
		t.Parents[i] = a.String()
	}
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
