// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bps/pkg/bps"

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
			h.deliver(d)
		case <-h.x.ctx.Done():
			h.x.hubs.drop(h.room.key, h)
			_ = h.sub.Close()
			h.endAll(ErrMuxClosed)
			return
		case <-h.stop:
			_ = h.sub.Close()
			// What the subscription took before it closed: the node's
			// other streams of the cohort drop their copies of it.
			for d := range h.sub.C() {
				h.deliver(d)
			}
			return
		}
	}
}

// deliver hands d to the room.
func (h *Hub) deliver(d bps.Delivery) {
	if d.Service == nil {
		h.delivered.Add(1)
	}
	h.room.Deliver(d)
}

// PubStream is the one publisher stream that every session publishing as
// an address in a cohort at a broker shares (SWIP-74 Rev 8). The node holds
// no keys: it joins declaring the address, learns the stream's challenge
// from the Ack, and each session's dApp signs every chunk under it — under
// explicit authorship first an AUTH, which claims the stream (the first
// valid frame claims; there is no reply). Sharing grants nothing a session
// could not do with the address's signatures alone: every frame is
// verified against the address and the challenge before it is sent. Unless
// it was opened without Receive, it receives: what the broker sends it —
// the messages of every other identity — goes to the room.
//
// Under explicit authorship the stream is pending (the admin, or an
// address the roster names), a spectator (an open cohort, any other
// address: it receives) or silent (a closed cohort, any other address: it
// receives nothing) until an AUTH claims it; the mux closes a pending or
// silent stream still unclaimed after SilentWait, before the broker's claim
// deadline (MuxOptions.SilentWait).
//
// When the broker loses the stream (a reset, a lost connection) the mux
// joins again, at most Rejoins times: the new stream has a new challenge
// and a new Seq, and its sessions are poked — each dApp claims again and
// re-signs what it had not had sent (Send answers a frame signed under an
// earlier challenge with *StaleError).
type PubStream struct {
	sessionSet
	opening
	x       *mux
	key     string
	room    *Room
	addr    []byte
	claims  bool // explicit authorship: an AUTH claims the stream
	salted  bool // explicit authorship or ALL: every chunk is signed under the challenge
	receive bool
	stop    chan struct{}
	wake    chan struct{} // the room's roster changed, or a frame claimed the stream

	gmu     sync.Mutex
	gen     *generation   // the stream the sessions publish on; nil before the first join
	changed chan struct{} // closed, and replaced, when gen changes or the stream ends
	over    bool          // the stream ended for good

	sent atomic.Uint64
}

// generation is one join of a PubStream: its stream and challenge.
type generation struct {
	p         Publisher
	challenge []byte
	seq       int
	lost      atomic.Bool // the broker lost it: a rejoin follows, or the end
	claimed   atomic.Bool // explicit authorship: an AUTH was sent on it, and no roster revoked the address since
}

// StaleError: a frame signed under a challenge that is not the stream's
// now (an earlier join of it); it was not sent. Seq is the stream's join
// now: its dApp re-signs under that join's challenge.
type StaleError struct{ Seq int }

func (e *StaleError) Error() string {
	return fmt.Sprintf("signed under an earlier challenge of the stream: re-sign under challenge %d", e.Seq)
}

// Publish returns the publisher stream of (r, o.Addr), opening it if
// there is none.
func (x *mux) Publish(ctx context.Context, r *Room, o StreamOptions) (*PubStream, error) {
	if x.isClosed() {
		return nil, ErrMuxClosed
	}
	key := r.key + string(o.Addr)
	sp := r.spec
	e, creator := x.pubs.acquire(key, func() *PubStream {
		return &PubStream{sessionSet: newSessionSet(), opening: newOpening(), x: x, key: key, room: r, addr: bytes.Clone(o.Addr),
			claims: sp.Explicit(), salted: !sp.Implicit(), receive: o.Receive,
			stop: make(chan struct{}), wake: make(chan struct{}, 1), changed: make(chan struct{})}
	})
	if creator {
		x.openPub(ctx, e)
	}
	if err := e.await(ctx, nil, e.Release); err != nil {
		return nil, err
	}
	return e, nil
}

// join joins the broker declaring the stream's address.
func (x *mux) join(ctx context.Context, e *PubStream) (Publisher, error) {
	broker, sp := e.room.broker, e.room.spec
	if be := x.backoff(broker, sp); be != nil {
		return nil, be
	}
	p, err := x.svc.Publish(ctx, broker, sp, bps.PublishOptions{Addr: e.addr, Receive: e.receive})
	if err != nil {
		return nil, x.joinErr(broker, sp, err)
	}
	return p, nil
}

