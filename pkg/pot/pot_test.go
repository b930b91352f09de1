// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package pot_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/storage"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/pot"
)

// TestSWIP65Example is the SWIP's figure: keys 0…4; n1 forks to n0 at the
// last bit, n3 to n1 and n2, n4 to n3 at the first bit where 4 differs
// from 3 (3-bit keys in the figure: PO 1, 2 and 0 there, 62, 63 and 61 in
// 64 bits).
func TestSWIP65Example(t *testing.T) {
	t.Parallel()
	f := build(t, 5, sequential, 1)
	forks := func(i int) map[int]swarm.Address {
		m := make(map[int]swarm.Address)
		for p := range pot.KeyBits {
			if r, ok := f.nodes[i].Fork(p); ok {
				m[p] = r
			}
		}
		return m
	}
	for i, want := range []map[int]swarm.Address{
		{},
		{63: f.refs[0]},
		{62: f.refs[1]},
		{62: f.refs[1], 63: f.refs[2]},
		{61: f.refs[3]},
	} {
		got := forks(i)
		if len(got) != len(want) {
			t.Fatalf("n%d forks %v, want %v", i, got, want)
		}
		for p, r := range want {
			if !got[p].Equal(r) {
				t.Fatalf("n%d fork %d = %s, want %s", i, p, got[p], r)
			}
		}
	}
}

// TestSWIP65Item2OneChunkPerInsert (SWIP-65 conformance item 2): each
// insert creates exactly one new chunk, the update's own node, and every
// fork of every node references an earlier update's chunk.
func TestSWIP65Item2OneChunkPerInsert(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(2, 2))
	f := newFeed()
	var prev uint64
	for i := range 500 {
		k := timestamps(r, i, prev)
		prev = k
		f.add(t, k, value(i))
		got := 0
		if err := f.store.Iterate(context.Background(), func(swarm.Chunk) (bool, error) { got++; return false, nil }); err != nil {
			t.Fatal(err)
		}
		if got != i+1 {
			t.Fatalf("after insert %d the store holds %d chunks, want %d", i, got, i+1)
		}
		n := f.nodes[i]
		for p := range pot.KeyBits {
			ref, ok := n.Fork(p)
			if ok && !slices.ContainsFunc(f.refs[:i], ref.Equal) {
				t.Fatalf("node %d: fork %d references %s, not an earlier update", i, p, ref)
			}
		}
	}
}

// TestSWIP65Item2AscendingIsHistory (SWIP-65 conformance item 2):
// ascending iteration from the latest update enumerates the full history
// in publication order, retrieving each node exactly once (n−1 retrievals:
// the latest is in hand); descending iteration is the reverse, at the same
// cost.
func TestSWIP65Item2AscendingIsHistory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kf   keyFunc
		n    int
	}{
		{"one", sequential, 1},
		{"two", sequential, 2},
		{"sequential", sequential, 1000},
		{"timestamps", timestamps, 1000},
		{"bursty", bursty, 777},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := build(t, tc.n, tc.kf, 3)
			top, ref := f.top(tc.n - 1)

			g := count(f.store)
			c := pot.Ascend(g, top, ref, 0)
			for i := 0; ; i++ {
				e, err := c.Next(context.Background())
				if errors.Is(err, io.EOF) {
					if i != tc.n {
						t.Fatalf("ascending: %d elements, want %d", i, tc.n)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if i >= tc.n || e.Key != f.keys[i] || !bytes.Equal(e.Value(), value(i)) || !e.Ref.Equal(f.refs[i]) {
					t.Fatalf("ascending element %d: key %d value %x, want key %d value %x", i, e.Key, e.Value(), f.keys[min(i, tc.n-1)], value(i))
				}
			}
			if g.n != tc.n-1 || c.Retrievals() != tc.n-1 {
				t.Fatalf("ascending: %d retrievals (%d counted), want %d", g.n, c.Retrievals(), tc.n-1)
			}
			if a, ok := g.twice(); ok {
				t.Fatalf("ascending retrieved %s twice", a)
			}

			g = count(f.store)
			d := pot.Descend(g, top, ref)
			for i := tc.n - 1; ; i-- {
				e, err := d.Next(context.Background())
				if errors.Is(err, io.EOF) {
					if i != -1 {
						t.Fatalf("descending stopped before element %d", i)
					}
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if i < 0 || e.Key != f.keys[i] || !bytes.Equal(e.Value(), value(i)) {
					t.Fatalf("descending element %d: key %d, value %x", i, e.Key, e.Value())
				}
			}
			if g.n != tc.n-1 {
				t.Fatalf("descending: %d retrievals, want %d", g.n, tc.n-1)
			}
			if a, ok := g.twice(); ok {
				t.Fatalf("descending retrieved %s twice", a)
			}
		})
	}
}

