// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/internal/delay"
	"github.com/ethersphere/bps/pkg/bps/pb"
)

// Subscription is this node's subscription to a cohort: its parent streams
// in the cohort's tree (SWIP-61) — two when the tree can offer them, one
// when it cannot or the node chose one — and the verification every
// delivery passes, once, whichever parent gave it. A subscription that may
// relay (Options.RelayCapacity) answers Joins for the cohort as a parent:
// every delivery it takes is fanned out to its children and every
// publication they send is forwarded up its parents.
//
// Losing one parent is masked: the other keeps delivering, and the
// subscription asks its surviving parent for a replacement (the ordinary
// join, answered with candidates). Losing both is a liveness fault: it
// rejoins from the broker. A Reparent from a parent moves it,
// make-before-break.
type Subscription struct {
	receiver
	root swarm.Address // the broker: the first join and a rejoin after both parents are lost start here
	want int           // parents wanted: 2, or 1

	// rmu orders what changes the node's rank against what states it:
	// a parent taken after its check, a child's Ack (ackDepth). Taken
	// before mu and the relay cohort's mu.
	rmu sync.Mutex

	mu        sync.Mutex
	rank      uint32 // the depth this node states while it has parents (depth); changes under rmu too
	parents   []*parent
	relay     *cohort                // the cohort of this node's children, a relay's (relay.go: bound and unbound there), nil while it has none
	asked     map[uint64]*askedLease // Leases sent rootward, not yet answered (lease.go)
	nonce     uint64                 // numbers the Leases this node asks
	carried   leaseTable             // leases this node carries rootward: routed up every parent (lease.go)
	offers    offers                 // slots this node offered to probes, not taken yet (probe.go)
	closing   bool                   // Close began
	fatal     error                  // the subscription is over for this reason (nil with closing: closed by us)
	repairing bool                   // a repair goroutine runs
	gen       uint32                 // numbers parents, for the withholding check
	finished  finishing              // running, then its deliveries to end (finishLocked), then ended (unlock)
	retry     *time.Timer            // the next request for a missing second parent, if armed
	nextRetry time.Duration          // the wait after the next failed request
	leaving   bool                   // Close is reparenting this relay's children
	pstate    parentState            // the parents over time, for the operator (repairlog.go)
	recent    growRing[recentFrame]  // the last deliveries taken, for a child's replay (replay.go)

	round context.CancelFunc // ends the repair's current round (a no-op once it ended)

	quit   chan struct{} // closed when Close begins or the subscription ends: deliveries stop
	qonce  sync.Once
	ctx    context.Context // ends with quit: bounds the joins of repairs and reparents
	cancel context.CancelFunc
	done   chan struct{} // closed when every parent stream has ended and no repair runs
	err    error         // why it ended; read after done

	judge     *judge     // judges the parents: lag, the gap escape, lazy blame (judge.go)
	lz        lazyIn     // lazy push: announcements waiting, asks (lazy.go)
	observers []observer // told of every parent and delivery: the judge, lazy push

	probes, reparents, escapes atomic.Uint64
	lastTake                   atomic.Int64 // when the last delivery new to this node was taken (Unix ns; 0: none yet)
}

// parent is one parent stream of a subscription.
type parent struct {
	cs        *clientStream
	gen       uint32       // numbers the parent among the subscription's, for the withholding check
	probing   atomic.Int32 // probes from this parent being answered
	window    time.Time    // the second probes are counted in; the reader only
	probes    int          // probes from this parent in window; the reader only
	underlays [][]byte     // how this node reached it, if a probe's candidate named them: passed on in a Reparent
	moving    atomic.Bool  // a Reparent from this parent is being followed
	moved     atomic.Bool  // the node moved away from this parent on its Reparent
	lz        *lazyParent  // lazy push, if the stream negotiated it (lazy.go)
}

// Errors of a subscription's parents.
var (
	errWithheld        = errors.New("bps: parent lagged its sister: withholding")
	errReparent        = errors.New("bps: moved to the parent a reparent named")
	errBothLost        = errors.New("bps: lost both parents and could not rejoin")
	errNoParents       = errors.New("bps: no parent accepted the join")
	errRootClosed      = errors.New("bps: the broker ended the stream")
	errDuplicateParent = errors.New("bps: the node took a second stream from a parent")
)

// maxJoinRounds bounds how often one acquisition re-asks where it started
// after its candidates were lost to races (SWIP-61: a lost race ⇒ re-ask
// the origin).
const maxJoinRounds = 3

// maxRejoins bounds the rejoins from the broker after both parents are lost
// before the subscription ends.
const maxRejoins = 5

