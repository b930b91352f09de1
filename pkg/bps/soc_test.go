// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"errors"
	"math/big"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps"
)

// secp256k1's group order N and field prime P.
var (
	curveN, _ = new(big.Int).SetString("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", 16)
	curveP, _ = new(big.Int).SetString("fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f", 16)
)

const sigOffset = swarm.HashSize // a SOC's data: id ‖ signature (r ‖ s ‖ v) ‖ span ‖ payload

// sameAsBee reads (address, data) on the fast signature path and with bee's
// soc.FromChunk and fails t unless both give the same verdict, owner, id,
// signature, wrapped chunk and SOC address — but for a SOC of bee's replica
// owner that soc.Valid refuses, which the fast path refuses too
// (bps.ErrReplicaID); validation's verdict must be soc.Valid's. It returns
// that verdict.
func sameAsBee(t testing.TB, address, data []byte) bool {
	t.Helper()
	ch := swarm.NewChunk(swarm.NewAddress(address), data)
	valid := bps.ValidSOC(address, data)
	if bee := soc.Valid(ch); valid != bee {
		t.Fatalf("verdict: validation %v, soc.Valid %v (data %x)", valid, bee, data)
	}
	want, wantErr := soc.FromChunk(ch)
	got, err := bps.ReadSOC(data)
	refused := wantErr == nil && refusedAsReplica(want, data)
	if errors.Is(err, bps.ErrReplicaID) != refused {
		t.Fatalf("replica rule: fast path err %v, soc.Valid refuses the SOC at its own address: %v", err, refused)
	}
	if refused {
		return valid
	}
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("read: fast path err %v, bee's err %v (data %x)", err, wantErr, data)
	}
	if wantErr != nil {
		return valid
	}
	if !bytes.Equal(got.OwnerAddress(), want.OwnerAddress()) {
		t.Fatalf("owner: fast path %x, bee's %x", got.OwnerAddress(), want.OwnerAddress())
	}
	if !bytes.Equal(got.ID(), want.ID()) || !bytes.Equal(got.Signature(), want.Signature()) {
		t.Fatalf("id/signature differ: %x/%x vs %x/%x", got.ID(), got.Signature(), want.ID(), want.Signature())
	}
	gw, ww := got.WrappedChunk(), want.WrappedChunk()
	if !gw.Address().Equal(ww.Address()) || !bytes.Equal(gw.Data(), ww.Data()) {
		t.Fatalf("wrapped chunk: fast path %s, bee's %s", gw.Address(), ww.Address())
	}
	ga, gerr := got.Address()
	wa, werr := want.Address()
	if (gerr == nil) != (werr == nil) || !ga.Equal(wa) {
		t.Fatalf("SOC address: fast path %s (%v), bee's %s (%v)", ga, gerr, wa, werr)
	}
	return valid
}

// refusedAsReplica reports whether soc.Valid refuses s, which
// soc.FromChunk read from data, at s's own address: where FromChunk reads
// a SOC, soc.Valid has one rule more, the replica owner's.
func refusedAsReplica(s *soc.SOC, data []byte) bool {
	a, err := s.Address()
	return err == nil && !soc.Valid(swarm.NewChunk(a, data))
}

// signedSOC is a SOC by k over id wrapping payload: its address and data.
func signedSOC(t testing.TB, k key, id, payload []byte) (address, data []byte) {
	t.Helper()
	data, addr, err := bps.SignSOC(k.signer, k.addr, id, payload)
	if err != nil {
		t.Fatal(err)
	}
	return addr.Bytes(), data
}

// withSig is data with its signature's r, s and v replaced (nil keeps one).
func withSig(data []byte, r, s *big.Int, v int) []byte {
	d := bytes.Clone(data)
	if r != nil {
		r.FillBytes(d[sigOffset : sigOffset+32])
	}
	if s != nil {
		s.FillBytes(d[sigOffset+32 : sigOffset+64])
	}
	if v >= 0 {
		d[sigOffset+64] = byte(v)
	}
	return d
}