// TestSWIP65Item2SeekLogN (SWIP-65 conformance item 2): a lookup by key,
// and a seek to the first element at or after a key, cost O(log n)
// retrievals: a lookup at most one per bit in which the keys differ, that
// is ⌈log₂ n⌉ + 1 for keys 0 … n−1 and log₂ of the key range for
// timestamps, whatever n; a seek at most twice that. And the seek lands
// right: the first key at or above the one sought, the rest of the history
// in order after it.
func TestSWIP65Item2SeekLogN(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		kf   keyFunc
		n    int
	}{
		{"sequential-1024", sequential, 1024},
		{"sequential-4096", sequential, 4096},
		{"timestamps-4096", timestamps, 4096},
		{"bursty-2048", bursty, 2048},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := build(t, tc.n, tc.kf, 4)
			top, ref := f.top(tc.n - 1)
			levels := pot.KeyBits - pot.PO(f.keys[0], f.keys[tc.n-1]) + 1
			if f.keys[0] == 0 && f.keys[tc.n-1] == uint64(tc.n-1) { // sequential
				if want := bits.Len(uint(tc.n-1)) + 1; levels != want {
					t.Fatalf("bound %d, want ⌈log₂ n⌉ + 1 = %d", levels, want)
				}
			}
			r := rand.New(rand.NewPCG(5, 5))
			worst, total := 0, 0
			for range 300 {
				i := r.IntN(tc.n)
				e, n, err := pot.Lookup(ctx, f.store, top, ref, f.keys[i])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(e.Value(), value(i)) {
					t.Fatalf("lookup %d: value %x", f.keys[i], e.Value())
				}
				if n > levels {
					t.Fatalf("lookup %d: %d retrievals, more than %d", f.keys[i], n, levels)
				}
				worst, total = max(worst, n), total+n

				k := f.keys[0] + uint64(r.Int64N(int64(f.keys[tc.n-1]-f.keys[0]+1)))
				want := sort.Search(tc.n, func(j int) bool { return f.keys[j] >= k })
				c := pot.Ascend(f.store, top, ref, k)
				e, err = c.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if e.Key != f.keys[want] {
					t.Fatalf("seek %d: key %d, want %d", k, e.Key, f.keys[want])
				}
				if c.Retrievals() > 2*levels {
					t.Fatalf("seek %d: %d retrievals, more than %d", k, c.Retrievals(), 2*levels)
				}
				for j := want + 1; j < min(want+4, tc.n); j++ {
					if e, err = c.Next(ctx); err != nil || e.Key != f.keys[j] {
						t.Fatalf("after seek %d: key %d (%v), want %d", k, e.Key, err, f.keys[j])
					}
				}
			}
			t.Logf("n=%d: lookup retrievals worst %d, mean %.1f (bound %d; log2 n = %.1f)", tc.n, worst, float64(total)/300, levels, float64(bits.Len(uint(tc.n-1))))
			if _, _, err := pot.Lookup(ctx, f.store, top, ref, f.keys[tc.n-1]+1); !errors.Is(err, pot.ErrNotFound) {
				t.Fatalf("lookup past the newest: %v", err)
			}
			if e, _, err := pot.Seek(ctx, f.store, top, ref, f.keys[tc.n-1]+1); !errors.Is(err, io.EOF) {
				t.Fatalf("seek past the newest: %d, %v", e.Key, err)
			}
			if e, _, err := pot.Seek(ctx, f.store, top, ref, 0); err != nil || e.Key != f.keys[0] {
				t.Fatalf("seek 0: %d, %v", e.Key, err)
			}
		})
	}
}

