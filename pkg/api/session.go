// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package api

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/gorilla/websocket"
)

// outFrame is one frame queued for a session's writer.
type outFrame struct {
	typ  int
	data []byte
}

// wsSession is one WebSocket connection, a session.Session of the node's
// mux. Its reader goroutine reads the dApp's frames (and publishes them), its
// one writer goroutine writes everything the node sends — gorilla allows one
// concurrent writer — and the handler's goroutine sets it up and waits for
// both.
type wsSession struct {
	s       *Server
	ws      atomic.Pointer[websocket.Conn] // set once upgraded
	client  string                         // who opened it (Server.clientOf)
	plan    *plan
	logger  log.Logger
	broker  swarm.Address
	entered bool // counted in the client's cohorts at broker
	room    *session.Room
	hub     *session.Hub                      // nil unless the session watches the subscriber stream
	pre     *session.PubStream                // the publisher stream opened before the upgrade, if any
	pub     atomic.Pointer[session.PubStream] // set while the session may publish
	echo    *session.EchoFilter               // GSOC publishers, which receive on the subscriber stream
	queue   chan outFrame
	claims  chan []byte // claim signatures read from the dApp
	claimOK atomic.Bool // a claim-request is outstanding

	// Publishing under explicit authorship: the session's goroutine looks
	// again at its state when poked (a roster, the stream admitted).
	wake    chan struct{}
	waiting atomic.Pointer[string] // why the session may not publish now
	told    string                 // the waiting reason last sent; the session's goroutine only

	potPrev  []byte // pot profile: the payload of the session's last update; the reader only
	potIndex uint64 // its index

	quit   chan struct{} // closed by close
	once   sync.Once
	code   int    // close code; read after quit
	reason string // close reason; read after quit
	final  []byte // text frame sent before the close frame; read after quit
	drain  bool   // write what is queued before final; read after quit
	hard   *time.Timer

	readerDone chan struct{}
	writerDone chan struct{}
}

// newSession builds a session of client before its upgrade: it queues
// frames from the start, and its reader and writer start once run is called.
func newSession(s *Server, p *plan, client string, logger log.Logger) *wsSession {
	ss := &wsSession{
		s: s, plan: p, client: client, logger: logger,
		queue:      make(chan outFrame, s.opts.SessionQueue),
		claims:     make(chan []byte, 1),
		wake:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		readerDone: make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	if p.echoes() {
		ss.echo = session.NewEchoFilter(max(s.opts.SessionQueue, 64))
	}
	return ss
}

// maxReason is the longest close reason a close frame carries (125 bytes of
// control payload less the 2-byte code).
const maxReason = 123

// close ends the session with code and reason, once; final is a text frame
// the writer sends just before the close frame. It never blocks: the writer
// does the closing handshake, and a timer drops the connection if a write
// is stuck. What is still queued is dropped.
func (ss *wsSession) close(code int, reason string, final []byte) {
	ss.closeWith(code, reason, final, false)
}

// closeDrained is close, but the writer first sends what is queued: the
// messages before an end of stream are the stream's last.
func (ss *wsSession) closeDrained(code int, reason string, final []byte) {
	ss.closeWith(code, reason, final, true)
}

func (ss *wsSession) closeWith(code int, reason string, final []byte, drain bool) {
	ss.once.Do(func() {
		if len(reason) > maxReason {
			reason = reason[:maxReason]
			for !utf8.ValidString(reason) {
				reason = reason[:len(reason)-1]
			}
		}
		ss.code, ss.reason, ss.final, ss.drain = code, reason, final, drain
		ss.hard = time.AfterFunc(ss.s.opts.WriteTimeout+closeGrace, func() {
			if ws := ss.ws.Load(); ws != nil {
				_ = ws.Close()
			}
		})
		close(ss.quit)
	})
}

// fail closes the session, telling a dApp that speaks the session protocol
// the whole reason in an error frame first.
func (ss *wsSession) fail(code int, reason string) {
	var final []byte
	if ss.plan.control() {
		final, _ = json.Marshal(errorFrame{Type: typeError, Reason: reason})
	}
	ss.logger.Debug("pubsub session closed", "code", code, "reason", reason)
	ss.close(code, reason, final)
}

// Closed reports whether the session has ended (session.Session).
func (ss *wsSession) Closed() bool {
	select {
	case <-ss.quit:
		return true
	default:
		return false
	}
}

// enqueue queues a frame for the writer; false if the queue is full.
func (ss *wsSession) enqueue(typ int, data []byte) bool {
	select {
	case ss.queue <- outFrame{typ: typ, data: data}:
		return true
	default:
		return false
	}
}

// sendControl queues a text frame of the session protocol.
func (ss *wsSession) sendControl(v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	return ss.sendText(b)
}

// sendText queues an encoded text frame.
func (ss *wsSession) sendText(b []byte) bool {
	return ss.enqueue(websocket.TextMessage, b)
}

// slow closes a session whose queue is full. It leaves its hub at once:
// its writer may be stuck until the connection is dropped.
func (ss *wsSession) slow() {
	if ss.hub != nil {
		ss.hub.Remove(ss)
	}
	ss.s.metrics.SlowSessions.Inc()
	ss.fail(websocket.ClosePolicyViolation, slowReason(cap(ss.queue)))
}

// Poke wakes the session's goroutine; it never blocks (session.Session).
func (ss *wsSession) Poke() {
	select {
	case ss.wake <- struct{}{}:
	default:
	}
}

// writeLoop is the session's only writer: queued frames and pings until the
// session is closed, then the closing handshake.
func (ss *wsSession) writeLoop() {
	defer close(ss.writerDone)
	ws := ss.ws.Load()
	ping := time.NewTicker(ss.plan.keepAlive)
	defer ping.Stop()
	for {
		select {
		case <-ss.quit:
			ss.finish(ss.flush())
			return
		default:
		}
		var err error
		select {
		case <-ss.quit:
			ss.finish(ss.flush())
			return
		case f := <-ss.queue:
			err = ss.write(f.typ, f.data)
		case <-ping.C:
			err = ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(ss.s.opts.WriteTimeout))
		}
		if err != nil {
			ss.close(websocket.CloseAbnormalClosure, "write: "+err.Error(), nil)
			ss.finish(true)
			return
		}
	}
}