// Subscribe joins the cohort sp at broker as a subscriber, through the
// tree: where the broker is at capacity it answers with two attachment
// points in its subtree and the node attaches to both. Deliveries that pass
// re-verification against sp and this node's cursor for (topic, admin)
// arrive on C, once each, which is closed when the subscription ends. ctx
// bounds the join only; the subscription lives until Close, the admin ends
// the cohort, it cannot rejoin after losing both parents, or the Service
// closes.
func (s *Service) Subscribe(ctx context.Context, broker swarm.Address, sp *Spec) (*Subscription, error) {
	sub := &Subscription{root: broker, want: 2, quit: make(chan struct{}), done: make(chan struct{})}
	if s.opts.SingleParent {
		sub.want = 1
	}
	sub.ctx, sub.cancel = context.WithCancel(s.ctx)
	sub.receiver.init(s, sp, true, sub.quit)
	sub.onTake = sub.took
	sub.taken = NewWindow(s.opts.DedupWindow)
	feed := sp.Binding == pb.TopicBinding_FEED_TOPIC && sp.Explicit()
	sub.judge = newJudge(s, sp, broker, sub, feed)
	sub.lz.init(&sub.receiver, sub.judge)
	sub.observers = []observer{sub.judge, &sub.lz}
	sub.onRepeat = sub.judge.repeated
	sub.onBeat = sub.beat
	if feed {
		sub.order = newReorder()
		sub.onGaps = sub.judge.gaps
	}
	if err := sub.acquire(ctx, broker, nil, false, nil); err != nil {
		sub.mu.Lock()
		if sub.fatal == nil {
			sub.fatal = err
		}
		sub.stopLocked()
		sub.finishLocked()
		sub.unlock()
		return nil, err
	}
	sub.mu.Lock()
	if len(sub.parents) == 0 {
		// attached, then lost before we got here: the repair owns it
		sub.mu.Unlock()
		return sub, nil
	}
	sub.repairLocked()
	sub.mu.Unlock()
	return sub, nil
}

// acquire joins at the node at and attaches there; a node at capacity
// answers with candidates, and the subscription attaches to as many of
// them as it lacks parents. A candidate lost to a race is replaced by
// asking at again, a bounded number of times. offer, if set, is what at
// was offered as: its Ack may not state a depth below offer's.
func (sub *Subscription) acquire(ctx context.Context, at swarm.Address, underlays [][]byte, refer bool, offer *pb.Candidate) error {
	var last error
	for round := 0; round < maxJoinRounds; round++ {
		err := sub.attachAt(ctx, at, underlays, refer, offer)
		var full *FullError
		if !errors.As(err, &full) || len(full.Candidates) == 0 {
			return err
		}
		last = err
		added, tried, err := sub.attachCandidates(ctx, full.Candidates, true)
		if added > 0 {
			return nil
		}
		if err != nil {
			last = err
		}
		if tried == 0 {
			if sub.need() == 0 {
				return nil // parents came meanwhile, by another way
			}
			// Asked again, the origin names the same places: none was
			// lost to a race, each is one this node cannot take (itself,
			// a parent it has, a child, one it shuns, a rank below its
			// own). Each ask would count at the root as a Join of this
			// peer's (ration.go), and a node that asks for a second parent
			// now and then in a narrow tree would be a hunter there within
			// a minute, its rejoin after a crash answered from the pool
			// only.
			break
		}
		if ctx.Err() != nil {
			break
		}
	}
	if last == nil {
		last = errNoParents
	}
	return last
}

// attachCandidates attaches to the candidates a FULL answer named, as many
// as the subscription lacks parents, and returns how many it took, how
// many it tried (those it cannot take are not tried) and the last refusal.
// A candidate whose slot was taken since it was offered (a
// lost race: it answers FULL with candidates of its own subtree, which is
// where the probe that found it looked) is followed into its own
// candidates once, when below is set, before the joiner asks the origin
// again: under a crowd, or links slower than an offer is held, the slot
// an offer named is often gone and the next free one is just below it.
func (sub *Subscription) attachCandidates(ctx context.Context, cands []*pb.Candidate, below bool) (added, tried int, last error) {
	s := sub.s
	for _, c := range cands {
		if sub.need() == 0 {
			break
		}
		peer := swarm.NewAddress(c.Overlay)
		sub.rmu.Lock()
		fit := sub.mayAttachUnder(c.Depth, peer)
		sub.rmu.Unlock()
		if peer.Equal(s.overlay) || sub.hasParent(peer) || sub.judge.shuns(peer) || sub.isChild(peer) || !fit {
			continue
		}
		tried++
		err := sub.attachAt(ctx, peer, c.Underlays, false, c)
		if err == nil {
			added++
			continue
		}
		last = err
		var full *FullError
		if below && errors.As(err, &full) && len(full.Candidates) > 0 {
			n, _, err := sub.attachCandidates(ctx, full.Candidates, false)
			added += n
			if err != nil {
				last = err
			}
		}
	}
	return added, tried, last
}

// dial connects this node to peer at underlays — a probe's candidate, a
// reparent's target — before it attaches there; without underlays (or a
// Connect option) the peer is taken to be reachable by overlay.
func (s *Service) dial(ctx context.Context, peer swarm.Address, underlays [][]byte) error {
	if underlays == nil || s.opts.Connect == nil {
		return nil
	}
	if err := s.opts.Connect(ctx, peer, underlays); err != nil {
		return fmt.Errorf("bps: connect to candidate %s: %w", peer, err)
	}
	return nil
}

// withhold drops p as a parent that withheld (the judge's verdict,
// judge.go, which shuns its peer).
func (sub *Subscription) withhold(p *parent) { p.cs.kill(errWithheld) }