// TestSerialization holds the version 1 layout byte by byte, and its
// round trip.
func TestSerialization(t *testing.T) {
	t.Parallel()
	f := build(t, 4, sequential, 6)
	n := f.nodes[3] // key 3: forks at 62 (n1) and 63 (n2)
	want := []byte{pot.Version}
	want = binary.BigEndian.AppendUint64(want, 3)
	want = binary.BigEndian.AppendUint64(want, 0b11)
	want = append(want, f.refs[1].Bytes()...)
	want = append(want, f.refs[2].Bytes()...)
	want = append(want, value(3)...)
	if !bytes.Equal(n.Bytes(), want) {
		t.Fatalf("serialization\n%x\nwant\n%x", n.Bytes(), want)
	}
	m, err := pot.Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(m.Bytes(), want) || m.Key() != 3 || m.Forks() != 2 {
		t.Fatalf("round trip: %x", m.Bytes())
	}
	ch, err := n.Chunk()
	if err != nil {
		t.Fatal(err)
	}
	if !ch.Address().Equal(f.refs[3]) || !cac.Valid(ch) {
		t.Fatal("the node's chunk is not its reference")
	}
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	good := build(t, 4, sequential, 7).nodes[3].Bytes()
	bad := func(mut func([]byte) []byte) []byte { return mut(slices.Clone(good)) }
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, pot.ErrMalformed},
		{"version 0", bad(func(b []byte) []byte { b[0] = 0; return b }), pot.ErrVersion},
		{"version 2", bad(func(b []byte) []byte { b[0] = 2; return b }), pot.ErrVersion},
		{"short header", good[:pot.HeaderSize-1], pot.ErrMalformed},
		{"short forks", good[:pot.HeaderSize+pot.RefSize+3], pot.ErrMalformed},
		{"fork where the key has a 0", bad(func(b []byte) []byte { b[16] |= 0b100; return b }), pot.ErrMalformed},
		{"larger than a chunk", append(bad(func(b []byte) []byte { return b }), make([]byte, swarm.ChunkSize)...), pot.ErrMalformed},
	} {
		if _, err := pot.Decode(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestInsertRefuses(t *testing.T) {
	t.Parallel()
	f := build(t, 3, sequential, 8)
	top, ref := f.top(2)
	for _, k := range []uint64{0, 2} {
		if _, err := pot.Insert(top, ref, k, nil); !errors.Is(err, pot.ErrNotMonotone) {
			t.Errorf("key %d after 2: %v", k, err)
		}
	}
	// key 3 after 2 keeps n2's fork at 62 and adds one at 63: two forks.
	if _, err := pot.Insert(top, ref, 3, make([]byte, pot.MaxValue(2)+1)); !errors.Is(err, pot.ErrTooLarge) {
		t.Errorf("a value past MaxValue: %v", err)
	}
	n, err := pot.Insert(top, ref, 3, make([]byte, pot.MaxValue(2)))
	if err != nil || len(n.Bytes()) != swarm.ChunkSize {
		t.Errorf("a value of MaxValue: %v", err)
	}
	if _, err := pot.Insert(top, swarm.ZeroAddress, 3, nil); err == nil {
		t.Error("an insert over a node without its reference")
	}
}

func TestTimeKey(t *testing.T) {
	t.Parallel()
	now := time.UnixMilli(1_780_000_000_000)
	for _, tc := range []struct{ prev, want uint64 }{
		{0, 1_780_000_000_000},
		{1_779_999_999_999, 1_780_000_000_000},
		{1_780_000_000_000, 1_780_000_000_001}, // same millisecond
		{1_780_000_000_500, 1_780_000_000_501}, // the clock stepped back
	} {
		if got := pot.TimeKey(now, tc.prev); got != tc.want {
			t.Errorf("TimeKey after %d = %d, want %d", tc.prev, got, tc.want)
		}
	}
}

// TestLoadVerifiesByHash: a node is taken only if it hashes to the
// reference that names it (the storage's fault otherwise, ErrUnavailable);
// a chunk that hashes right but is no node, or a node at a fork it does not
// belong to, is the publisher's (ErrMalformed, ErrInconsistent).
func TestLoadVerifiesByHash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := build(t, 8, sequential, 9)
	top, ref := f.top(7)

	tampered := storage.GetterFunc(func(ctx context.Context, a swarm.Address) (swarm.Chunk, error) {
		ch, err := f.store.Get(ctx, a)
		if err != nil || a.Equal(ref) {
			return ch, err
		}
		d := slices.Clone(ch.Data())
		d[len(d)-1] ^= 1
		return swarm.NewChunk(a, d), nil
	})
	if _, err := pot.Load(ctx, tampered, f.refs[3]); !errors.Is(err, pot.ErrUnavailable) {
		t.Fatalf("tampered chunk: %v", err)
	}
	if _, _, err := pot.Lookup(ctx, tampered, top, ref, 0); !errors.Is(err, pot.ErrUnavailable) {
		t.Fatalf("lookup over tampered chunks: %v", err)
	}

	notNode, _ := cac.New([]byte("not a node"))
	_ = f.store.Put(ctx, notNode)
	if _, err := pot.Load(ctx, f.store, notNode.Address()); !errors.Is(err, pot.ErrVersion) {
		t.Fatalf("a chunk that is no node: %v", err)
	}

	// A publisher that references n5 where n3 belongs: n5's key does not
	// first differ from 7's at that fork.
	liar := newFeed()
	for i := range 4 {
		liar.add(t, uint64(i), value(i))
	}
	n5, _ := pot.New(5, nil)
	ch5, _ := n5.Chunk()
	_ = liar.store.Put(ctx, ch5)
	over5, err := pot.Insert(n5, ch5.Address(), 7, nil) // one fork, naming n5
	if err != nil {
		t.Fatal(err)
	}
	b := over5.Bytes()
	// Key 4 with its one fork at 61 (where 4 has its 1) still naming n5.
	binary.BigEndian.PutUint64(b[1:9], 4)
	binary.BigEndian.PutUint64(b[9:17], 1<<2)
	wrong, err := pot.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	wch, _ := wrong.Chunk()
	if _, _, err := pot.Lookup(ctx, liar.store, wrong, wch.Address(), 3); !errors.Is(err, pot.ErrInconsistent) {
		t.Fatalf("a node at a fork it does not belong to: %v", err)
	}
}

// anchored is the anchor of a follower that holds update w and verified update top.
func anchored(f *feed, w int) *pot.Anchor {
	return &pot.Anchor{Key: f.keys[w], Ref: f.refs[w]}
}

// TestSWIP65Item3RecoverByDescent (SWIP-65 conformance item 3): the missed
// updates between the anchor and the update that revealed the gap come back
// by descent from its node, in order, one retrieval each, no more; when
// fewer may be recovered than were missed, the latest ones, and the anchor
// is sought by key.
func TestSWIP65Item3RecoverByDescent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := build(t, 300, timestamps, 10)
	for _, tc := range []struct{ w, top, max int }{
		{0, 2, 64}, {10, 20, 64}, {100, 299, 300}, {1, 299, 64}, {250, 251, 64},
	} {
		t.Run(fmt.Sprintf("%d-%d-max%d", tc.w, tc.top, tc.max), func(t *testing.T) {
			top, ref := f.top(tc.top)
			missed := tc.top - tc.w - 1
			g := count(f.store)
			rec, err := pot.Recover(ctx, g, pot.Gap{Top: top, TopRef: ref, Missed: missed, Anchor: anchored(f, tc.w)}, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			want := min(missed, tc.max)
			if len(rec.Elements) != want {
				t.Fatalf("%d recovered, want %d", len(rec.Elements), want)
			}
			for i, e := range rec.Elements {
				j := tc.top - want + i
				if !bytes.Equal(e.Value(), value(j)) || !e.Ref.Equal(f.refs[j]) {
					t.Fatalf("element %d: value %x, want update %d", i, e.Value(), j)
				}
			}
			if want == missed && (rec.Retrievals != missed || g.n != missed) {
				t.Fatalf("%d retrievals (%d counted) for %d missed updates", rec.Retrievals, g.n, missed)
			}
			if want < missed && rec.Retrievals > want+2*(pot.KeyBits-pot.PO(f.keys[0], f.keys[tc.top])) {
				t.Fatalf("%d retrievals for the latest %d and the anchor", rec.Retrievals, want)
			}
		})
	}
}

// TestSWIP65Item4AnchorCheck (SWIP-65 conformance item 4): a publisher
// that signs a second update at the follower's last index and builds on
// it — an equivocation — fails the anchor check, whether the follower
// recovers the whole gap or only its latest part; so does a pot that lost
// updates, and one whose owner started over.
func TestSWIP65Item4AnchorCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	honest := build(t, 40, sequential, 11)
	// The other branch: the same updates 0…9, another update 10, then on.
	fork := newFeed()
	for i := range 40 {
		v := value(i)
		if i == 10 {
			v = []byte("the other update 10")
		}
		fork.add(t, uint64(i), v)
	}
	hold := anchored(honest, 10) // the follower verified the honest update 10
	for _, max := range []int{64, 5} {
		top, ref := fork.top(30)
		if _, err := pot.Recover(ctx, fork.store, pot.Gap{Top: top, TopRef: ref, Missed: 19, Anchor: hold}, max); !errors.Is(err, pot.ErrAnchor) {
			t.Fatalf("max %d: equivocation at 10 not detected: %v", max, err)
		}
		top, ref = honest.top(30)
		if _, err := pot.Recover(ctx, honest.store, pot.Gap{Top: top, TopRef: ref, Missed: 19, Anchor: hold}, max); err != nil {
			t.Fatalf("max %d: honest history refused: %v", max, err)
		}
	}
	// Too many elements above the anchor: the follower's count of missed
	// updates does not match the pot's (two updates at one index later).
	top, ref := honest.top(30)
	if _, err := pot.Recover(ctx, honest.store, pot.Gap{Top: top, TopRef: ref, Missed: 18, Anchor: hold}, 64); !errors.Is(err, pot.ErrAnchor) {
		t.Fatalf("one element too many above the anchor: %v", err)
	}
	if _, err := pot.Recover(ctx, honest.store, pot.Gap{Top: top, TopRef: ref, Missed: 20, Anchor: hold}, 64); !errors.Is(err, pot.ErrAnchor) {
		t.Fatalf("one element too few above the anchor: %v", err)
	}
	// The owner started a new pot: the anchor's key is not in it.
	restart := newFeed()
	for i := range 5 {
		restart.add(t, uint64(i), []byte(fmt.Sprint("again ", i)))
	}
	top, ref = restart.top(4)
	if _, err := pot.CheckAnchor(ctx, restart.store, top, ref, pot.Anchor{Key: 2, Ref: honest.refs[2]}); !errors.Is(err, pot.ErrAnchor) {
		t.Fatalf("another pot at the anchor's key: %v", err)
	}
	if _, err := pot.CheckAnchor(ctx, honest.store, top, ref, pot.Anchor{Key: 100, Ref: honest.refs[2]}); !errors.Is(err, pot.ErrAnchor) {
		t.Fatalf("an anchor above the top: %v", err)
	}
}

