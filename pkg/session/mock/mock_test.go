// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package mock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/ethersphere/bps/pkg/session/mock"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a session.Session that reports what the room hands it.
type recorder struct {
	delivered chan []byte
	ended     chan error
}

func (r *recorder) Deliver(v *session.View) bool {
	r.delivered <- v.Delivery().Payload()
	return true
}
func (r *recorder) Service(*bps.ServiceMsg, bool) bool { return true }
func (r *recorder) EndOfCohort(*bps.ServiceMsg, bool)  {}
func (r *recorder) End(err error)                      { r.ended <- err }
func (r *recorder) Poke()                              {}
func (r *recorder) Closed() bool                       { return false }

// TestMuxOverMock: the session layer runs over the mock without a network:
// a delivery the test hands the subscriber stream reaches the room's
// session, and the broker ending the stream ends the session with why.
func TestMuxOverMock(t *testing.T) {
	svc := mock.New()
	x := session.NewMux(svc, session.MuxOptions{})
	defer func() {
		if err := x.Close(); err != nil {
			t.Error(err)
		}
	}()
	pk, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		t.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(pk)
	owner, err := signer.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	topic, _ := crypto.LegacyKeccak256([]byte("mock"))
	sp, err := bps.NewFeedSpec(topic, owner.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	r, err := x.Room(swarm.NewAddress(make([]byte, swarm.HashSize)), sp)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := x.Subscribe(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	s := &recorder{delivered: make(chan []byte, 1), ended: make(chan error, 1)}
	r.Add(s, session.MemberOptions{}, true)
	if err := h.Add(s); err != nil {
		t.Fatalf("the hub ended: %v", err)
	}
	streams := svc.Opened()
	if len(streams) != 1 {
		t.Fatalf("%d streams opened, want the hub's", len(streams))
	}

	b, err := sp.Chunk(signer, owner.Bytes(), pb.Kind_DATA, streams[0].Challenge(), 0, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	addr, err := soc.CreateAddress(b.Soc[:swarm.HashSize], owner.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if !streams[0].Deliver(bps.Delivery{Kind: b.Kind, Challenge: b.Challenge, Address: addr, Owner: owner.Bytes(), Data: b.Soc}) {
		t.Fatal("the stream took no delivery")
	}
	select {
	case p := <-s.delivered:
		if string(p) != "hello" {
			t.Fatalf("delivered %q", p)
		}
	case <-ctx.Done():
		t.Fatal("no delivery")
	}

	reset := errors.New("stream reset")
	streams[0].End(reset)
	select {
	case err := <-s.ended:
		var se *session.StreamEndError
		if !errors.As(err, &se) || se.Publisher || !errors.Is(err, reset) {
			t.Fatalf("ended with %v, want the subscription lost to the reset", err)
		}
	case <-ctx.Done():
		t.Fatal("the session was not ended")
	}
}