// escape attaches the node to a third parent found by the root's probe
// (make-before-break, as a Reparent is followed) and then leaves parent
// leave, one of two that both failed a gap (the judge's verdict,
// escape.go); gap is the index that set it off. It returns the parent
// kept, nil if no new parent was found: then both stay.
func (sub *Subscription) escape(leave *parent, gap uint64) (kept *parent) {
	s := sub.s
	sub.mu.Lock()
	if sub.closing || sub.fatal != nil || !sub.hasParentLocked(leave.cs.peer) {
		sub.mu.Unlock()
		return nil
	}
	for _, p := range sub.parents {
		if p != leave {
			kept = p
		}
	}
	had := len(sub.parents) // two, or one (the root's heartbeat judges a single parent too)
	sub.want++              // room for the new parent beside the old ones, for the overlap
	sub.mu.Unlock()
	ctx, cancel := context.WithTimeout(sub.ctx, s.opts.HandshakeTimeout+s.opts.ProbeWait)
	err := sub.acquire(ctx, sub.root, nil, false, nil)
	cancel()
	sub.mu.Lock()
	sub.want--
	gained := err == nil && len(sub.parents) > had && sub.hasParentLocked(leave.cs.peer)
	sub.mu.Unlock()
	if !gained {
		if err == nil {
			err = errNoParents
		}
		s.trace(Event{Kind: EventEscape, Cohort: sub.spec.String(), Peer: leave.cs.peer, Index: gap, Err: err})
		return nil
	}
	s.metrics.Escapes.Inc()
	sub.escapes.Add(1)
	s.trace(Event{Kind: EventEscape, Cohort: sub.spec.String(), Peer: leave.cs.peer, Index: gap})
	// Left as a parent that moved: no repair (the new one is in), no
	// blame, no shunning — the gap proves nothing against it alone.
	leave.moved.Store(true)
	leave.cs.closeOnce()
	return kept
}

// mayAttachUnder reports whether a parent peer stating depth — a
// candidate's, or what its Ack stated — may be taken without risking a
// cycle. A node's key is (its rank, its overlay), and keys grow strictly
// along every edge of the tree: a node that has stated its rank to a child
// takes only a parent whose key is below its own, and keeps its rank
// (rank); a leaf takes any parent and ranks one below its deepest. Every
// descendant's key is then above this node's, however the tree reshaped —
// a descendant reached through its other parent, by a probe of a sister
// subtree after a repair moved that parent up, is refused — and a sibling
// at the same rank is taken in one direction only. A leaf that offered a
// slot to a probe keeps its rank while the offer is held, as if it had a
// child: its candidate stated that rank, and a deeper second parent taken
// meanwhile would make its Ack to the joiner deeper than offered, which the
// joiner refuses (errNotAsOffered). The caller holds rmu.
func (sub *Subscription) mayAttachUnder(depth uint32, peer swarm.Address) bool {
	sub.mu.Lock()
	rl, rank, offering := sub.relayLocked(), sub.rank, sub.offers.holding(time.Now())
	sub.mu.Unlock()
	if !offering && (rl == nil || !rl.acked()) {
		return true
	}
	return depth < rank || depth == rank && peer.Compare(sub.s.overlay) < 0
}

// ackDepth is the depth this node states in the Ack to m, a child stream
// in the cohort it relays: its rank, remembered with m (mayAttachUnder).
func (sub *Subscription) ackDepth(m *member) uint32 {
	sub.rmu.Lock()
	defer sub.rmu.Unlock()
	d := sub.depth()
	m.acked.Store(true)
	return d
}

// isChild reports whether peer holds a stream to this node as its child in
// the cohort.
func (sub *Subscription) isChild(peer swarm.Address) bool {
	sub.mu.Lock()
	rl := sub.relayLocked()
	sub.mu.Unlock()
	return rl != nil && rl.hasChild(peer)
}

// relayLocked is the relay this subscription feeds, nil while it has no
// children (relay.go); the caller holds sub.mu.
func (sub *Subscription) relayLocked() *relay {
	if sub.relay == nil {
		return nil
	}
	return sub.relay.role.(*relay) // only a relay's cohort is bound here (newRelay)
}

// swapRelay makes c the cohort this subscription relays through, if it is
// old now: newRelay binds it, its role's forgotten unbinds it.
func (sub *Subscription) swapRelay(old, c *cohort) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.relay == old {
		sub.relay = c
	}
}

// attachAt joins at peer (connecting to underlays first, if given) and, on
// OK, makes the stream a parent; cand is the probe's candidate that named
// peer, nil if none did.
func (sub *Subscription) attachAt(ctx context.Context, peer swarm.Address, underlays [][]byte, refer bool, cand *pb.Candidate) error {
	s := sub.s
	if err := s.dial(ctx, peer, underlays); err != nil {
		return err
	}
	join := &pb.Join{Cohort: sub.spec.PB(), Addr: zeroAddress, Listen: true, Multihop: true, Refer: refer}
	var fill func(*pb.Join)
	if !refer {
		join.Push = sub.lz.pushFor()
		// As of the moment the Join leaves: a backoff before it is time
		// the node may have gone without deliveries (replay.go).
		fill = func(j *pb.Join) { j.ReplayMs = sub.replayMs() }
	}
	stream, fr, ack, err := s.joinFilled(ctx, peer, sub.spec, join, fill)
	sub.judge.rootTerms(peer, ack, err)
	if err != nil {
		s.trace(Event{Kind: EventParent, Cohort: sub.spec.String(), Peer: peer, Status: statusOf(err), Err: err})
		return err
	}
	if err := ackRefused(sub.root, peer, ack, cand); err != nil {
		_ = stream.Reset()
		return err
	}
	p, err := sub.adopt(peer, underlays, stream, join, ack)
	if err != nil {
		return err
	}
	cs := p.cs
	if cs.codec == codecEnvelope {
		s.reg.addRelay(sub)
	}
	s.trace(Event{Kind: EventParent, Cohort: sub.spec.String(), Peer: peer, Status: pb.Status_OK.String()})
	return cs.run(func(fr *frameReader) error { return sub.readOne(cs, fr, sub.control(p)) }, fr, func() { sub.lost(p) })
}

