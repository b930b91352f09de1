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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/session"
	"github.com/gorilla/websocket"
	"google.golang.org/protobuf/proto"
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
	hub     *session.Hub        // nil unless the session watches the subscriber stream
	stream  *session.PubStream  // a publishing session's stream, opened before the upgrade
	echo    *session.EchoFilter // GSOC publishers, which receive on the subscriber stream
	queue   chan outFrame

	// Publishing under a session feed (explicit authorship, ALL): the
	// session's goroutine looks again at its state when poked (a roster,
	// the stream joined again), and so does the reader after each frame.
	wake chan struct{}
	pmu  sync.Mutex
	pub  pubState // under pmu

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

// onText handles a text frame: the dApp sends none (rev 3's claim frames
// are gone): one that parses is an unknown type, 1008.
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
	ss.fail(websocket.ClosePolicyViolation, fmt.Sprintf("unknown control frame type %q: a dApp sends binary frames only", in.Type))
}

// onBinary publishes a dApp's frame, validated first exactly as the broker
// will validate it: an invalid frame closes the session (1007) and is
// never sent.
func (ss *wsSession) onBinary(data []byte) {
	p, e := ss.plan, ss.stream
	if e == nil {
		if p.publish {
			ss.fail(websocket.ClosePolicyViolation, "publishing before ready")
		} else {
			ss.fail(websocket.ClosePolicyViolation, "this session does not publish: give addr (or gsoc-eth-address and gsoc-topic)")
		}
		return
	}
	f, err := p.parse(data)
	if err != nil {
		ss.invalid(err)
		return
	}
	b := f.b
	var challenge []byte
	seq := 0
	if p.salted() {
		ctx, cancel := context.WithTimeout(ss.s.ctx, 2*ss.s.opts.JoinTimeout)
		challenge, seq, err = e.Wait(ctx)
		cancel()
		if err != nil {
			ss.fail(websocket.CloseInternalServerErr, "publish: "+err.Error())
			return
		}
		ss.announce(challenge, seq)
	}
	if err := p.verify(b, challenge); err != nil {
		if old := ss.signedUnder(b); old != 0 {
			ss.stale(b, seq)
			return
		}
		ss.invalid(err)
		return
	}
	if why := ss.mayPublish(b.Kind, seq); why != "" {
		ss.fail(websocket.ClosePolicyViolation, why)
		return
	}
	var sid, ssig, sdata []byte
	if p.batch != nil && b.Kind == pb.Kind_DATA {
		if sid, ssig, sdata, err = p.storageUpdate(f); err != nil {
			ss.invalid(err)
			return
		}
	}
	if b.Kind == pb.Kind_DATA {
		if err := ss.checkPot(b); err != nil {
			ss.invalid(err)
			return
		}
	}
	if ss.echo != nil {
		ss.echo.Add(bps.FrameKey(b))
	}
	if err := e.Send(ss.s.ctx, b); err != nil {
		var se *session.StaleError
		if errors.As(err, &se) {
			ss.announceCurrent()
			ss.stale(b, se.Seq)
			return
		}
		ss.fail(websocket.CloseInternalServerErr, "publish: "+err.Error())
		return
	}
	if b.Kind == pb.Kind_AUTH {
		ss.claimed(seq)
		return
	}
	ss.s.metrics.Published.Inc()
	if b.Kind == pb.Kind_ROSTER || b.Kind == pb.Kind_EOS {
		ss.relayed(b)
		return
	}
	if p.batch != nil {
		if err := ss.persist(sid, ssig, sdata); err != nil {
			ss.s.metrics.PersistFailed.Inc()
			ss.fail(websocket.CloseInternalServerErr, "persist: "+err.Error())
			return
		}
		ss.s.metrics.Persisted.Inc()
	}
}

// invalid closes the session for a frame that is not a valid publication.
func (ss *wsSession) invalid(err error) {
	ss.s.metrics.InvalidFrames.Inc()
	ss.fail(websocket.CloseInvalidFramePayloadData, err.Error())
}