// flush writes what is queued if the session closes drained; it reports
// whether the connection broke.
func (ss *wsSession) flush() bool {
	if !ss.drain {
		return false
	}
	for {
		select {
		case f := <-ss.queue:
			if ss.write(f.typ, f.data) != nil {
				return true
			}
		default:
			return false
		}
	}
}

func (ss *wsSession) write(typ int, data []byte) error {
	ws := ss.ws.Load()
	if err := ws.SetWriteDeadline(time.Now().Add(ss.s.opts.WriteTimeout)); err != nil {
		return err
	}
	return ws.WriteMessage(typ, data)
}

// finish sends the final text frame and the close frame (unless the
// connection is broken), waits a bounded time for the dApp's close frame,
// drains what the dApp still sends so the close is not turned into a reset,
// and closes the connection.
func (ss *wsSession) finish(broken bool) {
	ws := ss.ws.Load()
	if !broken && ss.code != websocket.CloseAbnormalClosure { // 1006 is never sent
		if ss.final != nil {
			_ = ss.write(websocket.TextMessage, ss.final)
		}
		msg := websocket.FormatCloseMessage(ss.code, ss.reason)
		_ = ws.WriteControl(websocket.CloseMessage, msg, time.Now().Add(ss.s.opts.WriteTimeout))
	}
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-ss.readerDone:
		nc := ws.UnderlyingConn()
		if cw, ok := nc.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		}
		if nc.SetReadDeadline(time.Now().Add(closeGrace)) == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(nc, 1<<16))
		}
	case <-t.C:
	}
	_ = ws.Close()
}

