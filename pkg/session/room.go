// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"bytes"
	"github.com/ethersphere/bps/pkg/bps"
	"sync"

	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Room is what this node's sessions in one cohort at one broker share
// besides the streams: the fan-out to the sessions, a dedup window over
// what the node's streams deliver (a message reaches the node once on each
// stream it holds in the cohort that is not bound to the message's owner:
// its subscriber stream and every publisher stream), and the service feed
// as the node has verified it — the roster, its index, the end.
//
// Every stream of the cohort on this node hands its deliveries to deliver.
// A session is a member from its setup to its end, and receives
// deliveries while it is marked receiving: a session of a closed cohort
// only once the broker admitted its address.
//
// Its mutex guards everything below it, and deliver runs whole under it: it
// only hands frames to sessions, which never block.
type Room struct {
	x      *mux
	key    string
	broker swarm.Address
	spec   *bps.Spec

	mu      sync.Mutex
	members map[Session]*roomMember
	pubs    map[*PubStream]struct{} // poked when the roster changes
	seen    *bps.Window
	svc     bps.ServiceFeed // the admin's service feed as the node verified it
	latest  *bps.ServiceMsg // the last service chunk applied
	endC    chan struct{}   // closed once the admin's EOS is applied
	store   *shared         // what its sessions' gap recoveries retrieve through (budget.go)
}

// roomMember is a session in a room.
type roomMember struct {
	MemberOptions
	receive bool
	told    *bps.ServiceMsg // the last service chunk handed to it
	f       *follower       // FEED_TOPIC with storage: the session's gap recovery
}

// MemberOptions say which messages of the cohort a session does not get:
// a publisher never receives its own messages (SWIP-60).
type MemberOptions struct {
	// Owner is the address the session publishes as (nil: it does not).
	Owner []byte
	// Echo, for a session that shares its identity with other publishers
	// (the GSOC key), skips exactly the messages it sent, by their
	// FrameKey, instead of every message of Owner.
	Echo *EchoFilter
	// From, in a FEED_TOPIC cohort on a node with storage, is the index
	// the session resumes each publisher's feed at: a feed first seen past
	// it is recovered from it (SWIP-65). Nil: from the first update seen.
	From *uint64
}

func newRoom(x *mux, key string, broker swarm.Address, sp *bps.Spec) *Room {
	return &Room{x: x, key: key, broker: broker, spec: sp, members: make(map[Session]*roomMember), endC: make(chan struct{}),
		pubs: make(map[*PubStream]struct{}), seen: bps.NewWindow(roomWindow)}
}

// Broker is the room's broker.
func (r *Room) Broker() swarm.Address { return r.broker }

// Spec is the room's cohort.
func (r *Room) Spec() *bps.Spec { return r.spec }

// Release drops the caller's reference to the room.
func (r *Room) Release() { r.x.rooms.release(r.key, r) }

// Add makes s a member, receiving at once if receive. A session joining a
// cohort that has ended is ended as the others were.
func (r *Room) Add(s Session, o MemberOptions, receive bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.svc.Ended() {
		s.EndOfCohort(nil, false)
		return
	}
	rm := &roomMember{MemberOptions: o}
	if r.x.opts.Storage != nil && r.spec.Binding == pb.TopicBinding_FEED_TOPIC {
		if r.store == nil {
			r.store = newShared(r.x.opts.Storage, r.x.opts.RecoverBudget, r.x.opts.RecoverMax, r.x.metrics.RecoveryFetches)
		}
		rm.f = newFollower(r.x, r.spec, s, o.From, r.store)
	}
	r.members[s] = rm
	switch {
	case receive:
		r.receiveLocked(s, rm)
	case r.latest != nil && names(r.latest, o.Owner):
		// A seat not receiving yet (a closed cohort's silent stream) is
		// told the roster naming it: its cue to claim (SWIP-60 rev 14).
		rm.told = r.latest
		if !s.Service(r.latest, false) {
			r.dropLocked(s)
		}
	}
}

// names reports whether svc is a ROSTER naming addr: the cue for a silent
// or pending stream of addr to claim, which reaches a session that does not
// receive yet.
func names(svc *bps.ServiceMsg, addr []byte) bool {
	if svc.Kind != pb.Kind_ROSTER || addr == nil {
		return false
	}
	for _, p := range svc.Publishers {
		if bytes.Equal(p, addr) {
			return true
		}
	}
	return false
}

// Receive marks a member receiving.
func (r *Room) Receive(s Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rm, ok := r.members[s]; ok && !rm.receive {
		r.receiveLocked(s, rm)
	}
}

// receiveLocked marks s receiving and tells it the roster the node holds,
// as a broker tells a new stream (SWIP-60: the latest service SOC first).
func (r *Room) receiveLocked(s Session, rm *roomMember) {
	rm.receive = true
	if r.latest != nil && rm.told != r.latest {
		rm.told = r.latest
		if !s.Service(r.latest, false) {
			r.dropLocked(s)
		}
	}
}

// Remove takes s out of the room.
func (r *Room) Remove(s Session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.dropLocked(s)
}

// dropLocked takes s out of the room and stops its follower; the caller
// holds r.mu.
func (r *Room) dropLocked(s Session) {
	if rm, ok := r.members[s]; ok && rm.f != nil {
		rm.f.stop()
	}
	delete(r.members, s)
}

func (r *Room) addPub(e *PubStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pubs[e] = struct{}{}
}

func (r *Room) removePub(e *PubStream) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pubs, e)
}

// Rostered reports whether addr may publish as far as the node knows: the
// admin, or named by the latest roster it verified.
func (r *Room) Rostered(addr []byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.svc.MayPublish(r.spec, addr)
}