// relayed takes a ROSTER or EOS the admin's session sent as the service
// feed in force on this node: the admin's stream never gets its own back,
// and a session here may be waiting for this very roster.
func (ss *wsSession) relayed(b *pb.Broadcast) {
	sp := ss.plan.spec
	svc, addr, err := serviceOf(sp, b)
	if err != nil {
		return // verified before it was sent: cannot happen
	}
	ss.room.Deliver(bps.Delivery{Kind: b.Kind, Index: b.Index, Challenge: b.Challenge, Address: addr, Owner: sp.Admin, Data: b.Soc, Service: svc})
}

// serviceOf is what a verified ROSTER or EOS says, and its chunk address.
func serviceOf(sp *bps.Spec, b *pb.Broadcast) (*bps.ServiceMsg, swarm.Address, error) {
	addr, err := soc.CreateAddress(b.Soc[:idSize], sp.Admin)
	if err != nil {
		return nil, swarm.ZeroAddress, err
	}
	svc := &bps.ServiceMsg{Kind: b.Kind, Index: b.Index}
	if b.Kind == pb.Kind_ROSTER {
		r := new(pb.Roster)
		if err := proto.Unmarshal(b.Soc[socMin:], r); err != nil {
			return nil, swarm.ZeroAddress, err
		}
		svc.Publishers = r.Publishers
	}
	return svc, addr, nil
}

// join makes the opened session a member of its room — receiving at once
// unless it publishes in a closed cohort and has not claimed yet — of its
// hub, and of its publisher stream: from then on it holds everything
// accepted. A session publishing under a session feed is told its
// stream's challenge first.
func (ss *wsSession) join() {
	p, rm := ss.plan, ss.room
	receive := true
	switch {
	case !p.publish:
		ss.ready("subscriber", nil, 0)
	case !p.salted():
		ss.ready("publisher", nil, 0)
	default:
		ss.announceCurrent()
		receive = !p.spec.Closed // a closed cohort's seat: from its ready frame on
	}
	rm.Add(ss, p.memberOptions(ss.echo), receive)
	if ss.hub != nil {
		if err := ss.hub.Add(ss); err != nil {
			ss.End(err) // the hub ended between Subscribe and here
		}
	}
	if ss.stream != nil {
		if err := ss.stream.Add(ss); err != nil {
			ss.End(err)
		}
	}
}

// run runs the upgraded session: registered, its reader and writer
// started, and, under a session feed, its publisher state kept up to date
// (negotiate) — until it ends.
func (ss *wsSession) run() {
	s := ss.s
	defer s.unregister(ss)
	if !s.register(ss) {
		ss.close(websocket.CloseGoingAway, "node shutting down", nil)
	}
	go ss.writeLoop()
	go ss.readLoop()
	if ss.stream != nil && ss.plan.salted() {
		ss.negotiate()
	}
	<-ss.readerDone
	<-ss.writerDone
	ss.release()
}

// abort ends a session that was set up but never ran: closed with reason,
// detached from what it holds, its reservation released.
func (ss *wsSession) abort(reason string) {
	ss.close(websocket.CloseGoingAway, reason, nil)
	ss.release()
	ss.s.unreserve(ss.client)
}

