// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"bytes"
	"context"
	"errors"
	"github.com/ethersphere/bps/pkg/bps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// sessionSet is the sessions that depend on one shared stream: they are
// ended with it. Its mutex guards it.
type sessionSet struct {
	mu       sync.Mutex
	sessions map[Session]struct{}
	ended    error // why the stream ended; nil while it is open
}

func newSessionSet() sessionSet { return sessionSet{sessions: make(map[Session]struct{})} }

// Add attaches a session. If the stream has ended, it returns why — the
// error the sessions attached before were ended with — so that a session
// that comes late is ended exactly as they were.
func (ss *sessionSet) Add(s Session) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.ended != nil {
		return ss.ended
	}
	ss.sessions[s] = struct{}{}
	return nil
}

// Remove detaches a session.
func (ss *sessionSet) Remove(s Session) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.sessions, s)
}

func (ss *sessionSet) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return len(ss.sessions)
}

// endAll ends the stream for its sessions, with err (never nil).
func (ss *sessionSet) endAll(err error) {
	ss.mu.Lock()
	ss.ended = err
	all := make([]Session, 0, len(ss.sessions))
	for s := range ss.sessions {
		all = append(all, s)
	}
	clear(ss.sessions)
	ss.mu.Unlock()
	for _, s := range all {
		s.End(err)
	}
}

// opening is a shared stream being opened: ready is closed once it is open
// or failed (err).
type opening struct {
	ready chan struct{}
	err   error // why it failed; read after ready
}

func newOpening() opening { return opening{ready: make(chan struct{})} }

// await waits until the stream is open, or early is closed (nil: never);
// if it failed, or ctx ended first, it calls release — the caller's
// reference is dropped — and returns why.
func (o *opening) await(ctx context.Context, early <-chan struct{}, release func()) error {
	select {
	case <-early:
		return nil
	case <-o.ready:
	case <-ctx.Done():
		release()
		return ctx.Err()
	}
	if o.err != nil {
		release()
		return o.err
	}
	return nil
}

// Hub is the one subscriber stream that every session on this node
// watching a cohort at a broker shares. Its goroutine reads the
// subscription and hands each delivery to the cohort's room. Its session
// set is the sessions that depend on the stream.
type Hub struct {
	sessionSet
	opening
	x    *mux
	room *Room
	sub  Subscription
	stop chan struct{} // closed when the last reference is released

	delivered atomic.Uint64
}

// Subscribe returns the open hub of r, joining the broker if there is none.
func (x *mux) Subscribe(ctx context.Context, r *Room) (*Hub, error) {
	if x.isClosed() {
		return nil, ErrMuxClosed
	}
	h, creator := x.hubs.acquire(r.key, func() *Hub {
		return &Hub{sessionSet: newSessionSet(), opening: newOpening(), x: x, room: r, stop: make(chan struct{})}
	})
	if creator {
		x.openHub(ctx, h)
	}
	if err := h.await(ctx, nil, h.Release); err != nil {
		return nil, err
	}
	return h, nil
}

// openHub joins the broker as a subscriber and starts the hub's goroutine.
func (x *mux) openHub(ctx context.Context, h *Hub) {
	defer close(h.ready)
	broker, sp := h.room.broker, h.room.spec
	if be := x.backoff(broker, sp); be != nil {
		h.err = be
		x.hubs.drop(h.room.key, h)
		return
	}
	sub, err := x.svc.Subscribe(ctx, broker, sp)
	if err != nil {
		h.err = x.joinErr(broker, sp, err)
		x.hubs.drop(h.room.key, h)
		return
	}
	h.sub = sub
	x.metrics.Hubs.Inc()
	if !x.goOwned(h.run) {
		x.metrics.Hubs.Dec()
		_ = sub.Close()
		h.err = ErrMuxClosed
		x.hubs.drop(h.room.key, h)
	}
}

// Release drops the caller's reference; the last one ends the subscription.
func (h *Hub) Release() {
	if h.x.hubs.release(h.room.key, h) {
		close(h.stop)
	}
}

