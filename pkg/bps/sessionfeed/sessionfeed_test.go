// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package sessionfeed_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"math"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/cac"
	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bee/v2/pkg/soc"
	"github.com/ethersphere/bee/v2/pkg/swarm"
	"github.com/ethersphere/bps/pkg/bps/sessionfeed"
)

// seq is 32 bytes counting up from b: the vectors' topic (0x00…0x1f) and
// challenge (0x20…0x3f).
func seq(b byte) []byte {
	out := make([]byte, 32)
	for i := range out {
		out[i] = b + byte(i)
	}
	return out
}

// padded is s zero-padded to 32 bytes, as upstream's API test fixture builds
// its topic ("bps-test-topic") and its session's challenge
// ("bps-test-challenge").
func padded(s string) []byte {
	out := make([]byte, 32)
	copy(out, s)
	return out
}

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keccak hashes the concatenation of parts with bee's keccak256: the test's
// own derivation from the texts' definitions, built byte by byte, against
// which the package's path through bee's feeds package is checked.
func keccak(t *testing.T, parts ...[]byte) []byte {
	t.Helper()
	var buf []byte
	for _, p := range parts {
		buf = append(buf, p...)
	}
	h, err := crypto.LegacyKeccak256(buf)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func be(i uint64) []byte { return binary.BigEndian.AppendUint64(nil, i) }

func TestKindValues(t *testing.T) {
	t.Parallel()
	// Rev 8's numbers, and this project's for SWIP-60's two (docs/protocol.md)
	for _, tc := range []struct {
		kind    sessionfeed.Kind
		value   uint8
		name    string
		known   bool
		service bool
	}{
		{sessionfeed.KindUnspecified, 0, "KIND_UNSPECIFIED", false, false},
		{sessionfeed.Data, 1, "DATA", true, false},
		{sessionfeed.Auth, 2, "AUTH", true, false},
		{sessionfeed.Roster, 3, "ROSTER", true, true},
		{sessionfeed.EOS, 4, "EOS", true, true},
		{sessionfeed.Kind(5), 5, "KIND(5)", false, false},
	} {
		if uint8(tc.kind) != tc.value || tc.kind.String() != tc.name || tc.kind.Known() != tc.known || tc.kind.Service() != tc.service {
			t.Errorf("kind %d: %s known %v service %v, want %d %s %v %v",
				tc.kind, tc.kind, tc.kind.Known(), tc.kind.Service(), tc.value, tc.name, tc.known, tc.service)
		}
	}
}

func TestPrefix(t *testing.T) {
	t.Parallel()
	if p := sessionfeed.Prefix(sessionfeed.Data); len(p) != 0 {
		t.Fatalf("DATA prefix %x, want empty", p)
	}
	for _, k := range []sessionfeed.Kind{sessionfeed.Auth, sessionfeed.Roster, sessionfeed.EOS, sessionfeed.Kind(200)} {
		want := append([]byte("bps-service:v1"), byte(k))
		if got := sessionfeed.Prefix(k); !bytes.Equal(got, want) {
			t.Fatalf("%s prefix %q, want %q", k, got, want)
		}
	}
	// each call returns its own slice: a caller changing one cannot change
	// another's
	a := sessionfeed.Prefix(sessionfeed.Auth)
	a[0] = 'X'
	if got := sessionfeed.Prefix(sessionfeed.Auth); got[0] != 'b' {
		t.Fatalf("prefix shared between calls: %q", got)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("the unspecified kind has a prefix")
		}
	}()
	sessionfeed.Prefix(sessionfeed.KindUnspecified)
}