func sigS(data []byte) *big.Int { return new(big.Int).SetBytes(data[sigOffset+32 : sigOffset+64]) }
func sigV(data []byte) int      { return int(data[sigOffset+64]) }

func flipped(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}

// TestRecoverDifferential: on valid, malformed and hostile SOCs the fast
// signature path gives exactly bee's verdict and owner, and validation
// soc.Valid's verdict; each case also has the verdict it must have.
func TestRecoverDifferential(t *testing.T) {
	t.Parallel()
	t.Logf("libsecp256k1: %v", bps.FastRecover)
	k := newKey(t)
	id := topicOf("recover")
	payload := bytes.Repeat([]byte("bps!"), 256)
	addr, data := signedSOC(t, k, id, payload)
	s, v := sigS(data), sigV(data)
	if v != 27 && v != 28 {
		t.Fatalf("bee signs with v %d", v)
	}
	highS := new(big.Int).Sub(curveN, s)
	one := big.NewInt(1)

	cases := []struct {
		name    string
		address []byte
		data    []byte
		valid   bool
	}{
		{"valid", addr, data, true},
		{"high s, parity flipped: the same key", addr, withSig(data, nil, highS, twin(v)), true},
		{"v with bee's compressed-key mark", addr, withSig(data, nil, nil, v+4), true},
		{"high s, v+4", addr, withSig(data, nil, highS, (twin(v))+4), true},
		{"high s alone: another key", addr, withSig(data, nil, highS, -1), false},
		{"wrong recovery id", addr, withSig(data, nil, nil, twin(v)), false},
		{"recovery id 2 (r+N)", addr, withSig(data, nil, nil, 29), false},
		{"recovery id 3 (r+N)", addr, withSig(data, nil, nil, 30), false},
		{"v 0", addr, withSig(data, nil, nil, 0), false},
		{"v 1", addr, withSig(data, nil, nil, 1), false},
		{"v 26", addr, withSig(data, nil, nil, 26), false},
		{"v 35", addr, withSig(data, nil, nil, 35), false},
		{"v 255", addr, withSig(data, nil, nil, 255), false},
		{"zero signature", addr, withSig(data, new(big.Int), new(big.Int), 0), false},
		{"zero r and s, v 27", addr, withSig(data, new(big.Int), new(big.Int), 27), false},
		{"zero r", addr, withSig(data, new(big.Int), nil, -1), false},
		{"zero s", addr, withSig(data, nil, new(big.Int), -1), false},
		{"r = N", addr, withSig(data, curveN, nil, -1), false},
		{"s = N", addr, withSig(data, nil, curveN, -1), false},
		{"r = N+1", addr, withSig(data, new(big.Int).Add(curveN, one), nil, -1), false},
		{"s = 2^256-1", addr, withSig(data, nil, new(big.Int).Sub(new(big.Int).Lsh(one, 256), one), -1), false},
		{"r = 1, recovery id 2", addr, withSig(data, one, nil, 29), false},
		{"r = P-N-1, recovery id 2", addr, withSig(data, new(big.Int).Sub(new(big.Int).Sub(curveP, curveN), one), nil, 29), false},
		{"r = P-N, recovery id 2", addr, withSig(data, new(big.Int).Sub(curveP, curveN), nil, 29), false},
		{"r = N-1, s = N-1", addr, withSig(data, new(big.Int).Sub(curveN, one), new(big.Int).Sub(curveN, one), -1), false},
		{"r flipped", addr, flipped(data, sigOffset+31), false},
		{"s flipped", addr, flipped(data, sigOffset+63), false},
		{"id flipped", addr, flipped(data, 0), false},
		{"span flipped", addr, flipped(data, swarm.SocMinChunkSize-swarm.SpanSize), false},
		{"payload flipped", addr, flipped(data, len(data)-1), false},
		{"wrong address", flipped(addr, 0), data, false},
		{"short address", addr[:31], data, false},
		{"no address", nil, data, false},
		{"empty", addr, nil, false},
		{"id only", addr, data[:swarm.HashSize], false},
		{"truncated in the signature", addr, data[:sigOffset+64], false},
		{"no span", addr, data[:sigOffset+swarm.SocSignatureSize], false},
		{"truncated in the span", addr, data[:swarm.SocMinChunkSize-1], false},
		{"no payload", addr, data[:swarm.SocMinChunkSize], false},
		{"truncated payload", addr, data[:len(data)-1], false},
		{"all zero", addr, make([]byte, swarm.SocMinChunkSize+32), false},
		{"all ones", addr, bytes.Repeat([]byte{0xff}, swarm.SocMinChunkSize+32), false},
	}
	for _, size := range []int{0, 1, 31, 32, 33, 64, 1000, 4095, swarm.ChunkSize} {
		a, d := signedSOC(t, k, id, bytes.Repeat([]byte{byte(size)}, size))
		cases = append(cases, struct {
			name    string
			address []byte
			data    []byte
			valid   bool
		}{"valid, payload " + strconv.Itoa(size), a, d, true})
	}
	a, d := signedSOC(t, k, id, bytes.Repeat([]byte{9}, swarm.ChunkSize))
	cases = append(cases, struct {
		name    string
		address []byte
		data    []byte
		valid   bool
	}{"a byte past the largest chunk", a, append(d, 0), false})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sameAsBee(t, c.address, c.data); got != c.valid {
				t.Fatalf("valid = %v, want %v", got, c.valid)
			}
		})
	}
}