// ackRefused is why a node refuses the parent peer that answered ack, as
// the candidate cand if one named it, in the cohort rooted at root; nil if
// it does not.
func ackRefused(root, peer swarm.Address, ack *pb.Ack, cand *pb.Candidate) error {
	switch {
	case ack.GetDepth() >= maxDepth-1:
		return fmt.Errorf("bps: %s at depth %d: %w", peer, ack.GetDepth(), errTooDeep)
	case cand == nil && ack.GetDepth() != 0:
		// Reached directly, not through a candidate: the broker the
		// application named, or the one a repair rejoins at. Nothing but
		// its own Ack states a depth for it, and the only depth the child
		// can check is the one it reached it at — the root's, 0. A node
		// stating more would price what the child writes up at up to 63 ×
		// (docs/protocol.md, "Threat model").
		return fmt.Errorf("bps: %s at depth %d, reached as the root: %w", peer, ack.GetDepth(), errNotAsReached)
	case ack.GetDepth() == 0 && !peer.Equal(root):
		// Only the cohort's root states depth 0: a node that does not
		// follow the cohort answers a Join as a root of its own, with
		// nothing to deliver (a candidate naming any node: docs/protocol.md,
		// "Threat model").
		return fmt.Errorf("bps: %s: %w", peer, errFalseRoot)
	case cand != nil && ack.GetDepth() > cand.GetDepth():
		// A candidate states the larger of the probe's depth and its
		// rank, its Ack the rank: an Ack deeper than the candidate is a
		// node that is not where its candidate said — named from outside
		// the subtree that was probed (docs/protocol.md, "Join by probe").
		return fmt.Errorf("bps: %s at depth %d, offered at %d: %w", peer, ack.GetDepth(), cand.GetDepth(), errNotAsOffered)
	}
	return nil
}

// adopt makes the stream to peer, which answered join with ack, a parent:
// its observers are told, and the claims this node forwards go up it
// first. What the candidate said in the probe, its Ack says again, and the
// Ack is what this node's rank follows: checked, and the parent taken,
// with no child's Ack between (rmu). A refused stream is reset.
func (sub *Subscription) adopt(peer swarm.Address, underlays [][]byte, stream p2p.Stream, join *pb.Join, ack *pb.Ack) (*parent, error) {
	sub.rmu.Lock()
	sub.mu.Lock()
	rl, offering := sub.relayLocked(), sub.offers.holding(time.Now())
	sub.mu.Unlock()
	leaf := !offering && (rl == nil || !rl.acked())
	if !sub.mayAttachUnder(ack.GetDepth(), peer) {
		sub.rmu.Unlock()
		_ = stream.Reset()
		return nil, fmt.Errorf("bps: %s at depth %d: %w", peer, ack.GetDepth(), errNotAbove)
	}
	cs := &clientStream{}
	*cs = newClientStream(sub.s, peer, sub.spec, stream, ack.GetDepth())
	cs.codec = negotiated(join, ack)
	p := &parent{cs: cs, underlays: underlays, lz: lazyOf(join, ack, cs.codec)}
	sub.mu.Lock()
	sub.rmu.Unlock() // the parent is in before mu is let go
	if over := sub.closing || sub.fatal != nil; over || sub.hasParentLocked(peer) {
		sub.mu.Unlock()
		_ = stream.Reset()
		if over {
			return nil, ErrClosed
		}
		return nil, errDuplicateParent
	}
	sub.gen++
	p.gen = sub.gen
	sub.parents = append(sub.parents, p)
	for _, o := range sub.observers {
		o.added(p)
	}
	sub.pstate.changedLocked(sub, nil, nil)
	sub.routeTo(p) // before anything this node forwards up p
	if leaf {
		sub.rank = belowDeepestOf(sub.parents)
	}
	sub.mu.Unlock()
	return p, nil
}

// statusOf names a join's failure for the trace.
func statusOf(err error) string {
	switch {
	case errors.Is(err, ErrFull):
		return pb.Status_FULL.String()
	case errors.Is(err, ErrRejected):
		return pb.Status_REJECTED.String()
	}
	return "error"
}

func (sub *Subscription) need() int {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return max(0, sub.want-len(sub.parents))
}

func (sub *Subscription) hasParent(peer swarm.Address) bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.hasParentLocked(peer)
}

func (sub *Subscription) hasParentLocked(peer swarm.Address) bool {
	for _, p := range sub.parents {
		if p.cs.peer.Equal(peer) {
			return true
		}
	}
	return false
}