// TestVectors pins topic_s and id for every kind at three indexes, topic
// 0x00…0x1f, challenge 0x20…0x3f, and checks each against the definition
// built by hand: topic_s = keccak256(prefix ‖ topic ‖ challenge),
// id = keccak256(topic_s ‖ uint64BE(index)).
func TestVectors(t *testing.T) {
	t.Parallel()
	topic, challenge := seq(0x00), seq(0x20)
	const big = 0x0102030405060708
	for _, tc := range []struct {
		kind   sessionfeed.Kind
		topicS string
		ids    map[uint64]string
	}{
		{sessionfeed.Data, "002030bde3d4cf89919649775cd71875c4d0ab1708a380e03fefc3a28aa24831", map[uint64]string{
			0:   "3906f94ffb648d5d62e02ae1f6c201e5805c40d383a1e37669c044491ebb8d90",
			1:   "1cdf737a1fe33f57a82ad16833e5cf7915c016778d82faee9ead8f4248271d51",
			big: "83f514e4038f241ca82cae1283ef93f2b009a36bc683a49dd26325e3304ece6b",
		}},
		{sessionfeed.Auth, "4fdfde9c123c25286932d06ebf76edd731b1bbf4c139012701e2c0ff1a3a7e05", map[uint64]string{
			0:   "1c0e934a59bed593e2ef827c862c9d3316696b8444d843f02031376b578b7c2d",
			1:   "33cbfe658ff5d5bf10e801d6f779d8fd46727bdba6a2ebead33fd753e33fa757",
			big: "4be2a033f51e0bc7551eae425c56ae83d6e83aaf25fc1c56db16472739a91c6a",
		}},
		{sessionfeed.Roster, "f709e0cd5e7807ce2c15a39b1375a514138774b6e73604d1d86859e9abe33c47", map[uint64]string{
			0:   "ee2e6326532ad442bab5c5db893883068ca67a2d12a82d242b861c300f7c2a4b",
			1:   "1b303140b0fd59644d574594dd8d9900c0c254f851f388095b935d8c21089a4f",
			big: "04ae03adbc0a9926d2946e513d284e469a5523f4315a2492713082f66d78dd20",
		}},
		{sessionfeed.EOS, "aa0e326f08fd5fd8ee1d17c243855fd65c23a718ec0071cc52f609b7084a0917", map[uint64]string{
			0:   "da442d45d7a3f3f8306961cc4c32e87344658f29e6c1ed3972ee3aa9e628c9b5",
			1:   "e5d50fecdf631834bc89fa88e270f2464c9a8bcfea647a24821369c0ecbecb46",
			big: "01bd08dd6ada69c8fdab09cdba04e12f111b3caacb534a069690a7af9c17c4d2",
		}},
	} {
		var prefix []byte
		if tc.kind != sessionfeed.Data {
			prefix = append([]byte("bps-service:v1"), byte(tc.kind))
		}
		wantTopicS := keccak(t, prefix, topic, challenge)
		if !bytes.Equal(wantTopicS, unhex(t, tc.topicS)) {
			t.Fatalf("%s: the pinned topic_s is not the definition's", tc.kind)
		}
		topicS, err := sessionfeed.KindTopic(tc.kind, topic, challenge)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(topicS, wantTopicS) {
			t.Fatalf("%s: topic_s %x, want %s", tc.kind, topicS, tc.topicS)
		}
		if got, _ := sessionfeed.Topic(sessionfeed.Prefix(tc.kind), topic, challenge); !bytes.Equal(got, topicS) {
			t.Fatalf("%s: Topic(Prefix) %x, want %x", tc.kind, got, topicS)
		}
		for index, pinned := range tc.ids {
			want := keccak(t, wantTopicS, be(index))
			if !bytes.Equal(want, unhex(t, pinned)) {
				t.Fatalf("%s/%d: the pinned id is not the definition's", tc.kind, index)
			}
			id, err := sessionfeed.KindID(tc.kind, topic, challenge, index)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(id, want) {
				t.Fatalf("%s/%d: id %x, want %s", tc.kind, index, id, pinned)
			}
			if id2, _ := sessionfeed.ID(topicS, index); !bytes.Equal(id2, id) {
				t.Fatalf("%s/%d: ID(topic_s) %x, want %x", tc.kind, index, id2, id)
			}
		}
	}
}