func (x *mux) openPub(ctx context.Context, e *PubStream) {
	defer close(e.ready)
	p, err := x.join(ctx, e)
	if err != nil {
		e.err = err
		x.pubs.drop(e.key, e)
		return
	}
	e.setGen(&generation{p: p, challenge: bytes.Clone(p.Challenge()), seq: 1})
	e.room.addPub(e)
	x.metrics.PublisherStreams.Inc()
	if !x.goOwned(e.run) {
		x.metrics.PublisherStreams.Dec()
		e.room.removePub(e)
		_ = p.Close()
		e.err = ErrMuxClosed
		x.pubs.drop(e.key, e)
	}
}

// setGen makes g the stream the sessions publish on (nil: the stream
// ended for good) and tells whoever waits for it.
func (e *PubStream) setGen(g *generation) {
	e.gmu.Lock()
	if g != nil {
		e.gen = g
	} else {
		e.over = true
	}
	close(e.changed)
	e.changed = make(chan struct{})
	e.gmu.Unlock()
}

func (e *PubStream) current() (*generation, bool, <-chan struct{}) {
	e.gmu.Lock()
	defer e.gmu.Unlock()
	return e.gen, e.over, e.changed
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

// Room is the stream's room.
func (e *PubStream) Room() *Room { return e.room }

// Addr is the address the stream publishes as.
func (e *PubStream) Addr() []byte { return e.addr }

// Ready is closed once the stream is open or failed (Err).
func (e *PubStream) Ready() <-chan struct{} { return e.ready }

// Err is why the stream failed to open; read after Ready.
func (e *PubStream) Err() error { return e.err }

// Challenge is the challenge of the stream's join now, and its Seq (1,
// then 2, … after each rejoin): every chunk sent on it is signed under it
// (SWIP-74 Rev 8; unused under implicit authorship).
func (e *PubStream) Challenge() ([]byte, int) {
	g, _, _ := e.current()
	if g == nil {
		return nil, 0
	}
	return g.challenge, g.seq
}

// Seq is the stream's join now (0 before the first).
func (e *PubStream) Seq() int {
	_, seq := e.Challenge()
	return seq
}

// Taken reports whether an AUTH claimed the stream's join now (explicit
// authorship; always under ALL and implicit authorship, which take no
// claim), as far as the node can tell: the broker gives no answer.
func (e *PubStream) Taken() bool {
	if !e.claims {
		return true
	}
	g, _, _ := e.current()
	return g != nil && g.claimed.Load()
}

// Wait returns the stream's join now once it is live, waiting while the
// stream is being joined again; an error once the stream ended for good
// (ErrStreamEnded) or ctx ended.
func (e *PubStream) Wait(ctx context.Context) (challenge []byte, seq int, err error) {
	for {
		g, over, changed := e.current()
		switch {
		case over:
			return nil, 0, ErrStreamEnded
		case g != nil && !g.lost.Load():
			return g.challenge, g.seq, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, 0, ctx.Err()
		}
	}
}

// ErrStreamEnded: the publisher stream ended for good; its sessions are
// ended with why.
var ErrStreamEnded = errors.New("bps: the publisher stream ended")

// Send publishes b on the stream's join now. Under explicit authorship and
// ALL, b must be signed under that join's challenge: a frame signed under
// an earlier one is not sent (*StaleError). An AUTH claims the stream
// (explicit authorship); bps.Publisher re-sends it as the stream's
// heartbeat (docs/protocol.md "AUTH"). While the stream is
// being joined again Send waits for the new join, then answers
// *StaleError.
func (e *PubStream) Send(ctx context.Context, b *pb.Broadcast) error {
	g, over, _ := e.current()
	switch {
	case over || g == nil:
		return ErrStreamEnded
	case g.lost.Load():
		return e.staleAfter(ctx, g)
	case e.salted && !bytes.Equal(b.Challenge, g.challenge):
		return &StaleError{Seq: g.seq}
	}
	if err := g.p.Send(ctx, b); err != nil {
		if ctx.Err() != nil {
			return err
		}
		// The broker lost the stream under the frame: the rejoin that
		// follows gives it a new challenge, or the stream ends.
		if serr := e.staleAfter(ctx, g); !errors.Is(serr, ErrStreamEnded) && !errors.Is(serr, context.DeadlineExceeded) {
			return serr
		}
		return err
	}
	if b.Kind == pb.Kind_AUTH {
		if e.claims && !g.claimed.Swap(true) {
			e.poke()
		}
		return nil
	}
	e.sent.Add(1)
	return nil
}

// staleAfter waits, at most twice the join timeout, for the join after g
// and answers *StaleError with its Seq; ErrStreamEnded if the stream ends
// instead.
func (e *PubStream) staleAfter(ctx context.Context, g *generation) error {
	ctx, cancel := context.WithTimeout(ctx, 2*e.x.opts.JoinTimeout)
	defer cancel()
	for {
		ng, over, changed := e.current()
		switch {
		case over:
			return ErrStreamEnded
		case ng != g:
			return &StaleError{Seq: ng.seq}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// poke wakes the stream's goroutine; it never blocks.
func (e *PubStream) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// run hands what the broker sends to the room, until the last reference
// is released, the mux closes or the broker ends the stream for good (then
// it ends the sessions left). It joins again a stream the broker lost, at
// most Rejoins times; it sees a roster revoke the address (the stream is
// unclaimed again: a spectator or silent); it closes a stream the broker
// holds to a claim deadline still unclaimed after SilentWait.
func (e *PubStream) run() {
	defer e.x.metrics.PublisherStreams.Dec()
	defer e.room.removePub(e)
	var deadline *time.Timer
	var expired <-chan time.Time
	stopDeadline := func() {
		if deadline != nil {
			deadline.Stop()
			deadline, expired = nil, nil
		}
	}
	defer stopDeadline()
	rejoins := 0
	for {
		g, _, _ := e.current()
		// A stream the broker holds to a claim deadline: pending (it may
		// publish) or silent (a closed cohort); a spectator has none.
		if e.claims && !g.claimed.Load() && (e.room.spec.Closed || e.room.Rostered(e.addr)) {
			if deadline == nil {
				deadline = time.NewTimer(e.x.opts.SilentWait)
				expired = deadline.C
			}
		} else {
			stopDeadline()
		}
		select {
		case d, ok := <-g.p.C():
			if ok {
				e.room.Deliver(d)
				continue
			}
			err := g.p.Err()
			if err == nil && e.endedSoon() {
				// The broker closes every stream of a cohort an EOS
				// ended, after writing it to each: the end of stream,
				// not a failure of this stream.
				err = bps.ErrEndOfStream
			}
			g.lost.Store(true)
			if err == nil || errors.Is(err, bps.ErrEndOfStream) || e.x.ctx.Err() != nil || rejoins >= e.x.opts.Rejoins {
				e.finish(e.x.ended(err, true))
				return
			}
			rejoins++
			stopDeadline()
			p, jerr := e.rejoin()
			if jerr != nil {
				e.finish(e.x.ended(fmt.Errorf("%w; joining again: %w", err, jerr), true))
				return
			}
			e.x.metrics.Rejoins.Inc()
			e.setGen(&generation{p: p, challenge: bytes.Clone(p.Challenge()), seq: g.seq + 1})
			e.pokeSessions()
		case <-e.wake:
			if e.claims && g.claimed.Load() && !e.room.Rostered(e.addr) {
				// Revoked: after the grace the broker holds the stream a
				// spectator (open) or silent (closed); it claims again
				// with an AUTH once a roster names the address.
				g.claimed.Store(false)
			}
		case <-expired:
			deadline, expired = nil, nil
			e.end(&NotAdmittedError{Addr: e.addr, Wait: e.x.opts.SilentWait, Pending: e.room.Rostered(e.addr)})
			return
		case <-e.x.ctx.Done():
			e.end(ErrMuxClosed)
			return
		case <-e.stop:
			e.close(g)
			e.setGen(nil)
			return
		}
	}
}

// rejoin joins the broker again after the stream was lost, once the
// node's backoff for the cohort there has passed (waiting at most the
// join timeout for it).
func (e *PubStream) rejoin() (Publisher, error) {
	x := e.x
	ctx, cancel := context.WithTimeout(x.ctx, 2*x.opts.JoinTimeout)
	defer cancel()
	if until, _ := x.svc.Backoff(e.room.broker, e.room.spec); time.Until(until) > 0 {
		t := time.NewTimer(time.Until(until))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, x.backoff(e.room.broker, e.room.spec)
		case <-e.stop:
			return nil, ErrStreamEnded
		}
	}
	return x.join(ctx, e)
}

// finish ends the stream for good after the broker ended it, and its
// sessions.
func (e *PubStream) finish(err error) {
	e.x.pubs.drop(e.key, e)
	e.setGen(nil)
	e.endAll(err)
}

// end closes the stream and ends its sessions.
func (e *PubStream) end(err error) {
	g, _, _ := e.current()
	e.finish(err)
	e.close(g)
}

// close closes g's stream and hands the room what it took before it
// closed: the node's other streams of the cohort drop their copies of it
// (a feed update's cursor is the node's).
func (e *PubStream) close(g *generation) {
	_ = g.p.Close()
	for d := range g.p.C() {
		e.room.Deliver(d)
	}
}

func (e *PubStream) pokeSessions() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.sessions {
		s.Poke()
	}
}

// eosWait bounds how long a publisher stream the broker closed cleanly
// waits for the room to apply the EOS its sister stream carries.
const eosWait = 2 * time.Second

// endedSoon reports whether the room applies the admin's end of stream
// within eosWait: a broker ends a cohort by writing the EOS to every
// stream and closing them, and the subscriber stream's copy may be read
// after the publisher stream's close.
func (e *PubStream) endedSoon() bool {
	t := time.NewTimer(eosWait)
	defer t.Stop()
	select {
	case <-e.room.EndedC():
		return true
	case <-t.C:
		return false
	case <-e.stop:
		return false
	case <-e.x.ctx.Done():
		return false
	}
}