// TestRecoverPartial: storage that lacks a node stops the descent; the
// newest missed updates recovered before it come back with the error, in
// order; a pot that begins after the first missed update is ErrExhausted.
func TestRecoverPartial(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := build(t, 20, sequential, 13)
	top, ref := f.top(19)
	holey := storage.GetterFunc(func(ctx context.Context, a swarm.Address) (swarm.Chunk, error) {
		if a.Equal(f.refs[15]) {
			return nil, storage.ErrNotFound
		}
		return f.store.Get(ctx, a)
	})
	rec, err := pot.Recover(ctx, holey, pot.Gap{Top: top, TopRef: ref, Missed: 9, Anchor: anchored(f, 9)}, 64)
	if !errors.Is(err, pot.ErrUnavailable) || !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("a node missing: %v", err)
	}
	if len(rec.Elements) != 3 || !bytes.Equal(rec.Elements[0].Value(), value(16)) || !bytes.Equal(rec.Elements[2].Value(), value(18)) {
		t.Fatalf("recovered %d before the hole", len(rec.Elements))
	}
	rec, err = pot.Recover(ctx, f.store, pot.Gap{Top: top, TopRef: ref, Missed: 25}, 64)
	if !errors.Is(err, pot.ErrExhausted) || len(rec.Elements) != 19 {
		t.Fatalf("more missed than the pot holds: %d, %v", len(rec.Elements), err)
	}
}