// TestUpstreamFixture derives the ids for the topic and challenge of
// upstream's own API test fixture (bee PR #5626: "bps-test-topic" and
// "bps-test-challenge", zero-padded; its kind byte is the protobuf enum
// value, DATA 1 and AUTH 2, as here). Upstream pins no hex vector; these are
// the ids its derivation gives for those inputs, which an interop test can
// replay against it.
func TestUpstreamFixture(t *testing.T) {
	t.Parallel()
	topic, challenge := padded("bps-test-topic"), padded("bps-test-challenge")
	for _, tc := range []struct {
		kind                sessionfeed.Kind
		topicS, id0, id3    string
		upstreamPrefixValue byte
	}{
		{sessionfeed.Data,
			"0f87fdc2337db43fcb44c445ddba662f4c784a9c972e48c2cb163571a9fd3732",
			"304725343136a8e3202c3345bbd2bceac8b631a0eb9a0ceb1373309d981cdbfa",
			"86450b8f0c4c8b2db75cee9e282d0ded844859a50fed651872cbe1a49f2a4476", 0},
		{sessionfeed.Auth,
			"50b9ea93487be9e432b27c98fd337ba1e4e4820034b2ed1e78398c6cc4d1d1f9",
			"590e662098489bbe07cb3ad03ff853c82aca6bbe5041f36f730efe97df8baf28",
			"dfd624cda5018b55aa1d3ae811df569edb14df4a0b14acd66c43f29a54113df7", 2},
	} {
		var prefix []byte
		if tc.upstreamPrefixValue != 0 {
			prefix = append([]byte("bps-service:v1"), tc.upstreamPrefixValue)
		}
		if got := keccak(t, prefix, topic, challenge); !bytes.Equal(got, unhex(t, tc.topicS)) {
			t.Fatalf("%s: pinned topic_s is not upstream's derivation", tc.kind)
		}
		topicS, _ := sessionfeed.KindTopic(tc.kind, topic, challenge)
		id0, _ := sessionfeed.KindID(tc.kind, topic, challenge, 0)
		id3, _ := sessionfeed.KindID(tc.kind, topic, challenge, 3)
		if hex.EncodeToString(topicS) != tc.topicS || hex.EncodeToString(id0) != tc.id0 || hex.EncodeToString(id3) != tc.id3 {
			t.Fatalf("%s: %x %x %x, want %s %s %s", tc.kind, topicS, id0, id3, tc.topicS, tc.id0, tc.id3)
		}
	}
}

func TestChannelID(t *testing.T) {
	t.Parallel()
	topic := seq(0x00)
	const pinned = "8e34231d958e6886dced5ef6150a0697d5e10719b23ebc7e656cf5dd57507dda"
	if want := keccak(t, topic, be(7)); hex.EncodeToString(want) != pinned {
		t.Fatal("the pinned channel id is not the definition's")
	}
	id, err := sessionfeed.ChannelID(topic, 7)
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(id) != pinned {
		t.Fatalf("channel id %x, want %s", id, pinned)
	}
	// no challenge gives the channel's own id: the storage update is never
	// a session chunk, and the empty prefix is not the absence of a salt
	if live, _ := sessionfeed.KindID(sessionfeed.Data, topic, seq(0x20), 7); bytes.Equal(live, id) {
		t.Fatal("the live id is the channel's")
	}
	if _, err := sessionfeed.ChannelID(topic[:31], 7); !errors.Is(err, sessionfeed.ErrTopicSize) {
		t.Fatalf("short topic: %v", err)
	}
}

