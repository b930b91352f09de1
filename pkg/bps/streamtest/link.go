// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultRetransmitDelay is how much later a lost write arrives unless the
// LinkConfig says otherwise: Linux's minimum TCP retransmission timeout.
const DefaultRetransmitDelay = 200 * time.Millisecond

// LinkConfig is the transport of one link, the same in both directions. The
// zero value is an ideal link: a write is readable as soon as it returns.
//
// Delays are not slept by anyone: every write is stamped with the time it
// becomes readable on the link's virtual schedule, and a reader waits for the
// stamp of the oldest bytes it has not read. Nothing costs a goroutine or a
// timer per write; a stream that has bytes in flight holds one timer.
type LinkConfig struct {
	// Latency is the one-way delay of every write.
	Latency time.Duration
	// Bandwidth caps each direction of the link in bytes per second; 0 is
	// unlimited. The streams on a link share it: their writes are
	// transmitted one after the other.
	Bandwidth int64
	// Loss is the probability in [0, 1] that a write is lost on the wire.
	// Streams are reliable, as libp2p's are: a lost write is retransmitted
	// and arrives RetransmitDelay later, and the later writes of the same
	// stream wait behind it (head-of-line blocking; other streams on the
	// link are not held up, as over QUIC or yamux).
	Loss float64
	// RetransmitDelay is the extra delay of a lost write; zero is
	// DefaultRetransmitDelay.
	RetransmitDelay time.Duration
	// Jitter adds to each write's latency a delay in [0, Jitter), spread
	// uniformly: a hash of the Network's seed, the link, the direction and
	// the bytes written, so that the same write over the same link is
	// delayed the same in every run of a seed, whatever else the run did
	// and in whatever order. A stream's bytes still arrive in order: a
	// write never overtakes the one before it.
	Jitter time.Duration
}

// normalised clamps c into range.
func (c LinkConfig) normalised() LinkConfig {
	c.Latency = max(c.Latency, 0)
	c.Bandwidth = max(c.Bandwidth, 0)
	c.Loss = min(max(c.Loss, 0), 1)
	c.Jitter = max(c.Jitter, 0)
	if c.RetransmitDelay <= 0 {
		c.RetransmitDelay = DefaultRetransmitDelay
	}
	return c
}

// ideal reports whether c delays nothing.
func (c LinkConfig) ideal() bool {
	return c.Latency == 0 && c.Bandwidth == 0 && c.Loss == 0 && c.Jitter == 0
}

// transmission is how long size bytes take at bw bytes per second.
func transmission(size int, bw int64) time.Duration {
	if bw <= 0 {
		return 0
	}
	return time.Duration(int64(size) * int64(time.Second) / bw)
}

// linkKey identifies the link between two nodes regardless of who dialed.
type linkKey struct{ lo, hi string }

func keyOf(a, b *Node) linkKey {
	x, y := a.overlay.ByteString(), b.overlay.ByteString()
	if x > y {
		x, y = y, x
	}
	return linkKey{lo: x, hi: y}
}

func (d *DirectionStats) add(o DirectionStats) {
	d.Bytes += o.Bytes
	d.Writes += o.Writes
	d.Lost += o.Lost
}

// link is the connection between two nodes: the streams opened over it, the
// context their handlers run on, its transport and its counters.
//
// A link keeps its own clock for the schedule, link time: real time minus
// the time the link spent partitioned. While a partition holds, link time
// stands still, so nothing sent over it becomes readable; when it heals,
// everything in flight resumes where it stopped, and what was written
// meanwhile leaves as if it had been written at the heal.
type link struct {
	key    linkKey
	a, b   *Node // a dialed b
	ctx    context.Context
	cancel context.CancelFunc

	// timed is set while writes must be stamped: a non-ideal config or a
	// partition. Read without a lock on every write.
	timed atomic.Bool

	// Streams count their own traffic under their lock; a stream's counts
	// move into retired when it leaves the link, so that the link's totals
	// are exact without a shared counter on every write.
	mu      sync.Mutex // guards closed, streams, retired, drained; taken before conn.mu
	closed  bool
	streams map[*conn]struct{}
	retired [2]DirectionStats // [0] a→b, [1] b→a: streams that left
	drained chan struct{}     // closed when streams empties; nil if nobody waits

	smu      sync.Mutex // leaf: guards the schedule below
	cfg      LinkConfig
	rng      *rand.Rand
	salt     [2][16]byte  // per direction: the seed and the link, for Jitter
	busy     [2]time.Time // per direction, in link time: when its last write finishes transmitting
	paused   bool
	pausedAt time.Time     // real time the partition began
	offset   time.Duration // time spent partitioned before the current partition
	healed   chan struct{} // closed when the current partition heals
}