// readLoop reads the dApp's frames until the connection ends; every frame,
// and every pong, extends the read deadline by twice the keep-alive.
func (ss *wsSession) readLoop() {
	defer close(ss.readerDone)
	ws := ss.ws.Load()
	alive := func() { _ = ws.SetReadDeadline(time.Now().Add(2 * ss.plan.keepAlive)) }
	alive()
	ws.SetPongHandler(func(string) error { alive(); return nil })
	for {
		typ, data, err := ss.readMessage(ws)
		if err != nil {
			ss.readFailed(err)
			return
		}
		if ss.Closed() {
			continue // draining until the dApp's close frame
		}
		switch typ {
		case websocket.TextMessage:
			ss.onText(data)
		case websocket.BinaryMessage:
			ss.onBinary(data) // may block on the stream: the deadline starts after
		}
		alive()
	}
}

// errTooBig: a dApp's message is longer than ReadLimit.
var errTooBig = errors.New("message too big")

// readMessage reads one message of at most ReadLimit bytes. The limit is
// the reader's, not gorilla's: gorilla answers a message past its own limit
// with a close frame without a reason before the session can say why.
func (ss *wsSession) readMessage(ws *websocket.Conn) (int, []byte, error) {
	typ, r, err := ws.NextReader()
	if err != nil {
		return 0, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, ss.s.opts.ReadLimit+1))
	if err != nil {
		return 0, nil, err
	}
	if int64(len(data)) > ss.s.opts.ReadLimit {
		return 0, nil, errTooBig
	}
	return typ, data, nil
}

// readFailed closes the session for the reason the reader stopped.
func (ss *wsSession) readFailed(err error) {
	var ce *websocket.CloseError
	var ne net.Error
	switch {
	case errors.As(err, &ce):
		ss.close(websocket.CloseNormalClosure, "", nil) // gorilla answered the dApp's close frame
	case errors.Is(err, errTooBig):
		ss.fail(websocket.CloseMessageTooBig, fmt.Sprintf("message exceeds %d bytes, this node's read limit", ss.s.opts.ReadLimit))
	case errors.As(err, &ne) && ne.Timeout():
		ss.close(websocket.CloseGoingAway, "keep-alive: no pong in time", nil)
	default:
		ss.close(websocket.CloseAbnormalClosure, "read: "+err.Error(), nil)
	}
}

// onText handles a text frame: the session protocol's claim.
func (ss *wsSession) onText(data []byte) {
	if !ss.plan.control() {
		ss.fail(websocket.CloseUnsupportedData, "a GSOC session takes binary frames only")
		return
	}
	var in controlIn
	if err := json.Unmarshal(data, &in); err != nil {
		ss.fail(websocket.CloseInvalidFramePayloadData, "invalid control frame: "+err.Error())
		return
	}
	switch in.Type {
	case typeClaim:
		if !ss.claimOK.Load() {
			ss.fail(websocket.ClosePolicyViolation, "claim without a claim-request")
			return
		}
		sig, err := decodeHex(in.Signature)
		if err != nil {
			ss.fail(websocket.CloseInvalidFramePayloadData, "claim signature: "+err.Error())
			return
		}
		select {
		case ss.claims <- sig:
		default:
			ss.fail(websocket.ClosePolicyViolation, "claim already given")
		}
	default:
		ss.fail(websocket.ClosePolicyViolation, fmt.Sprintf("unknown control frame type %q", in.Type))
	}
}

// onBinary publishes a dApp's frame, validated first.
func (ss *wsSession) onBinary(data []byte) {
	e := ss.pub.Load()
	if e == nil {
		if why := ss.waiting.Load(); why != nil {
			// The broker would drop the frame, or — once the roster that
			// revoked the address reached the stream — break the
			// connection and blocklist the node.
			ss.fail(websocket.ClosePolicyViolation, "not a publisher now: "+*why)
		} else if ss.plan.publish {
			ss.fail(websocket.ClosePolicyViolation, "publishing before ready")
		} else {
			ss.fail(websocket.ClosePolicyViolation, "this session does not publish: give addr (or gsoc-eth-address and gsoc-topic)")
		}
		return
	}
	msg, err := ss.plan.assemble(data)
	if err == nil {
		err = ss.checkPot(msg)
	}
	if err != nil {
		ss.s.metrics.InvalidFrames.Inc()
		ss.fail(websocket.CloseInvalidFramePayloadData, err.Error())
		return
	}
	if ss.echo != nil {
		ss.echo.Add(bps.FrameKey(msg.Address, msg.Data))
	}
	if err := e.Send(ss.s.ctx, msg); err != nil {
		ss.fail(websocket.CloseInternalServerErr, "publish: "+err.Error())
		return
	}
	ss.s.metrics.Published.Inc()
	if ss.plan.batch != nil {
		if err := ss.persist(msg); err != nil {
			ss.s.metrics.PersistFailed.Inc()
			ss.fail(websocket.CloseInternalServerErr, "persist: "+err.Error())
			return
		}
		ss.s.metrics.Persisted.Inc()
	}
}