func TestSizes(t *testing.T) {
	t.Parallel()
	topic, challenge := seq(0x00), seq(0x20)
	for _, tc := range []struct {
		name             string
		topic, challenge []byte
		want             error
	}{
		{"short topic", topic[:31], challenge, sessionfeed.ErrTopicSize},
		{"long topic", append(append([]byte{}, topic...), 0), challenge, sessionfeed.ErrTopicSize},
		{"no challenge", topic, nil, sessionfeed.ErrChallengeSize},
		{"short challenge", topic, challenge[:16], sessionfeed.ErrChallengeSize},
		{"long challenge", topic, append(append([]byte{}, challenge...), 0), sessionfeed.ErrChallengeSize},
	} {
		if _, err := sessionfeed.KindID(sessionfeed.Data, tc.topic, tc.challenge, 0); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := sessionfeed.KindID(sessionfeed.KindUnspecified, topic, challenge, 0); !errors.Is(err, sessionfeed.ErrKind) {
		t.Fatalf("unspecified kind: %v", err)
	}
	if sessionfeed.MaxIndex != math.MaxUint64-1 {
		t.Fatal("MaxIndex moved")
	}
}

// TestSignedChunks signs an AUTH and a DATA chunk with a fixed key and checks
// them with bee's soc.Valid at the address derived from the frame's fields:
// valid as sent, invalid under every alteration the security tables list
// (another challenge, another kind, another index, another owner, the
// channel's own id).
func TestSignedChunks(t *testing.T) {
	t.Parallel()
	topic, challenge := seq(0x00), seq(0x20)
	signer := crypto.NewDefaultSigner(crypto.Secp256k1PrivateKeyFromBytes(seq(0x01)))
	ownerAddr, err := signer.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	owner := ownerAddr.Bytes()
	if hex.EncodeToString(owner) != "6370ef2f4db3611d657b90667de398a2cc2a370c" {
		t.Fatalf("owner %x", owner)
	}
	other := make([]byte, 20)

	sign := func(kind sessionfeed.Kind, index uint64, payload []byte) swarm.Chunk {
		t.Helper()
		id, err := sessionfeed.KindID(kind, topic, challenge, index)
		if err != nil {
			t.Fatal(err)
		}
		wrapped, err := cac.New(payload)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := soc.New(id, wrapped).Sign(signer)
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	// valid reports whether data validates at the address derived from
	// kind, challenge, index and owner, and has the derived id
	valid := func(data []byte, kind sessionfeed.Kind, ch []byte, index uint64, owner []byte) bool {
		id, err := sessionfeed.KindID(kind, topic, ch, index)
		if err != nil || !bytes.Equal(data[:swarm.HashSize], id) {
			return false
		}
		addr, err := sessionfeed.Address(id, owner)
		if err != nil {
			return false
		}
		return soc.Valid(swarm.NewChunk(addr, data))
	}

	auth := sign(sessionfeed.Auth, 0, nil)
	const authAddr = "fb4f53405af4c00a3d57c4290972961bab18e3da9e0b3ab1efcc00dc60379437"
	// RFC 6979 signatures: the whole chunk is a vector
	const authData = "1c0e934a59bed593e2ef827c862c9d3316696b8444d843f02031376b578b7c2d" +
		"0308337ef04a2c498fe4719bf60fceaea7c8011bac9939e7415c1256f5f95d02" +
		"5aa4887373ab68dc4515f782d55a9161defbe919ea41e20575cb2c3a759ef1991b" +
		"0000000000000000"
	if hex.EncodeToString(auth.Address().Bytes()) != authAddr || hex.EncodeToString(auth.Data()) != authData {
		t.Fatalf("AUTH chunk %x %x", auth.Address().Bytes(), auth.Data())
	}
	// an AUTH is the empty chunk: id, signature and a zero span, 105 bytes
	if len(auth.Data()) != swarm.HashSize+swarm.SocSignatureSize+swarm.SpanSize {
		t.Fatalf("AUTH chunk of %d bytes", len(auth.Data()))
	}

	data := sign(sessionfeed.Data, 5, []byte("bps rev 8"))
	const dataAddr = "8d0112599f7ec52f1e6c33b6549f6d332a3662f9b241c9d95a538a0ec884f006"
	if hex.EncodeToString(data.Address().Bytes()) != dataAddr {
		t.Fatalf("DATA chunk address %x", data.Address().Bytes())
	}

	for _, tc := range []struct {
		name  string
		data  []byte
		kind  sessionfeed.Kind
		ch    []byte
		index uint64
		owner []byte
		want  bool
	}{
		{"AUTH as sent", auth.Data(), sessionfeed.Auth, challenge, 0, owner, true},
		{"DATA as sent", data.Data(), sessionfeed.Data, challenge, 5, owner, true},
		{"DATA under another challenge", data.Data(), sessionfeed.Data, seq(0x40), 5, owner, false},
		{"DATA at another index", data.Data(), sessionfeed.Data, challenge, 6, owner, false},
		{"AUTH as DATA", auth.Data(), sessionfeed.Data, challenge, 0, owner, false},
		{"DATA as ROSTER", data.Data(), sessionfeed.Roster, challenge, 5, owner, false},
		{"DATA for another owner", data.Data(), sessionfeed.Data, challenge, 5, other, false},
	} {
		if got := valid(tc.data, tc.kind, tc.ch, tc.index, tc.owner); got != tc.want {
			t.Errorf("%s: valid %v, want %v", tc.name, got, tc.want)
		}
	}

	// the storage update: the same wrapped payload under the channel's own
	// id, signed by the same key — valid as the channel's feed update, and
	// never at any session's address
	cid, err := sessionfeed.ChannelID(topic, 5)
	if err != nil {
		t.Fatal(err)
	}
	wrapped, _ := cac.New([]byte("bps rev 8"))
	stored, err := soc.New(cid, wrapped).Sign(signer)
	if err != nil {
		t.Fatal(err)
	}
	if addr, _ := sessionfeed.Address(cid, owner); !soc.Valid(swarm.NewChunk(addr, stored.Data())) {
		t.Fatal("the storage update does not validate on the channel's feed")
	}
	if valid(stored.Data(), sessionfeed.Data, challenge, 5, owner) {
		t.Fatal("the storage update validates as a session chunk")
	}
}