func newLink(parent context.Context, a, b *Node, cfg LinkConfig, seed int64) *link {
	ctx, cancel := context.WithCancel(parent)
	l := &link{
		key:     keyOf(a, b),
		a:       a,
		b:       b,
		ctx:     ctx,
		cancel:  cancel,
		streams: make(map[*conn]struct{}),
		cfg:     cfg.normalised(),
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(l.key.lo))
	_, _ = h.Write([]byte(l.key.hi))
	l.rng = rand.New(rand.NewPCG(uint64(seed), h.Sum64()))
	for dir := range l.salt {
		binary.BigEndian.PutUint64(l.salt[dir][:8], uint64(seed))
		binary.BigEndian.PutUint64(l.salt[dir][8:], h.Sum64()+uint64(dir))
	}
	l.timed.Store(!l.cfg.ideal())
	return l
}

func (l *link) other(nd *Node) *Node {
	if nd == l.a {
		return l.b
	}
	return l.a
}

// flowFrom is the index of the direction nd writes on.
func (l *link) flowFrom(nd *Node) int {
	if nd == l.a {
		return 0
	}
	return 1
}

// open registers c on the link and runs start while the link is known to be
// up, so that nothing starts on a link that close has already torn down. It
// reports false if the link is closed.
func (l *link) open(c *conn, start func()) bool {
	l.mu.Lock()
	defer l.mu.Unlock()

	if l.closed {
		return false
	}
	l.streams[c] = struct{}{}
	start()
	return true
}

// remove forgets a stream that was reset or closed by both ends.
func (l *link) remove(c *conn) {
	l.mu.Lock()
	if _, ok := l.streams[c]; ok {
		delete(l.streams, c)
		l.retire(c)
	}
	if len(l.streams) == 0 && l.drained != nil {
		close(l.drained)
		l.drained = nil
	}
	l.mu.Unlock()
}

// whenDrained returns a channel that is closed once no stream is open on the
// link.
func (l *link) whenDrained() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.streams) == 0 {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	if l.drained == nil {
		l.drained = make(chan struct{})
	}
	return l.drained
}

// retire adds a stream's counts to the link's; the caller holds l.mu.
func (l *link) retire(c *conn) {
	for dir := range l.retired {
		l.retired[dir].add(c.traffic(dir))
	}
}

// stats returns what the link carried in each direction, [0] a→b and [1]
// b→a.
func (l *link) stats() [2]DirectionStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.retired
	for c := range l.streams {
		for dir := range st {
			st[dir].add(c.traffic(dir))
		}
	}
	return st
}

// trafficOf is what the link carried, seen from nd.
func (l *link) trafficOf(nd *Node) Traffic {
	st := l.stats()
	out := l.flowFrom(nd)
	return Traffic{Out: st[out], In: st[1-out]}
}

// conns returns the streams open on the link.
func (l *link) conns() []*conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	cs := make([]*conn, 0, len(l.streams))
	for c := range l.streams {
		cs = append(cs, c)
	}
	return cs
}

