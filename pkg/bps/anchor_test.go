// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// gsoc is a GSOC: a shared key and an id, whose SOC address is the topic of
// an implicit ANCHOR cohort.
type gsoc struct {
	key  key
	id   []byte
	spec *bps.Spec
}

func newGSOC(t *testing.T, name string) gsoc {
	t.Helper()
	k := newKey(t)
	id := topicOf(name)
	addr, err := soc.CreateAddress(id, k.addr)
	if err != nil {
		t.Fatal(err)
	}
	sp, err := bps.NewAnchorSpec(addr.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return gsoc{key: k, id: id, spec: sp}
}

func (g gsoc) message(t *testing.T, payload string) *pb.Broadcast {
	t.Helper()
	data, _, err := bps.SignSOC(g.key.signer, g.key.addr, g.id, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	return &pb.Broadcast{Soc: data, Kind: pb.Kind_DATA}
}

// TestAnchorCohort: the implicit ANCHOR cohort of a GSOC (SWIP-60): no
// admin, no claim; a stream declaring the GSOC owner publishes at once; every
// message is a SOC at the topic address; dedup on the wrapped chunk within a
// bounded window; the publisher does not get its own messages back.
func TestAnchorCohort(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{Bounds: bps.Bounds{DedupWindow: 4}}, 3)
	g := newGSOC(t, "anchor")
	sub := subscribe(t, cl[0], broker, g.spec)
	p, err := cl[1].svc.Publish(ctxT(t), broker.Overlay(), g.spec, bps.PublishOptions{Addr: g.key.addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	for i := range 3 {
		if err := p.Send(ctxT(t), g.message(t, fmt.Sprintf("msg %d", i))); err != nil {
			t.Fatal(err)
		}
		d := recv(t, sub)
		if want := fmt.Sprintf("msg %d", i); string(d.Payload()) != want || !bytes.Equal(d.Address.Bytes(), g.spec.Topic) {
			t.Fatalf("delivered %q at %s, want %q", d.Payload(), d.Address, want)
		}
	}
	// A republication of the same wrapped chunk is a duplicate.
	if err := p.Send(ctxT(t), g.message(t, "msg 1")); err != nil {
		t.Fatal(err)
	}
	broker.rec.wait(t, "duplicate", dropped(bps.CounterRetransmit))
	// A SOC elsewhere, or by another owner, is not this cohort's.
	other := newGSOC(t, "elsewhere")
	if err := p.Send(ctxT(t), other.message(t, "wrong address")); err != nil {
		t.Fatal(err)
	}
	broker.rec.wait(t, "wrong address", dropped(bps.CounterWrongOwner))
	// A tampered chunk: under implicit authorship the owner is recovered
	// from the signature (the frame names no address, Rev 8), so a
	// tampered payload is a valid SOC of some other owner's, not the
	// declared one's: dropped as wrong_owner, as the other owner's chunk
	// (docs/protocol.md "Implicit authorship and ALL").
	tampered := g.message(t, "tampered")
	tampered.Soc[len(tampered.Soc)-1] ^= 1
	if err := p.Send(ctxT(t), tampered); err != nil {
		t.Fatal(err)
	}
	broker.rec.waitN(t, 2, "tampered: another owner's", dropped(bps.CounterWrongOwner))
	if err := p.Send(ctxT(t), g.message(t, "last")); err != nil {
		t.Fatal(err)
	}
	if d := recv(t, sub); string(d.Payload()) != "last" {
		t.Fatalf("delivered %q, want last", d.Payload())
	}
	c := cohortInfo(t, broker, g.spec)
	if c.Accepted != 4 || c.Publishers != 1 || c.Subscribers != 1 {
		t.Fatalf("accepted %d publishers %d subscribers %d", c.Accepted, c.Publishers, c.Subscribers)
	}
	// The broker's window is bounded: after 4 newer messages msg 0 is new to
	// it again, while the subscriber's own (larger) window still drops it.
	for i := range 4 {
		if err := p.Send(ctxT(t), g.message(t, fmt.Sprintf("filler %d", i))); err != nil {
			t.Fatal(err)
		}
		recv(t, sub)
	}
	if err := p.Send(ctxT(t), g.message(t, "msg 0")); err != nil {
		t.Fatal(err)
	}
	broker.rec.waitN(t, 9, "msg 0 accepted again past the window", kind(bps.EventAccept))
	cl[0].rec.wait(t, "subscriber drops the replay", kind(bps.EventClientDrop))
	if sub.Dropped() != 1 {
		t.Fatalf("subscriber dropped %d, want 1", sub.Dropped())
	}
}

// TestAnchorDeclaredOwner: under implicit authorship a stream declaring an
// address publishes only as that address.
func TestAnchorDeclaredOwner(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	g := newGSOC(t, "declared")
	subscribe(t, cl[0], broker, g.spec)
	r := openRaw(t, cl[1], broker)
	if ack := r.join(&pb.Join{Cohort: g.spec.PB(), Addr: newKey(t).addr}); ack.Status != pb.Status_OK {
		t.Fatal(ack.Status)
	}
	r.send(g.message(t, "not the declared owner's"))
	broker.rec.wait(t, "wrong owner", dropped(bps.CounterWrongOwner))
	if n := broker.rec.count(kind(bps.EventAccept)); n != 0 {
		t.Fatalf("%d accepted", n)
	}
}

// TestAnchorSubscriberSendsNothing: without claims a subscriber stream may
// send nothing at all.
func TestAnchorSubscriberSendsNothing(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	g := newGSOC(t, "quiet")
	subscribe(t, cl[0], broker, g.spec)
	r := openRaw(t, cl[1], broker)
	r.join(&pb.Join{Cohort: g.spec.PB(), Addr: bps.ZeroAddress})
	r.send(g.message(t, "from a subscriber"))
	expectReset(t, r)
	waitBlocklisted(t, broker, cl[1])
	if got := cohortInfo(t, broker, g.spec).Counters["wrong_stream"]; got != 1 {
		t.Fatalf("wrong_stream = %d", got)
	}
}