// lost handles the end of a parent stream, on its reader goroutine after
// the reader returned.
func (sub *Subscription) lost(p *parent) {
	s := sub.s
	err := p.cs.err
	sub.mu.Lock()
	defer sub.unlock()
	sub.parents = slices.DeleteFunc(sub.parents, func(q *parent) bool { return q == p })
	sub.pstate.changedLocked(sub, p, err)
	for _, o := range sub.observers {
		o.lost(p, sub.closing || sub.fatal != nil) // a lazy parent takes over at once (lazy.go)
	}
	switch {
	case sub.closing || sub.fatal != nil:
	case errors.Is(err, ErrEndOfStream):
		sub.fatal = err
		sub.stopLocked()
	case s.closed():
		sub.fatal = ErrClosed
		sub.stopLocked()
	case p.moved.Load():
		// moved: the new parent is attached already
	case len(sub.parents) == 0 && p.cs.peer.Equal(sub.root):
		// The broker itself was the only parent: its end is the
		// subscription's, as in SWIP-60 (whoever subscribed decides
		// whether to join again).
		sub.fatal = err
		if err == nil {
			sub.fatal = errRootClosed
		}
	default:
		s.metrics.ParentLost.Inc()
		s.trace(Event{Kind: EventParentLost, Cohort: sub.spec.String(), Peer: p.cs.peer, Err: err})
		if len(sub.parents) == 0 {
			sub.faults.Add(1)
			s.metrics.Faults.Inc()
			s.trace(Event{Kind: EventFault, Cohort: sub.spec.String(), Peer: p.cs.peer, Err: err})
			// The rejoin goes to the broker at once: a backoff its
			// refusals of this node's routine requests for a second
			// parent imposed (FULL: no room then, up to BackoffMax) is
			// news from before the loss — the dead parent's slot may be
			// free now — and waited out it would cut the node, and its
			// subtree, off for longer than a replay covers (replay.go).
			s.backoff.succeed(sub.root.ByteString() + sub.spec.key)
		}
		// A loss repairs now: a retry armed for a second parent the tree
		// had no room for (up to maxRepairWait away) must not hold it.
		if sub.retry != nil {
			sub.retry.Stop()
			sub.retry = nil
		}
		sub.nextRetry = 0
		if sub.round != nil {
			// A round under way, for a second parent, may be waiting on
			// the backoff of the parent just lost or of the survivor:
			// it ends, and the repair looks again with what is left.
			sub.round()
		}
		sub.repairLocked()
	}
	sub.finishLocked()
}

// stopLocked ends every parent stream left; the caller holds sub.mu.
func (sub *Subscription) stopLocked() {
	sub.qonce.Do(func() { close(sub.quit); sub.cancel() })
	if sub.retry != nil {
		sub.retry.Stop()
		sub.retry = nil
	}
	sub.judge.stop()
	for _, q := range sub.parents {
		q.cs.closeOnce()
	}
}

// finishLocked ends the subscription once nothing can deliver any more:
// it is over, no parent stream is left and no repair runs. Its deliveries
// end when the caller lets sub.mu go (unlock).
func (sub *Subscription) finishLocked() {
	if sub.finished != running || len(sub.parents) > 0 || sub.repairing || (!sub.closing && sub.fatal == nil) {
		return
	}
	sub.finished = ending
	sub.qonce.Do(func() { close(sub.quit); sub.cancel() })
	if sub.retry != nil {
		sub.retry.Stop()
		sub.retry = nil
	}
	sub.judge.stop()
	if !errors.Is(sub.fatal, ErrClosed) && sub.fatal != errRootClosed {
		sub.err = sub.fatal // nil if closed by us, by the Service, or cleanly by the broker
	}
	if !sub.leaving {
		// A graceful leave drops its children once they moved; otherwise
		// now — off sub.mu: the registry's lock comes before it.
		// If the Service is closing it resets every stream itself.
		_ = sub.s.goOwned(func() { sub.s.reg.dropRelay(sub) })
	}
}

// finishing is how far a subscription has finished.
type finishing uint8

const (
	running finishing = iota
	ending            // over: its deliveries end when sub.mu is let go
	ended
)

// unlock lets sub.mu go and then, if the subscription finished under it,
// ends its deliveries (no reader is left) and closes done. This is the one
// place a Subscription takes the receiver's dmu outside a delivery, and it
// holds no lock of its own then: taking a delivery holds dmu and may take
// sub.mu (the lock order is dmu, sub.mu, then the observers' own).
func (sub *Subscription) unlock() {
	end := sub.finished == ending
	if end {
		sub.finished = ended
	}
	sub.mu.Unlock()
	if end {
		sub.receiver.end(sub.lz.stop)
		close(sub.done)
	}
}

// repairLocked starts the repair goroutine if the subscription lacks
// parents and neither a repair runs nor a retry is armed; the caller holds
// sub.mu. A node whose one parent is the broker wants no second: the root
// is the cohort's single point of failure whatever else a child holds, and
// a sibling as a second parent would double its traffic to guard a link.
func (sub *Subscription) repairLocked() {
	if sub.repairing || sub.retry != nil || len(sub.parents) >= sub.want || sub.closing || sub.fatal != nil {
		return
	}
	if len(sub.parents) == 1 && sub.parents[0].cs.peer.Equal(sub.root) {
		return
	}
	sub.repairing = true
	if !sub.s.goOwned(sub.repair) {
		sub.repairing = false
		sub.fatal = ErrClosed
		sub.stopLocked()
	}
}