// errClaim marks a claim the dApp did not sign, or signed wrongly, in time.
var errClaim = errors.New("claim")

// SignClaim asks the dApp to sign a claim (session.Session): a claim-request
// text frame out, a claim text frame back within ClaimTimeout. The
// signature is checked here — 65 bytes, v 27 or 28, recovering to the
// session's addr over the digest — because the broker answers a bad claim
// by blocklisting this node.
func (ss *wsSession) SignClaim(ctx context.Context, challenge []byte, broker swarm.Address, index uint64) ([]byte, error) {
	select {
	case <-ss.claims: // a late answer to an earlier request
	default:
	}
	ss.claimOK.Store(true)
	defer ss.claimOK.Store(false)
	if !ss.sendControl(claimRequest{
		Type:      typeClaimRequest,
		Topic:     hex.EncodeToString(ss.plan.spec.Topic),
		Addr:      hex.EncodeToString(ss.plan.addr),
		Broker:    broker.String(),
		Challenge: hex.EncodeToString(challenge),
		Index:     strconv.FormatUint(index, 10),
	}) {
		return nil, fmt.Errorf("%w: session queue full", errClaim)
	}
	t := time.NewTimer(ss.s.opts.ClaimTimeout)
	defer t.Stop()
	select {
	case sig := <-ss.claims:
		if err := verifyClaim(sig, ss.plan.addr, challenge, broker, index); err != nil {
			return nil, err
		}
		return sig, nil
	case <-t.C:
		return nil, fmt.Errorf("%w: no claim within %s", errClaim, ss.s.opts.ClaimTimeout)
	case <-ss.quit:
		return nil, fmt.Errorf("%w: session closed", errClaim)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// verifyClaim checks a claim signature as the broker will
// (bps.VerifyClaim).
func verifyClaim(sig, addr, challenge []byte, broker swarm.Address, index uint64) error {
	c, err := bps.ClaimFromSignature(addr, index, sig)
	if err == nil {
		err = bps.VerifyClaim(c, challenge, broker)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", errClaim, err)
	}
	return nil
}

// join makes the opened session a member of its room — receiving at once
// unless it publishes and may not yet — and of its hub: from then on it
// holds everything accepted.
func (ss *wsSession) join() {
	p, rm := ss.plan, ss.room
	receive := true
	switch {
	case ss.pre != nil && !p.claims():
		ss.attachPub(ss.pre)
	case !p.publish:
		ss.ready("subscriber")
	case p.claims() && ss.hub != nil && !rm.Rostered(p.addr):
		// An open cohort: the session watches it until a roster names addr.
		ss.wait(reasonNotRostered)
	default:
		receive = false // from its ready frame on
	}
	rm.Add(ss, p.memberOptions(ss.echo), receive)
	if ss.hub != nil {
		if err := ss.hub.Add(ss); err != nil {
			ss.End(err) // the hub ended between Subscribe and here
		}
	}
}

// run runs the upgraded session: registered, its reader and writer
// started, and, where publishing takes a claim, its publisher state kept up
// to date (negotiate) — until it ends. Where publishing takes a claim, the
// publisher stream opened before the upgrade is joined, its claim pending.
func (ss *wsSession) run() {
	s := ss.s
	defer s.unregister(ss)
	if !s.register(ss) {
		ss.close(websocket.CloseGoingAway, "node shutting down", nil)
	}
	go ss.writeLoop()
	go ss.readLoop()

	held := ss.pre // the publisher stream this session holds a reference to
	if ss.plan.claims() {
		held = ss.negotiate(ss.pre)
	}
	<-ss.readerDone
	<-ss.writerDone
	ss.release(held)
}

// abort ends a session that was set up but never ran: closed with reason,
// detached from what it holds, its reservation released.
func (ss *wsSession) abort(reason string) {
	ss.close(websocket.CloseGoingAway, reason, nil)
	ss.release(ss.pre)
	ss.s.unreserve(ss.client)
}

// release detaches an ended session from its room, hub and publisher
// stream, and takes it out of the client's cohorts.
func (ss *wsSession) release(held *session.PubStream) {
	ss.hard.Stop() // set: the session is closed
	if ss.room != nil {
		ss.room.Remove(ss)
	}
	if h := ss.hub; h != nil {
		h.Remove(ss)
		h.Release()
	}
	if held != nil {
		held.Remove(ss)
		held.Release()
	}
	if ss.room != nil {
		ss.room.Release()
	}
	if ss.entered {
		ss.s.leaveCohort(ss.client, ss.broker, cohortKey(ss.broker, ss.plan.spec))
	}
}

// attachPub lets the session publish on e and tells the dApp it may.
func (ss *wsSession) attachPub(e *session.PubStream) {
	if err := e.Add(ss); err != nil {
		ss.End(err)
		return
	}
	ss.pub.Store(e)
	ss.ready("publisher")
}

// Deliver queues a content message, encoded in the session's fields — once
// per field list among the room's sessions (session.Session).
func (ss *wsSession) Deliver(v *session.View) bool {
	fields := ss.plan.fields
	frame, err := v.Frame(fieldsKey(fields), func(v *session.View) ([]byte, error) { return encodeFields(v, fields) })
	if err != nil {
		ss.fail(websocket.CloseInternalServerErr, err.Error())
		return false
	}
	if !ss.enqueue(websocket.BinaryMessage, frame) {
		ss.slow()
		return false
	}
	ss.s.metrics.Delivered.Inc()
	return true
}

// Service queues a service frame; the GSOC client gets none (session.Session).
func (ss *wsSession) Service(svc *pb.ServiceMessage, gap bool) bool {
	if !ss.plan.control() {
		return true
	}
	if !ss.sendText(newServiceFrame(svc, gap)) {
		ss.slow()
		return false
	}
	return true
}

// EndOfCohort closes the session once its queue is out, with the END_OF_STREAM
// service frame last if it receives (session.Session).
func (ss *wsSession) EndOfCohort(final *pb.ServiceMessage, gap bool) {
	var frame []byte
	if final != nil && ss.plan.control() {
		frame = newServiceFrame(final, gap)
	}
	ss.closeDrained(websocket.CloseNormalClosure, eosReason, frame)
}

// End closes the session because the stream it depends on ended
// (session.Session).
func (ss *wsSession) End(err error) {
	var re *session.ReclaimError
	if errors.As(err, &re) && errors.Is(re.Err, errClaim) {
		ss.s.metrics.ClaimsFailed.Inc()
	}
	code, reason := endStatus(err)
	ss.fail(code, reason)
}

var _ session.Session = (*wsSession)(nil)

// Reasons a session publishing under explicit authorship waits.
const (
	reasonNotRostered = "not in the roster: the admin's roster does not name addr; the node claims when one does"
	reasonNotAdmitted = "closed cohort: claim sent, not admitted yet: the broker admits addr once its roster names it"
)

// negotiate keeps a session publishing under explicit authorship in step
// with the roster the node holds and with its publisher stream, until the
// session closes; it returns the publisher stream it holds, if any.
//
// The stream is opened — and the claim signed by the dApp — at once for the
// admin and in a closed cohort, where a claim is the only way in; in an open
// cohort only once a roster the node verified names addr, so that the claim
// is taken: the broker gives no answer to a claim, and a node that misjudged
// it would send a publication on a subscriber stream, or a claim on a
// publisher stream, against itself. The session may publish while the
// stream is a publisher stream (session.PubStream.Taken) and the roster names addr;
// a roster revoking addr makes it wait again — in an open cohort it lets
// go of the stream, and claims anew on a later grant.
func (ss *wsSession) negotiate(pre *session.PubStream) *session.PubStream {
	e := pre
	if e != nil {
		e = ss.attachOpened(e)
	}
	for {
		e = ss.evaluate(e)
		select {
		case <-ss.wake:
		case <-ss.quit:
			return e
		}
	}
}

// attachOpened waits for the publisher stream the session started before
// its upgrade (Mux.StartPublish) to be open — its claim signed — and
// attaches the session; it returns the stream it holds after.
func (ss *wsSession) attachOpened(e *session.PubStream) *session.PubStream {
	select {
	case <-e.Ready():
	case <-ss.quit:
		return e
	}
	err := e.Err()
	if err == nil {
		err = e.Prove(ss.s.ctx, ss)
	}
	if err != nil {
		e.Release()
		if errors.Is(err, errClaim) {
			ss.s.metrics.ClaimsFailed.Inc()
		}
		ss.fail(closeStatus(err), "publish: "+err.Error())
		return nil
	}
	if err := e.Add(ss); err != nil {
		ss.End(err)
	}
	return e
}

// evaluate looks at the session's publisher state once; e is the stream it
// holds, and it returns the one it holds after.
func (ss *wsSession) evaluate(e *session.PubStream) *session.PubStream {
	s, p, rm := ss.s, ss.plan, ss.room
	if ss.Closed() {
		return e
	}
	if e == nil {
		if !p.spec.Closed && !rm.Rostered(p.addr) {
			ss.wait(reasonNotRostered)
			return nil
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.opts.JoinTimeout+2*s.opts.ClaimTimeout)
		var err error
		e, err = s.mux.Publish(ctx, rm, p.streamOptions(), ss)
		if err == nil {
			// A stream another session opened is shared only with a
			// session that proves the key of its address.
			if err = e.Prove(ctx, ss); err != nil {
				e.Release()
			}
		}
		cancel()
		if err != nil {
			if errors.Is(err, errClaim) {
				s.metrics.ClaimsFailed.Inc()
			}
			ss.fail(closeStatus(err), "publish: "+err.Error())
			return nil
		}
		if err := e.Add(ss); err != nil {
			ss.End(err)
			return e
		}
	}
	switch {
	case !e.Taken():
		ss.wait(reasonNotAdmitted)
	case rm.Rostered(p.addr):
		ss.allow(e)
	default:
		st := rm.Service()
		ss.wait(fmt.Sprintf("revoked: the admin's roster %d does not name addr", st.Next-1))
		if !p.spec.Closed {
			e.Remove(ss)
			e.Release()
			return nil
		}
	}
	return e
}

// wait stops the session publishing and tells the dApp why, once per
// reason.
func (ss *wsSession) wait(reason string) {
	ss.pub.Store(nil)
	ss.waiting.Store(&reason)
	if reason == ss.told {
		return
	}
	ss.told = reason
	if !ss.sendControl(waitingFrame{Type: typeWaiting, Addr: hex.EncodeToString(ss.plan.addr), Reason: reason}) {
		ss.slow()
	}
}

// allow lets the session publish on e: the ready frame, and deliveries from
// then on.
func (ss *wsSession) allow(e *session.PubStream) {
	if ss.pub.Load() == e {
		return
	}
	ss.told = ""
	ss.pub.Store(e)
	ss.waiting.Store(nil)
	ss.ready("publisher")
	ss.room.Receive(ss)
}

// ready sends the ready frame (not to the GSOC client).
func (ss *wsSession) ready(role string) {
	if !ss.plan.control() {
		return
	}
	f := readyFrame{
		Type:    typeReady,
		Role:    role,
		Topic:   hex.EncodeToString(ss.plan.spec.Topic),
		Binding: bindingName(ss.plan.spec.Binding),
		Broker:  ss.broker.String(),
		Fields:  fieldNames(ss.plan.fields),
	}
	if role == "publisher" {
		f.Addr = hex.EncodeToString(ss.plan.addr)
		if ss.plan.claims() && ss.plan.layout == layoutIndex {
			f.Index = &ss.plan.index
		}
	}
	if !ss.sendControl(f) {
		ss.slow()
	}
}

// bindingName is the binding as the binding query parameter names it.
func bindingName(b pb.TopicBinding) string {
	if b == pb.TopicBinding_FEED_TOPIC {
		return "feed"
	}
	return strings.ToLower(b.String())
}