// run hands deliveries to the room until the last reference is released,
// the mux closes or the subscription ends; in the latter cases it ends the
// sessions left.
func (h *Hub) run() {
	defer h.x.metrics.Hubs.Dec()
	for {
		select {
		case d, ok := <-h.sub.C():
			if !ok {
				h.x.hubs.drop(h.room.key, h)
				h.endAll(h.x.ended(h.sub.Err(), false))
				return
			}
			if d.Service == nil {
				h.delivered.Add(1)
			}
			h.room.Deliver(d)
		case <-h.x.ctx.Done():
			h.x.hubs.drop(h.room.key, h)
			_ = h.sub.Close()
			h.endAll(ErrMuxClosed)
			return
		case <-h.stop:
			_ = h.sub.Close()
			return
		}
	}
}

// PubStream is the one publisher stream that every session publishing as
// an address in a cohort at a broker shares. Where publishing takes a
// claim, one of its sessions signs it (the node holds no keys); sharing
// grants nothing a session could not do with the address's signatures
// alone, as every message is verified against the address before it is
// sent. Unless it was opened without Receive, it receives: what the broker
// sends it — the messages of every other identity — goes to the room.
//
// taken is whether the broker made it a publisher stream, as far as the
// node can tell: at once for the admin, under ALL and implicit authorship,
// and in an open cohort (a session claims for another address only once a
// roster the node verified names it); in a closed cohort, not before the
// stream's first delivery — a stream whose claim was not taken is silent
// there, and the broker delivers the latest service SOC when it takes the
// claim.
type PubStream struct {
	sessionSet
	opening
	x       *mux
	key     string
	room    *Room
	addr    []byte
	index   uint64
	claims  bool
	receive bool
	joined  chan struct{} // closed once the broker took the Join (then the claim)
	p       Publisher
	stop    chan struct{}
	wake    chan struct{} // the room's roster changed, or the silent wait passed
	taken   atomic.Bool
	expired atomic.Bool // a closed cohort: the silent wait passed untaken
	silent  *time.Timer // a closed cohort: the silent wait, until taken
	claimed uint64      // run goroutine: the service index the last reclaim answered

	opener atomic.Pointer[sessionRef] // signs the first claim
	proven map[Session]struct{}       // sessions that signed a claim on this stream; under sessionSet's mu

	sent atomic.Uint64
}

// sessionRef boxes a Session for an atomic pointer.
type sessionRef struct{ s Session }

// Publish returns the publisher stream of (r, o.Addr), opening it if
// there is none.
func (x *mux) Publish(ctx context.Context, r *Room, o StreamOptions, opener Session) (*PubStream, error) {
	e, creator, err := x.refPub(r, o, opener)
	if err != nil {
		return nil, err
	}
	if creator {
		x.openPub(ctx, e)
	}
	if err := e.await(ctx, nil, e.Release); err != nil {
		return nil, err
	}
	return e, nil
}

// StartPublish is Publish for an opener whose signature comes later: the
// stream is opened on a goroutine the mux owns, and StartPublish returns
// as soon as the broker has taken the Join, so that its refusal is known
// before the session is. The caller waits for Ready before using it.
func (x *mux) StartPublish(ctx context.Context, r *Room, o StreamOptions, opener Session) (*PubStream, error) {
	e, creator, err := x.refPub(r, o, opener)
	if err != nil {
		return nil, err
	}
	if creator {
		octx, cancel := context.WithTimeout(x.ctx, x.opts.JoinTimeout+2*x.opts.ClaimTimeout)
		if !x.goOwned(func() { defer cancel(); x.openPub(octx, e) }) {
			cancel()
			e.err = ErrMuxClosed
			x.pubs.drop(e.key, e)
			close(e.ready)
		}
	}
	if err := e.await(ctx, e.joined, e.Release); err != nil {
		return nil, err
	}
	return e, nil
}