// retryLocked arms the next repair after wait, doubling the wait for the
// next time up to maxRepairWait; the caller holds sub.mu. The first wait
// is the shortest backoff: a single-parented node's next failure is not
// masked, and a tree that had no room a moment ago often has it now (a
// crashed relay's children reattached, a restarted node offers slots).
func (sub *Subscription) retryLocked() {
	wait := sub.nextRetry
	if wait == 0 {
		wait = sub.s.opts.BackoffMin
	}
	sub.nextRetry = min(2*wait, maxRepairWait)
	sub.retry = time.AfterFunc(wait, func() {
		sub.mu.Lock()
		defer sub.mu.Unlock()
		sub.retry = nil
		sub.repairLocked()
	})
}

// maxRepairWait bounds the wait between a single-parented node's requests
// for a second parent the tree could not offer.
const maxRepairWait = 10 * time.Minute

// repair acquires the parents the subscription lacks: a second one by
// asking the surviving parent where else to attach (then, if that offers
// nothing usable, the broker), both by rejoining from the broker (SWIP-61:
// self-healing is the join protocol re-run). Where the tree offers no
// second parent it tries again later, on a timer.
func (sub *Subscription) repair() {
	s := sub.s
	rejoins, shed := 0, false
	for {
		sub.mu.Lock()
		n := len(sub.parents)
		if sub.closing || sub.fatal != nil || n >= sub.want || (n == 1 && sub.parents[0].cs.peer.Equal(sub.root)) {
			sub.repairing = false
			sub.finishLocked()
			sub.unlock()
			return
		}
		at := sub.root
		if n > 0 {
			at = sub.parents[0].cs.peer
		}
		ctx, cancel := context.WithTimeout(sub.ctx, s.opts.HandshakeTimeout+s.opts.ProbeWait)
		sub.round = cancel
		sub.mu.Unlock()

		err := sub.acquire(ctx, at, nil, n > 0, nil)
		if err != nil && n > 0 && !sub.hasParent(sub.root) {
			// Nothing usable below the surviving parent: the broker may
			// have room (the lost relay's slot, say), or a shallower
			// subtree.
			err = sub.acquire(ctx, sub.root, nil, false, nil)
		}
		cancel()
		if err == nil {
			sub.mu.Lock()
			sub.nextRetry = 0
			sub.mu.Unlock()
			continue
		}
		if !sub.repairFailed(err, n, &rejoins, &shed) {
			return
		}
	}
}

// repairFailed decides what a repair does after a round that found no
// parent, n parents had when it began: it reports whether the repair goes
// on. A relay left parentless sheds its children once (shed); a
// single-parented node asks again later; a parentless one rejoins, up to
// maxRejoins (rejoins), and then the subscription ends.
func (sub *Subscription) repairFailed(err error, n int, rejoins *int, shed *bool) bool {
	sub.mu.Lock()
	if len(sub.parents) == 0 && n == 0 && sub.relay != nil && !*shed && !sub.closing && sub.fatal == nil {
		// Parentless, and no parent ranked above this relay took it:
		// the free slots may all lie in its own subtree. Its children
		// get nothing from it meanwhile; it lets them go (each
		// repairs through its other parent) and rejoins as a leaf,
		// which may attach anywhere. Once per repair.
		*shed = true
		sub.mu.Unlock()
		sub.s.reg.dropRelay(sub)
		return true
	}
	switch {
	case len(sub.parents) > 0:
		// single-parented: ask again later
		sub.repairing = false
		if !sub.closing && sub.fatal == nil {
			sub.retryLocked()
		}
		sub.mu.Unlock()
		return false
	case n == 0:
		if *rejoins++; *rejoins >= maxRejoins || errors.Is(err, ErrClosed) || errors.Is(err, ErrRejected) {
			if sub.fatal == nil && !sub.closing {
				sub.fatal = fmt.Errorf("%w: %w", errBothLost, err)
			}
			sub.repairing = false
			sub.finishLocked()
			sub.unlock()
			return false
		}
	}
	sub.mu.Unlock()
	return true
}

// depth is this node's depth in the cohort as it states it to its children
// and in probes: its rank (mayAttachUnder) — one below its deepest
// parent's stated depth when it attached as a leaf, kept while it has
// children.
func (sub *Subscription) depth() uint32 {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if len(sub.parents) == 0 {
		return math.MaxUint32 // nothing to relay: a joiner refuses it
	}
	return sub.rank
}

// belowDeepestOf is the rank of a leaf whose parents are parents: one
// below the deepest of their stated depths.
func belowDeepestOf(parents []*parent) uint32 {
	return belowDeepest(func(yield func(uint32) bool) {
		for _, p := range parents {
			if !yield(p.cs.stated) {
				return
			}
		}
	})
}

// describe fills in what the subscription knows of its place: its parents'
// lag, its probe, reparent and withholding counts.
func (sub *Subscription) describe(p *Position) {
	lag := sub.judge.lags()
	p.Lag = make([]int, len(p.Parents))
	for i, a := range p.Parents {
		p.Lag[i] = lag[a.ByteString()]
	}
	p.Probes, p.Reparents, p.Withheld = sub.probes.Load(), sub.reparents.Load(), sub.judge.withheld.Load()
}

// Parents lists the overlays of the subscription's parents now.
func (sub *Subscription) Parents() []swarm.Address {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	out := make([]swarm.Address, 0, len(sub.parents))
	for _, p := range sub.parents {
		out = append(out, p.cs.peer)
	}
	return out
}