// twin is the other recovery code of bee's pair 27/28 (or 31/32).
func twin(v int) int {
	if v%2 == 1 {
		return v + 1
	}
	return v - 1
}

// TestRecoverOwnerDifferential: on random signatures over random digests —
// r and s anywhere, v in and around bee's range — the fast recovery fails
// where bee's crypto.Recover fails and otherwise gives its owner.
func TestRecoverOwnerDifferential(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(11, 1))
	recovered, overflowed := 0, 0 // keys recovered; of them, with x = r+N
	for range 2000 {
		sig, digest := make([]byte, swarm.SocSignatureSize), make([]byte, 32)
		for i := range sig {
			sig[i] = byte(rng.Uint32())
		}
		for i := range digest {
			digest[i] = byte(rng.Uint32())
		}
		sig[64] = byte(25 + rng.IntN(12)) // 25…36
		if rng.IntN(8) == 0 {
			clear(sig[:32]) // now and then a small r
			sig[31] = byte(rng.Uint32())
		}
		var want []byte
		pub, wantErr := crypto.Recover(sig, digest)
		if wantErr == nil {
			var err error
			if want, err = crypto.NewEthereumAddress(*pub); err != nil {
				t.Fatal(err)
			}
		}
		got, err := bps.RecoverOwner(sig, digest)
		if (err == nil) != (wantErr == nil) || !bytes.Equal(got, want) {
			t.Fatalf("sig %x digest %x: fast path %x (%v), bee's %x (%v)", sig, digest, got, err, want, wantErr)
		}
		if err == nil {
			recovered++
			if (sig[64]-27)&2 != 0 {
				overflowed++
			}
		}
	}
	// About half the candidate x-coordinates are on the curve, so about 3
	// in 16 of these signatures recover a key: both outcomes, and the r+N
	// candidate, were exercised.
	if recovered < 200 || recovered > 600 || overflowed == 0 {
		t.Fatalf("%d of 2000 random signatures recovered a key, %d with x = r+N", recovered, overflowed)
	}
}

// replicaKey is bee's dispersed-replica owner (pkg/replicas), whose
// private key is public: 1 followed by 31 zero bytes.
func replicaKey(t testing.TB) key {
	t.Helper()
	pk, err := crypto.DecodeSecp256k1PrivateKey(append([]byte{1}, make([]byte, 31)...))
	if err != nil {
		t.Fatal(err)
	}
	signer := crypto.NewDefaultSigner(pk)
	owner, err := signer.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(owner.Bytes(), swarm.ReplicasOwner) {
		t.Fatalf("replica owner %s, bee's %x", owner, swarm.ReplicasOwner)
	}
	return key{signer: signer, addr: owner.Bytes()}
}

