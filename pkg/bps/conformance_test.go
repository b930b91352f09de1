// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build rev8todo

package bps_test

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// TestConformance74_04_Claim covers the claim in Join and after Ack: the
// stream becomes a publisher stream, the cursor becomes max(cursor, index),
// no reply is sent; a bad claim in Join is treated as absent, a bad claim
// after the Ack is a violation.
func TestConformance74_04_Claim(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 3)
	admin := newKey(t)
	sp := feedSpec(t, "claim", admin)
	sub := subscribe(t, cl[0], broker, sp)

	t.Run("after ack, index moves the cursor", func(t *testing.T) {
		r := openRaw(t, cl[1], broker)
		ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
		if ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
			t.Fatalf("ack %s challenge %x", ack.Status, ack.Challenge)
		}
		r.send(claimFor(t, admin, ack.Challenge, broker.Overlay(), 5))
		broker.rec.wait(t, "claim", kind(bps.EventClaim))
		if c := cohortInfo(t, broker, sp); c.Cursor != 5 || c.Publishers != 1 || c.Subscribers != 1 {
			t.Fatalf("cursor %d publishers %d subscribers %d, want 5 1 1", c.Cursor, c.Publishers, c.Subscribers)
		}
		r.send(update(t, admin, sp, 4, "below the claimed cursor"))
		broker.rec.wait(t, "retransmit", dropped(bps.CounterRetransmit))
		r.send(update(t, admin, sp, 5, "five"))
		if d := recv(t, sub); d.Index != 5 {
			t.Fatalf("delivered %d, want 5", d.Index)
		}
		// A lower claimed index never moves the cursor back.
		r2 := openRaw(t, cl[2], broker)
		ack2 := r2.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
		if ack2.Status != pb.Status_OK {
			t.Fatal(ack2.Status)
		}
		r2.send(claimFor(t, admin, ack2.Challenge, broker.Overlay(), 1))
		broker.rec.waitN(t, 2, "the second stream's claim", kind(bps.EventClaim))
		if c := cohortInfo(t, broker, sp); c.Cursor != 6 || c.Publishers != 2 {
			t.Fatalf("cursor %d publishers %d, want 6 2", c.Cursor, c.Publishers)
		}
	})

	t.Run("bad claim in join is absent", func(t *testing.T) {
		stranger := newKey(t)
		for name, claim := range map[string]*pb.Claim{
			"stale challenge": claimFor(t, admin, keccak([]byte("old boot")), broker.Overlay(), 0),
			"other address":   claimFor(t, stranger, keccak([]byte("x")), broker.Overlay(), 0),
			"malformed":       {Addr: admin.addr},
		} {
			r := openRaw(t, cl[1], broker)
			ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr, Claim: claim})
			if ack.Status != pb.Status_OK || len(ack.Challenge) != 32 {
				t.Fatalf("%s: ack %s challenge %x, want OK with a fresh S", name, ack.Status, ack.Challenge)
			}
			// It is a subscriber stream: it receives the next delivery.
			before := cohortInfo(t, broker, sp)
			if before.Subscribers < 2 {
				t.Fatalf("%s: the stream is not in the fan-out set", name)
			}
		}
	})
}

// TestConformance74_04_BadClaimAfterAck: a Claim after the Ack that does not
// verify is a violation: counted invalid_claim, the stream reset, the peer
// blocklisted.
func TestConformance74_04_BadClaimAfterAck(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	stranger := newKey(t)
	cases := map[string]func(ack *pb.Ack, broker swarm.Address) *pb.Claim{
		"signed by another key": func(ack *pb.Ack, b swarm.Address) *pb.Claim {
			c := claimFor(t, stranger, ack.Challenge, b, 0)
			c.Addr = admin.addr
			return c
		},
		"for a non-admin address": func(ack *pb.Ack, b swarm.Address) *pb.Claim {
			return claimFor(t, stranger, ack.Challenge, b, 0)
		},
		"over another overlay": func(ack *pb.Ack, _ swarm.Address) *pb.Claim {
			return claimFor(t, admin, ack.Challenge, swarm.RandAddress(t), 0)
		},
		"changed index": func(ack *pb.Ack, b swarm.Address) *pb.Claim {
			c := claimFor(t, admin, ack.Challenge, b, 0)
			c.Index = 7
			return c
		},
		"wrong challenge": func(_ *pb.Ack, b swarm.Address) *pb.Claim {
			return claimFor(t, admin, keccak([]byte("guess")), b, 0)
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 2)
			sp := feedSpec(t, "bad-claim", admin)
			sub := subscribe(t, cl[1], broker, sp)
			r := openRaw(t, cl[0], broker)
			ack := r.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
			r.send(mk(ack, broker.Overlay()))
			expectReset(t, r)
			waitBlocklisted(t, broker, cl[0])
			if got := cohortInfo(t, broker, sp).Counters["invalid_claim"]; got != 1 {
				t.Fatalf("invalid_claim = %d, want 1", got)
			}
			// Nobody else lost anything: the subscriber is still attached.
			select {
			case <-sub.Done():
				t.Fatalf("the subscriber's stream ended: %v", sub.Err())
			default:
			}
		})
	}
}