// close cancels the handlers' context and resets every stream on the link.
func (l *link) close() {
	l.mu.Lock()
	l.closed = true
	streams := l.streams
	l.streams = nil
	if l.drained != nil {
		close(l.drained)
		l.drained = nil
	}
	l.mu.Unlock()

	l.cancel()
	for c := range streams {
		c.reset()
	}
	l.mu.Lock()
	for c := range streams {
		l.retire(c)
	}
	l.mu.Unlock()
	l.smu.Lock()
	if l.paused {
		close(l.healed) // a NewStream waiting for the heal gives up
		l.paused = false
	}
	l.smu.Unlock()
}

// configure replaces the link's transport; bytes already in flight keep
// their stamps.
func (l *link) configure(cfg LinkConfig) {
	l.smu.Lock()
	defer l.smu.Unlock()
	l.cfg = cfg.normalised()
	l.timed.Store(l.paused || !l.cfg.ideal())
}

// config returns the link's transport.
func (l *link) config() LinkConfig {
	l.smu.Lock()
	defer l.smu.Unlock()
	return l.cfg
}

// nowLocked is the link time at real time now; the caller holds l.smu.
func (l *link) nowLocked(now time.Time) time.Time {
	if l.paused {
		now = l.pausedAt
	}
	return now.Add(-l.offset)
}

// clock returns the current link time, and the offset that turns a link time
// into real time; ok is false while a partition holds, when no link time
// passes.
func (l *link) clock() (now time.Time, offset time.Duration, ok bool) {
	t := time.Now()
	l.smu.Lock()
	defer l.smu.Unlock()
	return l.nowLocked(t), l.offset, !l.paused
}

// schedule stamps a write of size bytes in direction dir that the writing
// node's uplink lets go after extra: it returns the link time at which the
// bytes become readable and whether the write was lost (and retransmitted).
func (l *link) schedule(dir int, b []byte, extra time.Duration) (at time.Time, lost bool) {
	size := len(b)
	t := time.Now()
	l.smu.Lock()
	defer l.smu.Unlock()

	start := l.nowLocked(t).Add(extra)
	if l.cfg.Bandwidth > 0 {
		start = maxTime(start, l.busy[dir]).Add(transmission(size, l.cfg.Bandwidth))
		l.busy[dir] = start
	}
	at = start.Add(l.cfg.Latency)
	if l.cfg.Jitter > 0 {
		h := fnv.New64a()
		_, _ = h.Write(l.salt[dir][:])
		_, _ = h.Write(b)
		at = at.Add(time.Duration(h.Sum64() % uint64(l.cfg.Jitter)))
	}
	if l.cfg.Loss > 0 && l.rng.Float64() < l.cfg.Loss {
		at = at.Add(l.cfg.RetransmitDelay)
		lost = true
	}
	return at, lost
}

// eofAt is the link time at which a close written now reaches the other end.
func (l *link) eofAt() time.Time {
	t := time.Now()
	l.smu.Lock()
	defer l.smu.Unlock()
	return l.nowLocked(t).Add(l.cfg.Latency)
}

// pause starts a partition: link time stops.
func (l *link) pause(now time.Time) {
	l.smu.Lock()
	defer l.smu.Unlock()
	if l.paused {
		return
	}
	l.paused = true
	l.pausedAt = now
	l.healed = make(chan struct{})
	l.timed.Store(true)
}

// resume heals a partition: link time runs again, and every reader waiting
// on the link is woken to look at its schedule.
func (l *link) resume(now time.Time) {
	l.smu.Lock()
	if !l.paused {
		l.smu.Unlock()
		return
	}
	l.paused = false
	l.offset += now.Sub(l.pausedAt)
	close(l.healed)
	l.timed.Store(!l.cfg.ideal())
	l.smu.Unlock()

	for _, c := range l.conns() {
		c.wake()
	}
}

// waitHealed blocks while a partition holds the link, until it heals, the
// link closes or ctx ends.
func (l *link) waitHealed(ctx context.Context) error {
	l.smu.Lock()
	paused, healed := l.paused, l.healed
	l.smu.Unlock()
	if !paused {
		return nil
	}
	select {
	case <-healed:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
