// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// The protocol ids (docs/protocol.md, "Protocol ids"). One handler serves
// all three: every habit of upstream's implementation that the texts allow
// is allowed on every id, and none they forbid on any. A node joins a
// broker on the first id of Wire.ProtocolIDs the broker's host supports,
// moving on only when bee reports the id unsupported (before any frame),
// and remembers the id that worked per broker.

// protocolID is one libp2p protocol id of bee's: /swarm/name/version/stream.
type protocolID struct{ name, version, stream string }

func (id protocolID) String() string {
	return p2p.NewSwarmStreamName(id.name, id.version, id.stream)
}

var (
	idOurs      = protocolID{protocolName, protocolVersion, streamName} // this project's, registered under it
	idUpstreamA = protocolID{protocolName, protocolVersion, "pubsub"}   // upstream's first form
	idUpstreamB = protocolID{"bps", "1.0.0", "bps"}                     // upstream's later form
)

// DefaultProtocolIDs are the ids a node joins on, in order: ours, then
// upstream's two.
var DefaultProtocolIDs = []string{idOurs.String(), idUpstreamA.String(), idUpstreamB.String()}

// parseProtocolID reads an id of the form /swarm/name/version/stream.
func parseProtocolID(s string) (protocolID, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 5 || parts[0] != "" || parts[1] != "swarm" || parts[2] == "" || parts[3] == "" || parts[4] == "" {
		return protocolID{}, fmt.Errorf("protocol id %q: want /swarm/name/version/stream", s)
	}
	return protocolID{parts[2], parts[3], parts[4]}, nil
}

// Wire is how a node meets other implementations.
type Wire struct {
	// ProtocolIDs are the protocol ids this node joins a broker on, in
	// order of preference (it serves all of DefaultProtocolIDs whatever
	// this says). Default DefaultProtocolIDs.
	ProtocolIDs []string
}

// DefaultWire is the wire a zero Wire field takes.
func DefaultWire() Wire { return Wire{ProtocolIDs: DefaultProtocolIDs} }

func (w *Wire) setDefaults() {
	if len(w.ProtocolIDs) == 0 {
		w.ProtocolIDs = DefaultProtocolIDs
	}
}

func (w Wire) validate() error {
	for _, s := range w.ProtocolIDs {
		if _, err := parseProtocolID(s); err != nil {
			return err
		}
	}
	return nil
}

// Protocol is the bee p2p protocol spec to register with AddProtocol: this
// project's stream and upstream's first form, one handler (Protocols has
// upstream's second).
func (s *Service) Protocol() p2p.ProtocolSpec {
	return p2p.ProtocolSpec{
		Name:    protocolName,
		Version: protocolVersion,
		StreamSpecs: []p2p.StreamSpec{
			{Name: idOurs.stream, Handler: s.handler},
			{Name: idUpstreamA.stream, Handler: s.handler},
		},
	}
}

// Protocols are every protocol spec the node registers: Protocol and
// upstream's later form, /swarm/bps/1.0.0/bps, on the same handler.
func (s *Service) Protocols() []p2p.ProtocolSpec {
	return []p2p.ProtocolSpec{s.Protocol(), {
		Name:        idUpstreamB.name,
		Version:     idUpstreamB.version,
		StreamSpecs: []p2p.StreamSpec{{Name: idUpstreamB.stream, Handler: s.handler}},
	}}
}

// maxRememberedIDs bounds the brokers whose working protocol id the node
// remembers (the backoff table's bound).
const maxRememberedIDs = 4096

// joinIDs remembers, per broker, which of the node's join ids worked.
type joinIDs struct {
	ids []protocolID
	mu  sync.Mutex
	by  *lru[int] // broker overlay -> index into ids
}

func newJoinIDs(w Wire) *joinIDs {
	j := &joinIDs{by: newLRU[int](maxRememberedIDs)}
	for _, s := range w.ProtocolIDs {
		id, _ := parseProtocolID(s) // validated
		j.ids = append(j.ids, id)
	}
	return j
}

// order is the ids to try at broker: the one that worked last first.
func (j *joinIDs) order(broker swarm.Address) []protocolID {
	j.mu.Lock()
	defer j.mu.Unlock()
	i, ok := j.by.peek(broker.ByteString())
	if !ok || i == 0 {
		return j.ids
	}
	out := make([]protocolID, 0, len(j.ids))
	out = append(out, j.ids[i])
	out = append(out, j.ids[:i]...)
	return append(out, j.ids[i+1:]...)
}

func (j *joinIDs) worked(broker swarm.Address, id protocolID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for i, x := range j.ids {
		if x == id {
			j.by.put(broker.ByteString(), i)
			return
		}
	}
}

// openStream opens a stream to broker on the first of the node's join ids
// the broker supports, moving on only when bee reports an id unsupported
// (p2p.IncompatibleStreamError: the multistream negotiation refused it,
// before any frame); any other failure is the broker's answer.
func (s *Service) openStream(ctx context.Context, broker swarm.Address) (p2p.Stream, protocolID, error) {
	var errs []error
	for _, id := range s.joinIDs.order(broker) {
		stream, err := s.streamer.NewStream(ctx, broker, nil, id.name, id.version, id.stream)
		if err == nil {
			s.joinIDs.worked(broker, id)
			return stream, id, nil
		}
		var ie *p2p.IncompatibleStreamError
		if !errors.As(err, &ie) {
			return nil, id, err
		}
		errs = append(errs, fmt.Errorf("%s: %w", id, err))
	}
	return nil, protocolID{}, fmt.Errorf("bps: the broker speaks none of this node's protocol ids: %w", errors.Join(errs...))
}

// upstream reports whether id is one of upstream's: a broker reached on it
// serves SWIP-74 only (FEED_TOPIC with an admin: no rosters, no end of
// stream, no ALL, no closed cohorts, no history).
func (id protocolID) upstream() bool { return id == idUpstreamA || id == idUpstreamB }

// errUpstreamSpec refuses, locally, a spec an upstream broker would
// silently serve as something else.
var errUpstreamSpec = errors.New("bps: the broker speaks upstream's protocol (SWIP-74 only): it serves no publishers, closed or history cohorts")