// sendUp pushes f, which this node relays rootward (relay.go, lease.go),
// up every parent stream that speaks the envelope (SWIP-61: publish up
// both parents), and reports how many took it; a full queue drops it there.
func (sub *Subscription) sendUp(f outFrame) int {
	sub.mu.Lock()
	parents := slices.Clone(sub.parents)
	sub.mu.Unlock()
	n := 0
	for _, p := range parents {
		if p.cs.codec != codecEnvelope {
			continue
		}
		if p.cs.push(sub.s, f) {
			n++
		}
	}
	return n
}

// observer is told, each in one place, what happens to a subscription's
// parents and deliveries: the judge (judge.go) and lazy push (lazy.go)
// keep their own state from it under their own locks, as go-libp2p-pubsub's
// tracers do from its RawTracer feed.
type observer interface {
	// added and lost are told, under sub.mu, a parent taken and a parent
	// lost; over: the subscription is closing or over.
	added(p *parent)
	lost(p *parent, over bool)
	// took is told, under the receiver's dmu, every valid delivery parent
	// stream from gave and its FrameKey; dup: one taken before from
	// another parent.
	took(from *clientStream, pub publication, b *pb.Broadcast, key [32]byte, dup bool)
}

// took is told every valid delivery under the receiver's dmu (its onTake):
// a new one is fanned out to this node's children, if it relays (relay.go);
// then every observer is told.
func (sub *Subscription) took(from *clientStream, pub publication, b *pb.Broadcast, key [32]byte, dup bool) {
	if !dup {
		now := time.Now()
		sub.lastTake.Store(now.UnixNano())
		sub.mu.Lock()
		rl := sub.relayLocked()
		if rl == nil && pub.service == nil {
			sub.rememberLocked(b, now) // a relay's, as it fans it out
		}
		sub.mu.Unlock()
		if rl != nil {
			rl.deliver(pub, b, now)
		}
	}
	for _, o := range sub.observers {
		o.took(from, pub, b, key, dup)
	}
}

// Close ends the subscription and waits for it. A relay leaves gracefully
// (SWIP-61): it first closes its own parent streams, which frees its slots
// there, then sends each child a Reparent toward its first parent and waits,
// at most closeWait, for them to move — each child keeps receiving through
// its other parent meanwhile and drops this node only once its new parent's
// stream is live. The children that did not move are then reset.
func (sub *Subscription) Close() error {
	sub.mu.Lock()
	if sub.closing || sub.finished != running {
		sub.mu.Unlock()
		<-sub.done
		return nil
	}
	sub.closing = true
	rl := sub.relayLocked()
	var to *parent
	if len(sub.parents) > 0 {
		to = sub.parents[0]
	}
	leaving := rl != nil && to != nil
	sub.leaving = leaving
	sub.stopLocked()
	parents := slices.Clone(sub.parents)
	sub.finishLocked()
	sub.unlock()

	deadline := time.Now().Add(closeWait)
	if leaving {
		// The parents have detached this node once they closed their
		// side: its slots there are free for the children it sends.
		for _, p := range parents {
			if !waitUntil(p.cs.done, deadline) {
				_ = p.cs.stream.Reset()
				<-p.cs.done
			}
		}
		rl.reparentAll(to.cs.peer, to.underlays, closeWait)
		sub.s.reg.dropRelay(sub)
	}
	if waitUntil(sub.done, deadline) {
		return nil
	}
	for _, p := range parents {
		_ = p.cs.stream.Reset()
	}
	<-sub.done
	return fmt.Errorf("bps: close: a parent did not end the stream within %s", closeWait)
}