// refPub takes a reference to the publisher stream of (r, o.Addr), making
// one if there is none (creator: the caller opens it).
func (x *mux) refPub(r *Room, o StreamOptions, opener Session) (*PubStream, bool, error) {
	if x.isClosed() {
		return nil, false, ErrMuxClosed
	}
	key := r.key + string(o.Addr)
	e, creator := x.pubs.acquire(key, func() *PubStream {
		e := &PubStream{sessionSet: newSessionSet(), opening: newOpening(), x: x, key: key, room: r, addr: bytes.Clone(o.Addr),
			index: o.Index, claims: r.spec.Explicit(), receive: o.Receive,
			joined: make(chan struct{}), stop: make(chan struct{}), wake: make(chan struct{}, 1)}
		e.opener.Store(&sessionRef{opener})
		return e
	})
	return e, creator, nil
}

func (x *mux) openPub(ctx context.Context, e *PubStream) {
	defer close(e.ready)
	broker, sp := e.room.broker, e.room.spec
	if be := x.backoff(broker, sp); be != nil {
		e.err = be
		x.pubs.drop(e.key, e)
		return
	}
	var sign bps.ClaimSigner
	if e.claims {
		sign = e.sign
	}
	joined := func() { close(e.joined) }
	p, err := x.svc.Publish(ctx, broker, sp, bps.PublishOptions{Addr: e.addr, Sign: sign, Index: e.index, Receive: e.receive, Joined: joined})
	if err != nil {
		e.err = x.joinErr(broker, sp, err)
		x.pubs.drop(e.key, e)
		return
	}
	e.p = p
	if sp.Closed && !bytes.Equal(e.addr, sp.Admin) {
		e.silent = time.AfterFunc(x.opts.SilentWait, func() {
			e.expired.Store(true)
			e.poke()
		})
	} else {
		e.taken.Store(true)
	}
	e.claimed = e.room.Service().Next // the roster the first claim was made under
	e.room.addPub(e)
	x.metrics.PublisherStreams.Inc()
	if !x.goOwned(e.run) {
		x.metrics.PublisherStreams.Dec()
		e.room.removePub(e)
		e.stopSilent()
		_ = p.Close()
		e.err = ErrMuxClosed
		x.pubs.drop(e.key, e)
	}
}

// sign is the stream's claim signer: one of its sessions signs, the
// opener while it lives (Publisher.Reclaim signs again later).
func (e *PubStream) sign(ctx context.Context, challenge []byte, broker swarm.Address, index uint64) ([]byte, error) {
	s := e.signer()
	if s == nil {
		return nil, errors.New("no session left to sign the claim")
	}
	sig, err := s.SignClaim(ctx, challenge, broker, index)
	if err == nil {
		e.markProven(s)
	}
	return sig, err
}

func (e *PubStream) markProven(s Session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proven == nil {
		e.proven = make(map[Session]struct{})
	}
	e.proven[s] = struct{}{}
}

// Prove has s, a session that would share this publisher stream, prove
// the key of the stream's address before it may: it signs a claim over
// the stream's own challenge, which the session checks and the node keeps
// (it is never sent: the broker took the stream's claim already). One
// session cannot ride another's claim. A stream whose cohort takes no
// claim, or a session that signed one on it, needs no proof.
func (e *PubStream) Prove(ctx context.Context, s Session) error {
	if !e.claims {
		return nil
	}
	e.mu.Lock()
	_, ok := e.proven[s]
	e.mu.Unlock()
	if ok {
		return nil
	}
	if _, err := s.SignClaim(ctx, e.p.Challenge(), e.room.broker, e.index); err != nil {
		return err
	}
	e.markProven(s)
	return nil
}

