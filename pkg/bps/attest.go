// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"google.golang.org/protobuf/proto"
)

// Forwarded claims (SWIP-61's attestation, docs/protocol.md "Publishing
// from depth"). Under explicit authorship a publication travels rootward
// only on streams upgraded for its owner. The node a publisher attached to
// verifies the publisher's claim over its own challenge, then sends the
// claim up each parent stream with that challenge and its overlay; each
// node on the way recovers the address from the signature itself, checks
// that the address may publish, lets the child's stream carry that owner's
// publications, and forwards the claim in turn. A node cannot tell whether
// the challenge was fresh, so a relay that saw a claim can forward it
// again: that buys the relay the owner's genuine publications rootward,
// which the cursor and the dedup window judge as any others, never a
// forgery. What a child relays for an owner no claim came up for is
// dropped before any signature is checked, and counted against the stream
// as an invalid frame.

// maxRoster is the most addresses a roster can name: a service SOC's
// payload is at most one chunk, and each address takes 22 bytes in it.
const maxRoster = swarm.ChunkSize / (AddressSize + 2)

// maxCarried bounds the owners whose publications one child stream
// carries, and the claims a relay holds to forward to a new parent: each
// owner was the admin or on a roster when its claim came up, so one roster
// and the admin fit. Past it — rosters that changed while the stream
// lived — the owner carried longest is forgotten, never the stream cut.
const maxCarried = maxRoster + 1

// forwarded is claim as it travels up from the node that verified it: with
// the challenge it was signed over and that node's overlay.
func forwarded(claim *pb.Claim, challenge []byte, broker swarm.Address) *pb.Claim {
	f := proto.Clone(claim).(*pb.Claim)
	f.Challenge, f.Broker = bytes.Clone(challenge), bytes.Clone(broker.Bytes())
	return f
}

// attestation takes a forwarded claim from a child: a stream that offered
// to forward claims, and not a publisher's own, may carry the owner's
// publications once the claim recovers to an address that may publish
// here. A signature that does not recover is a violation; a claim by an
// address the roster held here does not name is counted and held against
// the stream's pending claims, as a publisher's own is. It runs on from's
// reader goroutine.
func (c *cohort) attestation(claim *pb.Claim, from *member) error {
	s := c.r.s
	if !from.attests || from.declared != nil || from.isPub.Load() {
		s.count(c, CounterWrongStream)
		return violationf("a forwarded claim on a stream that did not offer to forward claims")
	}
	if from.carrying(claim.Addr) {
		return nil // carried already: nothing to check again (a publisher that came back), nothing to forward
	}
	if err := verifyAttestation(claim); err != nil {
		s.count(c, CounterInvalidClaim)
		return &violation{err: fmt.Errorf("forwarded claim: %w", err)}
	}
	c.mu.Lock()
	legit := !c.dead && c.isPublisherLocked(claim.Addr)
	rosters := c.svc.Next() - from.svcAt
	if legit {
		c.role.vouch(claim) // the root moves the publisher's cursor (SWIP-74), a relay forwards the claim
	}
	c.mu.Unlock()
	if !legit {
		s.count(c, CounterInvalidClaim)
		if from.pending++; uint64(from.pending) > maxPendingClaims+rosters {
			return &violation{err: fmt.Errorf("%d claims not taken: %w", from.pending, errClaimNotAdmin)}
		}
		return nil
	}
	from.carry(claim.Addr)
	s.trace(Event{Kind: EventClaim, Cohort: c.spec.String(), Peer: from.peer, Index: claim.Index})
	return nil
}

// carrying reports whether m carries addr's publications; m's reader
// goroutine only.
func (m *member) carrying(addr []byte) bool {
	return slices.ContainsFunc(m.carries, func(o []byte) bool { return bytes.Equal(o, addr) })
}

// carry lets m carry addr's publications, forgetting the owner it carried
// longest past maxCarried. m's reader goroutine only.
func (m *member) carry(addr []byte) {
	if m.carrying(addr) {
		return
	}
	if len(m.carries) >= maxCarried {
		m.carries = slices.Delete(m.carries, 0, 1)
	}
	m.carries = append(m.carries, bytes.Clone(addr))
}

// carried returns the owner of msg, a publication child stream from
// relays, among the owners whose claims came up that stream, by the
// chunk's address alone (keccak256(id ‖ owner)): no signature is checked
// for a publication no claim came up for. It returns nil and what to do
// with the stream otherwise: a stream that did not offer to forward claims
// (a node from before them) has its publications dropped unchecked, as
// sent on the wrong stream, but without penalty; one
// that did is counted as sending an invalid frame. m's reader goroutine
// only.
func (c *cohort) carried(msg *pb.Message, from *member) ([]byte, error) {
	s := c.r.s
	if !from.attests {
		s.count(c, CounterWrongStream)
		return nil, nil
	}
	if owner := ownerAmong(c.spec, msg, from.carries); owner != nil {
		return owner, nil
	}
	s.count(c, CounterWrongOwner)
	if from.invalid++; from.invalid >= s.opts.MaxInvalidFrames {
		return nil, violationf("%d publications for owners no claim came up for", from.invalid)
	}
	return nil, nil
}

// ownerAmong returns the owner in owners whose SOC address msg's is, under
// sp's binding (a bare feed index names the feed's id), or nil.
func ownerAmong(sp *Spec, msg *pb.Message, owners [][]byte) []byte {
	if len(msg.Address) != swarm.HashSize || len(msg.Data) < socHeaderSize {
		return nil
	}
	id := msg.Data[:idSize]
	if sp.Binding == pb.TopicBinding_FEED_TOPIC && isBareIndex(id) {
		id = FeedID(sp.Topic, binary.BigEndian.Uint64(id[bareIndexZeros:]))
	}
	for _, o := range owners {
		if a, err := soc.CreateAddress(id, o); err == nil && bytes.Equal(a.Bytes(), msg.Address) {
			return o
		}
	}
	return nil
}

// attestTo sends a new parent every claim this relay forwards, before
// anything else goes up it; the caller holds sub.mu.
func (sub *Subscription) attestTo(p *parent) {
	if !p.cs.attests {
		return
	}
	for _, a := range sub.attested {
		p.cs.push(sub.s, outFrame{b: a.frame, kind: kindClaim})
	}
}

// attestedClaim is a claim a relay forwards rootward, encoded.
type attestedClaim struct {
	addr  []byte
	frame []byte
}