// waitUntil waits for done until deadline and reports whether it came.
func waitUntil(done <-chan struct{}, deadline time.Time) bool {
	t := time.NewTimer(delay.Positive(time.Until(deadline)))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Done is closed when the subscription has ended.
func (sub *Subscription) Done() <-chan struct{} { return sub.done }

// Err is why the subscription ended: nil if it was closed by us. Valid
// once C is closed (C closes just before Done), and after Done is closed.
func (sub *Subscription) Err() error {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	if sub.finished == running {
		return nil
	}
	return sub.err
}

// Broker is the overlay of the cohort's broker, where the subscription
// joined.
func (sub *Subscription) Broker() swarm.Address { return sub.root }

// Spec is the cohort subscribed to.
func (sub *Subscription) Spec() *Spec { return sub.spec }

// control handles a frame other than a delivery that parent p sent down: a
// probe is answered, a reparent followed; nothing else may travel down.
func (sub *Subscription) control(p *parent) func(cs *clientStream, f *pb.Frame) error {
	return func(cs *clientStream, f *pb.Frame) error {
		switch k := f.Kind.(type) {
		case *pb.Frame_Probe:
			sub.answerProbe(p, k.Probe)
			return nil
		case *pb.Frame_Reparent:
			sub.mu.Lock()
			if !sub.closing && sub.fatal == nil {
				sub.lz.leaving(p) // a leaving parent takes nothing more (lazy.go)
			}
			sub.mu.Unlock()
			sub.reparent(p, k.Reparent)
			return nil
		case *pb.Frame_Announce:
			return sub.lz.announced(p, k.Announce)
		case *pb.Frame_Leased:
			return sub.leased(p, k.Leased)
		default:
			return fmt.Errorf("%w: a %T frame travelled down", errMalformed, f.Kind)
		}
	}
}

// Reasons a node refuses a parent it was pointed at.
var (
	errOwnChild     = errors.New("the target is this node's own child")
	errShunned      = errors.New("the target was dropped for withholding, or sent a reparent this node did not follow")
	errTooDeep      = errors.New("the parent states a depth past the bound")
	errNotAbove     = errors.New("the parent is not above this node, which has children: it may be a descendant")
	errFalseRoot    = errors.New("the parent states depth 0 but is not the cohort's root")
	errNotAsOffered = errors.New("the parent states a depth below the one its candidate stated")
	errNotAsReached = errors.New("the parent was reached as the cohort's root, not through a candidate, and states a depth other than 0")
)

// maxDepth bounds the depth a node accepts a parent at: a parent stating
// maxDepth-1 or more is refused. A tree of relays of capacity 2 reaches
// a million nodes at depth 20; the bound keeps a lying or looping chain
// finite.
const maxDepth = 64

// unfitParent reports why this node must not attach to peer, a node a
// Reparent named, as far as it can tell: one of its own children (a cycle),
// or a parent it dropped for withholding.
func (sub *Subscription) unfitParent(peer swarm.Address) error {
	if sub.judge.shuns(peer) {
		return errShunned
	}
	if sub.isChild(peer) {
		return errOwnChild
	}
	return nil
}

// moveBelow attaches at to, a node parent p named in a Reparent (at
// underlays, if it named them), beside the parents the node has. A relay
// leaving sends its children to its own parent, whose key (stated depth,
// overlay) is below its own ("No cycles"): a target whose key is not below
// that of the parent that named it is refused, so every move a Reparent
// makes is rootward, and a parent cannot move its children around the
// tree (to colluders, back and forth) without end.
func (sub *Subscription) moveBelow(ctx context.Context, p *parent, to swarm.Address, underlays [][]byte) error {
	above := p.cs.stated
	if to.Compare(p.cs.peer) >= 0 {
		if above == 0 {
			return errNotAbove
		}
		above-- // at its rank only with a smaller overlay
	}
	sub.mu.Lock()
	sub.want++ // room for the new parent beside the old one, for the overlap
	sub.mu.Unlock()
	err := sub.acquire(ctx, to, underlays, false, &pb.Candidate{Overlay: to.Bytes(), Depth: above})
	sub.mu.Lock()
	sub.want--
	sub.mu.Unlock()
	return err
}

// reparent follows a Reparent from parent p, make-before-break: the node
// attaches at the named node and only then drops p's stream. A target
// that is already a parent (the sister) needs no new stream.
func (sub *Subscription) reparent(p *parent, rp *pb.Reparent) {
	s := sub.s
	to := swarm.NewAddress(rp.To)
	if len(rp.To) != swarm.HashSize || to.Equal(s.overlay) {
		return
	}
	if len(rp.Underlays) > maxUnderlays || !p.moving.CompareAndSwap(false, true) {
		return // moving already: one reparent per parent stream
	}
	underlays := rp.Underlays
	if !s.goOwned(func() {
		ctx, cancel := context.WithTimeout(sub.ctx, s.opts.HandshakeTimeout+s.opts.ProbeWait)
		defer cancel()
		reason := errReparent
		if err := sub.unfitParent(to); err != nil {
			// A target this node can tell is wrong is refused; the
			// parent that named it is left all the same.
			reason = fmt.Errorf("bps: reparent to %s refused: %w", to, err)
			s.trace(Event{Kind: EventReparent, Cohort: sub.spec.String(), Peer: to, Err: reason})
		} else if !sub.hasParent(to) {
			if err := sub.moveBelow(ctx, p, to, underlays); err != nil {
				// The old stream ends all the same; the subscription
				// repairs as after any lost parent.
				reason = fmt.Errorf("bps: reparent to %s failed: %w", to, err)
				s.trace(Event{Kind: EventReparent, Cohort: sub.spec.String(), Peer: to, Err: reason})
			} else {
				s.metrics.Reparents.Inc()
				sub.reparents.Add(1)
				s.trace(Event{Kind: EventReparent, Cohort: sub.spec.String(), Peer: to})
			}
		}
		if reason == errReparent {
			p.moved.Store(true)
			p.cs.closeOnce()
			return
		}
		// Refused or not followed: shunned for a while, so that a
		// repair the root refers to it again takes another candidate.
		sub.judge.refusedReparent(p.cs.peer)
		p.cs.kill(reason)
	}) {
		p.moving.Store(false)
	}
}

// offerSlot reserves one of this relay's free child slots for joiner's
// probe (probe.go) if one is not offered to another joiner yet, and returns
// the cohort this node relays (nil before its first child). capacity is the
// relay's capacity; the cohort's fan-out is read under its own lock, never
// under sub.mu (the order is c.mu before sub.mu).
func (sub *Subscription) offerSlot(now time.Time, ttl time.Duration, joiner swarm.Address, capacity int) (c *cohort, offered bool) {
	sub.mu.Lock()
	c = sub.relay
	sub.mu.Unlock()
	fanout := 0
	if c != nil {
		c.mu.Lock()
		fanout = c.fanout
		c.mu.Unlock()
	}
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return c, sub.offers.take(now, now.Add(ttl), joiner, capacity-fanout, fanout)
}