func FuzzDecode(f *testing.F) {
	fd := build(f, 6, sequential, 14)
	for _, n := range fd.nodes {
		f.Add(n.Bytes())
	}
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := pot.Decode(b)
		if err != nil {
			return
		}
		if !bytes.Equal(n.Bytes(), b) {
			t.Fatalf("not canonical: %x decodes and encodes as %x", b, n.Bytes())
		}
	})
}

// TestRecoverAhead: a recovery whose missed nodes are all known to lie
// above the anchor retrieves them ahead of its descent, several at once,
// and still retrieves each exactly once — the anchor never; so does one
// that reads a whole pot (All). Its goroutines end with it (goleak).
func TestRecoverAhead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		gap  func(f *feed) pot.Gap
		want int
	}{
		{"anchor", func(f *feed) pot.Gap {
			top, ref := f.top(30)
			return pot.Gap{Top: top, TopRef: ref, Missed: 19, Anchor: anchored(f, 10)}
		}, 19},
		{"all", func(f *feed) pot.Gap {
			top, ref := f.top(30)
			return pot.Gap{Top: top, TopRef: ref, Missed: 30, All: true}
		}, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := build(t, 31, sequential, 15)
			arrived := make(chan struct{}, 64)
			release := make(chan struct{})
			g := count(storage.GetterFunc(func(ctx context.Context, a swarm.Address) (swarm.Chunk, error) {
				arrived <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				return f.store.Get(ctx, a)
			}))
			type result struct {
				rec pot.Recovery
				err error
			}
			done := make(chan result, 1)
			go func() {
				rec, err := pot.Recover(context.Background(), g, tc.gap(f), 64)
				done <- result{rec, err}
			}()
			deadline := time.After(10 * time.Second)
			for range 2 { // two retrievals outstanding at once
				select {
				case <-arrived:
				case <-deadline:
					close(release)
					<-done
					t.Fatal("the recovery retrieves one node at a time")
				}
			}
			close(release)
			r := <-done
			if r.err != nil {
				t.Fatal(r.err)
			}
			if len(r.rec.Elements) != tc.want || r.rec.Retrievals != tc.want || g.n != tc.want {
				t.Fatalf("%d elements, %d retrievals (%d counted), want %d", len(r.rec.Elements), r.rec.Retrievals, g.n, tc.want)
			}
			for i, e := range r.rec.Elements {
				if !bytes.Equal(e.Value(), value(30-tc.want+i)) {
					t.Fatalf("element %d: %x", i, e.Value())
				}
			}
			if a, ok := g.twice(); ok {
				t.Fatalf("retrieved %s twice", a)
			}
		})
	}
}