// TestConformance74_05_SubscriberStreamFrames: a frame on a subscriber stream
// that is not a valid claim is dropped, the stream reset, the peer
// blocklisted (wrong_stream).
func TestConformance74_05_SubscriberStreamFrames(t *testing.T) {
	t.Parallel()
	admin := newKey(t)
	for name, frame := range map[string]func(sp *bps.Spec) []byte{
		"a publication": func(sp *bps.Spec) []byte { return bps.EncodeFrame(update(t, admin, sp, 0, "not yours")) },
		"garbage":       func(*bps.Spec) []byte { return []byte{5, 0xff, 0xff, 0xff, 0xff, 0xff} },
		"oversized":     func(*bps.Spec) []byte { return append([]byte{0x81, 0x80, 0x01}, make([]byte, 64)...) },
		"empty claim":   func(*bps.Spec) []byte { return bps.EncodeFrame(&pb.Claim{}) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, broker, cl := cluster(t, bps.Options{}, 2)
			sp := feedSpec(t, "sub-frames", admin)
			other := subscribe(t, cl[1], broker, sp)
			r := openRaw(t, cl[0], broker)
			r.join(&pb.Join{Cohort: sp.PB()})
			r.sendBytes(frame(sp))
			expectReset(t, r)
			waitBlocklisted(t, broker, cl[0])
			if got := cohortInfo(t, broker, sp).Counters["wrong_stream"]; got != 1 {
				t.Fatalf("wrong_stream = %d, want 1", got)
			}
			select {
			case <-other.Done():
				t.Fatalf("another subscriber's stream ended: %v", other.Err())
			default:
			}
		})
	}
}

// TestConformance74_06_Validation: a publication is accepted iff bare index
// ≥ cursor, a valid SOC under keccak256(topic ‖ index), the admin's; it is
// delivered unchanged to every subscriber stream and to no publisher stream.
func TestConformance74_06_Validation(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 4)
	admin := newKey(t)
	sp := feedSpec(t, "validation", admin)
	subs := []*bps.Subscription{subscribe(t, cl[0], broker, sp), subscribe(t, cl[1], broker, sp)}

	pubA := openRaw(t, cl[2], broker)
	ackA := pubA.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	pubA.send(claimFor(t, admin, ackA.Challenge, broker.Overlay(), 0))
	pubB := openRaw(t, cl[3], broker)
	ackB := pubB.join(&pb.Join{Cohort: sp.PB(), Addr: admin.addr})
	pubB.send(claimFor(t, admin, ackB.Challenge, broker.Overlay(), 0))
	broker.rec.waitN(t, 2, "two publisher streams", kind(bps.EventClaim))

	good := update(t, admin, sp, 0, "good")
	forger := newKey(t)
	wrongOwner := update(t, forger, sp, 1, "forged")
	badSig := update(t, admin, sp, 1, "tampered")
	badSig.Data[len(badSig.Data)-1] ^= 1
	notBare := update(t, admin, sp, 1, "full id")
	copy(notBare.Data, bps.FeedID(sp.Topic, 1))
	otherTopic, _ := bps.FeedUpdate(admin.signer, topicOf("elsewhere"), 1, []byte("other feed"))

	pubA.send(good)
	broker.rec.wait(t, "accept 0", acceptedIndex(0))
	pubA.send(wrongOwner)
	broker.rec.wait(t, "wrong owner", dropped(bps.CounterWrongOwner))
	pubA.send(badSig)
	pubA.send(otherTopic)
	broker.rec.waitN(t, 2, "invalid soc", dropped(bps.CounterInvalidSOC))
	pubA.send(notBare)
	broker.rec.wait(t, "invalid index", dropped(bps.CounterInvalidIndex))
	last := update(t, admin, sp, 1, "last")
	pubB.send(last)
	broker.rec.wait(t, "accept 1", acceptedIndex(1))

	for i, sub := range subs {
		d0, d1 := recv(t, sub), recv(t, sub)
		if d0.Index != 0 || !bytes.Equal(d0.Data, good.Data) || !bytes.Equal(d0.Address.Bytes(), good.Address) {
			t.Fatalf("subscriber %d: first delivery differs from the publication", i)
		}
		if d1.Index != 1 || !bytes.Equal(d1.Data, last.Data) {
			t.Fatalf("subscriber %d: second delivery index %d", i, d1.Index)
		}
		if sub.Dropped() != 0 {
			t.Fatalf("subscriber %d dropped %d deliveries", i, sub.Dropped())
		}
	}
	c := cohortInfo(t, broker, sp)
	if c.Cursor != 2 || c.Accepted != 2 {
		t.Fatalf("cursor %d accepted %d, want 2 2", c.Cursor, c.Accepted)
	}
	// Publisher streams received nothing: closing them, the next frame is the end.
	_ = pubA.s.Close()
	_ = pubB.s.Close()
	for _, r := range []*raw{pubA, pubB} {
		m := new(pb.Message)
		if err := r.read(m); err == nil {
			t.Fatalf("a publisher stream received a delivery (address %x)", m.Address)
		}
	}
}