// TestRecoverReplicaOwner: validation has the one rule soc.Valid has beyond
// FromChunk and the SOC address. A SOC of bee's dispersed-replica owner
// (whose key is public) is valid only where its id is its wrapped chunk's
// address but for the first byte — a replica; any other is refused, where
// the same id from another owner is valid.
func TestRecoverReplicaOwner(t *testing.T) {
	t.Parallel()
	replicas, other := replicaKey(t), newKey(t)
	payload := []byte("a replica")
	wrapped, err := cac.New(payload)
	if err != nil {
		t.Fatal(err)
	}
	chunkAddr := wrapped.Address().Bytes()
	replicaID := bytes.Clone(chunkAddr)
	replicaID[0] ^= 0x5a

	for _, tc := range []struct {
		name  string
		id    []byte
		valid bool
	}{
		{"a replica's id", replicaID, true},
		{"the chunk's address as id", chunkAddr, true},
		{"another id", topicOf("replica"), false},
		{"a replica's id, second byte flipped", flipped(replicaID, 1), false},
		{"a replica's id, last byte flipped", flipped(replicaID, swarm.HashSize-1), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, data := signedSOC(t, replicas, tc.id, payload)
			if got := sameAsBee(t, addr, data); got != tc.valid {
				t.Fatalf("validation %v, want %v", got, tc.valid)
			}
			s, err := bps.ReadSOC(data)
			switch {
			case tc.valid && (err != nil || !bytes.Equal(s.OwnerAddress(), swarm.ReplicasOwner)):
				t.Fatalf("read: %v", err)
			case !tc.valid && !errors.Is(err, bps.ErrReplicaID):
				t.Fatalf("read: err %v, want %v", err, bps.ErrReplicaID)
			}
			// The rule is the replica owner's alone.
			if addr, data := signedSOC(t, other, tc.id, payload); !sameAsBee(t, addr, data) {
				t.Fatal("validation refuses another owner's SOC with the same id")
			}
		})
	}
}

// FuzzRecoverSOC: whatever the bytes, the fast signature path gives bee's
// verdict and owner. The seeds are a valid SOC and its hostile variants.
func FuzzRecoverSOC(f *testing.F) {
	k := newKey(f)
	addr, data := signedSOC(f, k, topicOf("fuzz-recover"), []byte("seed payload"))
	s, v := sigS(data), sigV(data)
	f.Add(addr, data)
	f.Add(addr, withSig(data, nil, new(big.Int).Sub(curveN, s), twin(v)))
	f.Add(addr, withSig(data, nil, nil, v+4))
	f.Add(addr, withSig(data, nil, nil, 29))
	f.Add(addr, withSig(data, nil, nil, 0))
	f.Add(addr, withSig(data, new(big.Int), new(big.Int), 27))
	f.Add(addr, withSig(data, curveN, nil, -1))
	f.Add(addr, data[:swarm.SocMinChunkSize])
	f.Add(addr, data[:sigOffset+10])
	f.Add([]byte{}, []byte{})
	f.Add(addr, make([]byte, swarm.SocMinChunkSize))
	// The replica owner's, with an id that is not a replica's and with one
	// that is.
	wrapped, err := cac.New([]byte("seed payload"))
	if err != nil {
		f.Fatal(err)
	}
	for _, id := range [][]byte{topicOf("fuzz-replica"), flipped(wrapped.Address().Bytes(), 0)} {
		a, d := signedSOC(f, replicaKey(f), id, []byte("seed payload"))
		f.Add(a, d)
	}
	f.Fuzz(func(t *testing.T, address, data []byte) {
		sameAsBee(t, address, data)
	})
}