func (e *PubStream) signer() Session {
	if o := e.opener.Load(); o != nil && o.s != nil && !o.s.Closed() {
		return o.s
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.sessions {
		if !s.Closed() {
			return s
		}
	}
	return nil
}

// HoldPublisher returns the open publisher stream of addr in sp at
// broker, if there is one; the caller releases it.
func (x *mux) HoldPublisher(broker swarm.Address, sp *bps.Spec, addr []byte) *PubStream {
	e, ok := x.pubs.hold(cohortKey(broker, sp)+string(addr), func(e *PubStream) bool {
		return isDone(e.ready) && e.err == nil
	})
	if !ok {
		return nil
	}
	return e
}

// Release drops the caller's reference; the last one closes the stream.
func (e *PubStream) Release() {
	if e.x.pubs.release(e.key, e) {
		close(e.stop)
	}
}

// Remove detaches a session; the opener no longer signs.
func (e *PubStream) Remove(s Session) {
	e.sessionSet.Remove(s)
	if o := e.opener.Load(); o != nil && o.s == s {
		e.opener.CompareAndSwap(o, nil)
	}
}

// Room is the stream's room.
func (e *PubStream) Room() *Room { return e.room }

// Ready is closed once the stream is open — its claim signed and sent —
// or failed (Err).
func (e *PubStream) Ready() <-chan struct{} { return e.ready }

// Err is why the stream failed to open; read after Ready.
func (e *PubStream) Err() error { return e.err }

// Taken reports whether the broker made it a publisher stream, as far as
// the node can tell.
func (e *PubStream) Taken() bool { return e.taken.Load() }

// Send publishes msg on the stream.
func (e *PubStream) Send(ctx context.Context, msg *pb.Message) error {
	if err := e.p.Send(ctx, msg); err != nil {
		return err
	}
	e.sent.Add(1)
	return nil
}

// poke wakes the stream's goroutine; it never blocks.
func (e *PubStream) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *PubStream) stopSilent() {
	if e.silent != nil {
		e.silent.Stop()
	}
}

// run hands what the broker sends to the room, until the last reference
// is released, the mux closes or the broker ends the stream (then it ends
// the sessions left). In a closed cohort it also sees the stream admitted
// (its first delivery), claims again when the node learns of a roster
// naming the address while the stream is silent, and closes a stream
// still silent after SilentWait — before the broker's claim deadline,
// which the broker enforces as a violation, blocklisting the whole node.
func (e *PubStream) run() {
	defer e.x.metrics.PublisherStreams.Dec()
	defer e.room.removePub(e)
	defer e.stopSilent()
	for {
		select {
		case d, ok := <-e.p.C():
			if !ok {
				e.x.pubs.drop(e.key, e)
				e.endAll(e.x.ended(e.p.Err(), true))
				return
			}
			e.room.Deliver(d)
			if !e.taken.Load() {
				e.taken.Store(true)
				e.stopSilent()
				e.pokeSessions()
			}
		case <-e.wake:
			if e.taken.Load() {
				continue
			}
			if e.expired.Load() {
				e.end(&NotAdmittedError{Addr: e.addr, Wait: e.x.opts.SilentWait})
				return
			}
			if err := e.reclaim(); err != nil {
				e.end(&ReclaimError{Err: err})
				return
			}
		case <-e.x.ctx.Done():
			e.end(ErrMuxClosed)
			return
		case <-e.stop:
			_ = e.p.Close()
			return
		}
	}
}

// end closes the stream and ends its sessions.
func (e *PubStream) end(err error) {
	e.x.pubs.drop(e.key, e)
	e.endAll(err)
	_ = e.p.Close()
}

// reclaim claims again on a silent stream once the node holds a roster
// naming the address it did not hold before (SWIP-60: a roster naming it
// is the cue to claim again). The broker may already have taken the claim
// it held for this stream when it accepted that roster, so this claim can
// land on a stream the broker has upgraded: the broker reads it as a
// redundant claim (verified, cursor moved, nothing else), never as a
// publication.
func (e *PubStream) reclaim() error {
	st := e.room.Service()
	if !e.room.Rostered(e.addr) || st.Next <= e.claimed {
		return nil
	}
	e.claimed = st.Next
	ctx, cancel := context.WithTimeout(e.x.ctx, e.x.opts.JoinTimeout+e.x.opts.ClaimTimeout)
	defer cancel()
	if err := e.p.Reclaim(ctx); err != nil {
		return err
	}
	e.x.metrics.Reclaims.Inc()
	return nil
}

func (e *PubStream) pokeSessions() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.sessions {
		s.Poke()
	}
}