// release detaches an ended session from its room, hub and publisher
// stream, and takes it out of the client's cohorts.
func (ss *wsSession) release() {
	ss.hard.Stop() // set: the session is closed
	if ss.room != nil {
		ss.room.Remove(ss)
	}
	if h := ss.hub; h != nil {
		h.Remove(ss)
		h.Release()
	}
	if e := ss.stream; e != nil {
		e.Remove(ss)
		e.Release()
	}
	if ss.room != nil {
		ss.room.Release()
	}
	if ss.entered {
		ss.s.leaveCohort(ss.client, ss.broker, cohortKey(ss.broker, ss.plan.spec))
	}
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
func (ss *wsSession) Service(svc *bps.ServiceMsg, gap bool) bool {
	if !ss.plan.control() {
		return true
	}
	if !ss.sendText(newServiceFrame(svc, gap)) {
		ss.slow()
		return false
	}
	return true
}

// EndOfCohort closes the session once its queue is out, with the EOS
// service frame last if it receives (session.Session).
func (ss *wsSession) EndOfCohort(final *bps.ServiceMsg, gap bool) {
	var frame []byte
	if final != nil && ss.plan.control() {
		frame = newServiceFrame(final, gap)
	}
	ss.closeDrained(websocket.CloseNormalClosure, eosReason, frame)
}

// End closes the session because the stream it depends on ended
// (session.Session).
func (ss *wsSession) End(err error) {
	var na *session.NotAdmittedError
	if errors.As(err, &na) {
		ss.s.metrics.ClaimsFailed.Inc()
	}
	code, reason := endStatus(err)
	ss.fail(code, reason)
}

var _ session.Session = (*wsSession)(nil)

// Reasons a session publishing under explicit authorship waits.
const (
	reasonNotRostered = "not in the roster: the admin's roster does not name addr; send an AUTH when a roster that names it arrives"
	reasonFirstAuth   = "the first frame after a challenge must be an AUTH (kind 2, index 0, empty) signed under it"
)

// keepChallenges bounds the challenges of earlier joins a session
// remembers, to tell a frame signed under one (stale: re-sign) from an
// invalid one.
const keepChallenges = 4

// pubState is a publishing session's view of its stream under a session
// feed (explicit authorship, ALL); wsSession.pmu guards it.
type pubState struct {
	seq        int      // the stream's join last announced (challenge frame sent)
	challenges [][]byte // the challenges announced, the latest last, at most keepChallenges
	authed     int      // explicit authorship: the join this session's AUTH claimed; 0: none, or revoked since
	readySeq   int      // the join the last ready frame was sent for; 0: none since a wait
	told       string   // the waiting reason last sent
}

// announceCurrent announces the stream's join now, if it is newer than
// what the session was told.
func (ss *wsSession) announceCurrent() {
	if ch, seq := ss.stream.Challenge(); seq > 0 {
		ss.announce(ch, seq)
	}
}

// announce sends the challenge frame of the stream's join seq, once, and
// under ALL the ready frame right after it (no claim is needed there).
func (ss *wsSession) announce(challenge []byte, seq int) {
	ss.pmu.Lock()
	defer ss.pmu.Unlock()
	st := &ss.pub
	if seq <= st.seq {
		return
	}
	st.seq = seq
	st.challenges = append(st.challenges, challenge)
	if len(st.challenges) > keepChallenges {
		st.challenges = st.challenges[1:]
	}
	p := ss.plan
	if !ss.sendControl(challengeFrame{Type: typeChallenge, Challenge: hex.EncodeToString(challenge), Seq: seq,
		Topic: hex.EncodeToString(p.spec.Topic), Addr: hex.EncodeToString(p.addr), Broker: ss.broker.String()}) {
		ss.slow()
		return
	}
	if !p.claims() {
		st.readySeq = seq
		ss.ready("publisher", challenge, seq)
	}
}

// signedUnder reports the join, among the earlier ones the session was
// told, whose challenge b was signed under (0: none).
func (ss *wsSession) signedUnder(b *pb.Broadcast) int {
	ss.pmu.Lock()
	st := ss.pub
	old := slices.Clone(st.challenges)
	ss.pmu.Unlock()
	for i := len(old) - 2; i >= 0; i-- {
		c := &pb.Broadcast{Soc: b.Soc, Kind: b.Kind, Index: b.Index}
		if ss.plan.verify(c, old[i]) == nil {
			return st.seq - (len(old) - 1 - i)
		}
	}
	return 0
}

// stale tells the dApp a frame was signed under an earlier challenge and
// not sent: it re-signs it under the challenge of join seq.
func (ss *wsSession) stale(b *pb.Broadcast, seq int) {
	if !ss.sendControl(staleFrame{Type: typeStale, Kind: b.Kind.String(), Index: b.Index, Seq: seq}) {
		ss.slow()
	}
}

// mayPublish is why a frame of kind, validated under the challenge of join
// seq, may not be sent ("" : it may). Under explicit authorship a session
// claims each join with an AUTH before anything else, and sends nothing
// while the roster the node holds does not name addr: the broker would
// hold the frame a violation (a spectator or silent stream), or — once a
// revoking roster reached the stream and its grace passed — break the
// connection and blocklist the node.
func (ss *wsSession) mayPublish(kind pb.Kind, seq int) string {
	p := ss.plan
	if !p.claims() {
		return ""
	}
	ss.pmu.Lock()
	defer ss.pmu.Unlock()
	if !ss.room.Rostered(p.addr) {
		why := ss.pub.told
		if why == "" {
			why = reasonNotRostered
		}
		return "not a publisher now: " + why
	}
	if kind != pb.Kind_AUTH && ss.pub.authed != seq {
		return reasonFirstAuth
	}
	return ""
}

// claimed notes the session's AUTH sent on join seq: the session may
// publish (ready), and receives from now on.
func (ss *wsSession) claimed(seq int) {
	if !ss.plan.claims() {
		return
	}
	ss.pmu.Lock()
	st := &ss.pub
	st.authed = seq
	send := st.readySeq != seq
	var challenge []byte
	if send {
		st.readySeq, st.told = seq, ""
		challenge = st.challenges[len(st.challenges)-1]
	}
	ss.pmu.Unlock()
	if send {
		ss.ready("publisher", challenge, seq)
		ss.room.Receive(ss)
	}
}

// negotiate keeps a session publishing under a session feed in step with
// its stream and the roster the node holds, until the session closes: it
// announces each new join's challenge, and under explicit authorship
// tells the dApp to wait while the roster does not name addr (a roster
// naming it reaches the session as a service frame: its cue to send an
// AUTH, which claims — ready follows), and that a roster revoked it.
func (ss *wsSession) negotiate() {
	for {
		ss.evaluate()
		select {
		case <-ss.wake:
		case <-ss.quit:
			return
		}
	}
}

// evaluate looks at the session's publisher state once.
func (ss *wsSession) evaluate() {
	if ss.Closed() {
		return
	}
	ss.announceCurrent()
	p := ss.plan
	if !p.claims() {
		return
	}
	rostered := ss.room.Rostered(p.addr)
	ss.pmu.Lock()
	defer ss.pmu.Unlock()
	st := &ss.pub
	switch {
	case rostered:
		if st.told != "" && st.readySeq != st.seq {
			st.told = "" // a roster names addr: the dApp claims with an AUTH
		}
	case st.authed != 0:
		st.authed, st.readySeq = 0, 0
		ss.wait(fmt.Sprintf("revoked: the admin's roster %d does not name addr; send an AUTH when a roster that names it arrives", ss.room.Service().Next-1))
	default:
		ss.wait(reasonNotRostered)
	}
}

// wait tells the dApp why it may not publish, once per reason; the caller
// holds pmu.
func (ss *wsSession) wait(reason string) {
	if reason == ss.pub.told {
		return
	}
	ss.pub.told = reason
	if !ss.sendControl(waitingFrame{Type: typeWaiting, Addr: hex.EncodeToString(ss.plan.addr), Reason: reason}) {
		ss.slow()
	}
}

// ready sends the ready frame (not to the GSOC client); a publisher under a
// session feed is told the challenge it publishes under, and its join.
func (ss *wsSession) ready(role string, challenge []byte, seq int) {
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
		f.Index = ss.plan.indexHint
		if challenge != nil {
			f.Challenge, f.Seq = hex.EncodeToString(challenge), seq
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