// TestConformance74_07_Cursor: n < cursor is a retransmit, counted, not a
// violation; gaps are accepted; index 0 is accepted on a fresh cohort.
func TestConformance74_07_Cursor(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "cursor", admin)
	sub := subscribe(t, cl[0], broker, sp)
	p := publish(t, cl[1], broker, sp, admin, 0)
	ctx := ctxT(t)
	for _, n := range []uint64{0, 10, 3, 10, 11} {
		if err := p.PublishUpdate(ctx, n, []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []uint64{0, 10, 11} {
		if d := recv(t, sub); d.Index != want {
			t.Fatalf("delivered %d, want %d", d.Index, want)
		}
	}
	c := cohortInfo(t, broker, sp)
	if c.Counters["retransmit"] != 2 || c.Cursor != 12 {
		t.Fatalf("retransmit %d cursor %d, want 2 12", c.Counters["retransmit"], c.Cursor)
	}
	if bl := broker.Blocklists(); len(bl) != 0 {
		t.Fatalf("retransmits blocklisted %v", bl)
	}
}

// TestConformance74_08_PublisherLeaving: a publisher stream going away does
// not end the cohort; the admin returns with its claim and the cursor it
// knows.
func TestConformance74_08_PublisherLeaving(t *testing.T) {
	t.Parallel()
	_, broker, cl := cluster(t, bps.Options{}, 2)
	admin := newKey(t)
	sp := feedSpec(t, "leaving", admin)
	sub := subscribe(t, cl[0], broker, sp)
	p := publish(t, cl[1], broker, sp, admin, 0)
	if err := p.PublishUpdate(ctxT(t), 0, []byte("a")); err != nil {
		t.Fatal(err)
	}
	recv(t, sub)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	broker.rec.wait(t, "publisher left", kind(bps.EventLeave))
	if c := cohortInfo(t, broker, sp); c.Cursor != 1 || c.Publishers != 0 || c.Subscribers != 1 {
		t.Fatalf("after the publisher left: cursor %d publishers %d subscribers %d", c.Cursor, c.Publishers, c.Subscribers)
	}
	p2 := publish(t, cl[1], broker, sp, admin, 1)
	if err := p2.PublishUpdate(ctxT(t), 1, []byte("b")); err != nil {
		t.Fatal(err)
	}
	if d := recv(t, sub); d.Index != 1 {
		t.Fatalf("delivered %d, want 1", d.Index)
	}
}

// TestConformance74_08_Inactivity: a cohort with no accepted message for the
// inactivity deadline is reclaimed, every stream in it reset; each accepted
// message restarts the deadline. Runs on synctest's fake clock.
func TestConformance74_08_Inactivity(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		const deadline = 10 * time.Minute
		_, broker, cl := cluster(t, bps.Options{}, 2)
		admin := newKey(t)
		sp := feedSpec(t, "idle", admin)
		sub := subscribe(t, cl[0], broker, sp)
		p := publish(t, cl[1], broker, sp, admin, 0)

		time.Sleep(deadline / 2)
		if err := p.PublishUpdate(t.Context(), 0, []byte("a")); err != nil {
			t.Fatal(err)
		}
		recv(t, sub)
		time.Sleep(deadline - time.Second) // deadline/2 + deadline - 1s since creation
		synctest.Wait()
		if n := broker.rec.count(kind(bps.EventReclaim)); n != 0 {
			t.Fatal("reclaimed before the deadline counted from the last accepted message")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if n := broker.rec.count(kind(bps.EventReclaim)); n != 1 {
			t.Fatalf("%d reclaims at the deadline, want 1", n)
		}
		if _, ok := <-sub.C(); ok {
			t.Fatal("delivery after reclaim")
		}
		if sub.Err() == nil {
			t.Fatal("a reclaim must reset the stream, not close it cleanly")
		}
		<-p.Done()
		if p.Err() == nil {
			t.Fatal("the publisher stream was not reset by the reclaim")
		}
		if n := len(broker.svc.Cohorts()); n != 0 {
			t.Fatalf("%d cohorts after reclaim", n)
		}
		if bl := broker.Blocklists(); len(bl) != 0 {
			t.Fatalf("a reclaim blocklisted %v", bl)
		}
	})
}