// Service is the service feed as the node knows it.
func (r *Room) Service() ServiceState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return ServiceState{Seen: r.svc.Seen(), Next: r.svc.Next(), Ended: r.svc.Ended(), Roster: r.svc.Roster()}
}

// Deliver hands one verified delivery to the members: once, whichever of
// the node's streams brought it first — or the node itself, for a service
// SOC it relayed. A content message goes to every receiving member but
// those publishing as its owner (SWIP-60: a publisher never receives its
// own messages; a member with an echo filter skips exactly what it sent).
// A service SOC updates the node's roster and goes to every receiving
// member; END_OF_STREAM then ends every member.
func (r *Room) Deliver(d bps.Delivery) {
	k := bps.FrameKey(d.Broadcast())
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.seen.Add(k) {
		return
	}
	if d.Service != nil {
		r.serviceLocked(d)
		return
	}
	v := &View{spec: r.spec, d: d, memo: make(map[string][]byte, 1)}
	for s, rm := range r.members {
		if !rm.receive || s.Closed() {
			continue
		}
		if rm.Echo != nil {
			if rm.Echo.Take(k) {
				continue
			}
		} else if rm.Owner != nil && bytes.Equal(rm.Owner, d.Owner) {
			continue
		}
		deliver := s.Deliver
		if rm.f != nil {
			deliver = rm.f.Deliver
		}
		if !deliver(v) {
			r.dropLocked(s)
		}
	}
}

// serviceLocked applies a service SOC newer than what the node holds and
// tells the members; the caller holds r.mu. A gap is one the stream saw,
// or one the node sees across its streams.
func (r *Room) serviceLocked(d bps.Delivery) {
	svc := d.Service
	fr := r.svc.Apply(svc)
	if fr == bps.Stale {
		return // older than what the node holds: a late copy
	}
	gap := d.Gap || fr == bps.Gap
	r.latest = svc
	if gap {
		r.x.metrics.ServiceGaps.Inc()
	}
	if r.svc.Ended() {
		for s, rm := range r.members {
			var final *bps.ServiceMsg
			if rm.receive {
				final = svc
			}
			s.EndOfCohort(final, gap)
		}
		for s := range r.members {
			r.dropLocked(s)
		}
		// Closed once every member was told: a stream the broker closed
		// after the EOS waits for it (PubStream.endedSoon) and then ends
		// its sessions, which must have had their EndOfCohort first.
		select {
		case <-r.endC:
		default:
			close(r.endC)
		}
		return
	}
	for s, rm := range r.members {
		if s.Closed() || !rm.receive && !names(svc, rm.Owner) {
			continue
		}
		rm.told = svc
		if !s.Service(svc, gap) {
			r.dropLocked(s)
		}
	}
	// The roster may admit or revoke a publishing session: each looks again.
	for s := range r.members {
		s.Poke()
	}
	for e := range r.pubs {
		e.poke()
	}
}

// View is one content delivery as the sessions of a room see it: what
// each derives from it is computed on first use and shared — the signed
// SOC id, the parsed SOC, a frame per encoding. Used under the room's lock
// only, while the delivery is handed out.
type View struct {
	spec   *bps.Spec
	d      bps.Delivery
	id     []byte
	parsed *soc.SOC
	memo   map[string][]byte
}

// Delivery is the delivery viewed.
func (v *View) Delivery() bps.Delivery { return v.d }

// Identifier is the chunk's own SOC id (SWIP-74 Rev 8): a live update's
// session-feed id, a recovered update's channel id keccak256(topic ‖
// index), the binding's own id under implicit authorship.
func (v *View) Identifier() []byte {
	if v.id == nil {
		v.id = v.d.ID()
	}
	return v.id
}

// SOC parses the delivery as the SOC it is (one signature recovery, the
// first time).
func (v *View) SOC() (*soc.SOC, error) {
	if v.parsed == nil {
		s, err := soc.FromChunk(swarm.NewChunk(v.d.Address, bytes.Clone(v.d.Data)))
		if err != nil {
			return nil, err
		}
		v.parsed = s
	}
	return v.parsed, nil
}

// Frame returns the delivery encoded by encode, encoded once per key among
// all the sessions it is handed to.
func (v *View) Frame(key string, encode func(*View) ([]byte, error)) ([]byte, error) {
	if b, ok := v.memo[key]; ok {
		return b, nil
	}
	b, err := encode(v)
	if err != nil {
		return nil, err
	}
	v.memo[key] = b
	return b, nil
}

// EchoFilter remembers the last messages a publishing session sent, so the
// room does not hand them back to it (a GSOC client publishes and
// receives, but not its own messages). Bounded: the oldest is forgotten
// first. Its mutex guards it: the session adds, the room takes.
type EchoFilter struct {
	mu   sync.Mutex
	keys [][32]byte
	next int
}

// NewEchoFilter remembers the last size messages.
func NewEchoFilter(size int) *EchoFilter {
	return &EchoFilter{keys: make([][32]byte, 0, size)}
}

// Add remembers k.
func (e *EchoFilter) Add(k [32]byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.keys) < cap(e.keys) {
		e.keys = append(e.keys, k)
		return
	}
	e.keys[e.next] = k
	e.next = (e.next + 1) % len(e.keys)
}

// Take forgets k and reports whether it was remembered.
func (e *EchoFilter) Take(k [32]byte) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range e.keys {
		if e.keys[i] == k {
			e.keys[i] = [32]byte{}
			return true
		}
	}
	return false
}

// EndedC is closed once the room applied the admin's end of stream (EOS).
func (r *Room) EndedC() <-chan struct{} { return r.endC }
