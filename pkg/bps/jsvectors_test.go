// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"encoding/hex"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/pb"
	"github.com/ethersphere/bps/pkg/bps/sessionfeed"
)

// TestJSClientVectors pins the chunks a publisher's client signs on the
// Rev 8 wire, as this package builds them (Spec.Chunk, StorageUpdate,
// RosterPayload) with bee's signer: js/test/unit/rev8.test.mjs holds the
// same hex and checks the JavaScript client's bytes against it, byte for
// byte. The key is 0x0102…20 (owner 6370ef2f…), the topic 0x00…1f, the
// challenge 0x20…3f: pkg/bps/sessionfeed's vectors' inputs, so the AUTH
// chunk here is the one pinned there. bee's signer is RFC 6979: every
// signature is a vector. Each chunk is also checked as a broker checks it
// (Spec.Verify).
func TestJSClientVectors(t *testing.T) {
	t.Parallel()
	seq := func(b byte) []byte {
		out := make([]byte, 32)
		for i := range out {
			out[i] = b + byte(i)
		}
		return out
	}
	topic, challenge := seq(0x00), seq(0x20)
	signer, owner, err := bps.LocalSigner(crypto.NewDefaultSigner(crypto.Secp256k1PrivateKeyFromBytes(seq(0x01))))
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(owner) != "6370ef2f4db3611d657b90667de398a2cc2a370c" {
		t.Fatalf("owner %x", owner)
	}
	explicit, err := bps.NewFeedSpec(topic, owner) // the key is the admin
	if err != nil {
		t.Fatal(err)
	}
	implicit, err := bps.NewSpec(&pb.CohortSpec{Topic: topic, Binding: pb.TopicBinding_FEED_TOPIC})
	if err != nil {
		t.Fatal(err)
	}
	pubs := [][]byte{bytes.Repeat([]byte{0x11}, 20), bytes.Repeat([]byte{0x22}, 20)}
	rosterPayload, err := bps.RosterPayload(pubs)
	if err != nil {
		t.Fatal(err)
	}
	const wantRosterPayload = "0a141111111111111111111111111111111111111111" + "0a142222222222222222222222222222222222222222"
	if hex.EncodeToString(rosterPayload) != wantRosterPayload {
		t.Fatalf("roster payload %x", rosterPayload)
	}

	for _, tc := range []struct {
		name      string
		sp        *bps.Spec
		kind      pb.Kind
		challenge []byte
		index     uint64
		payload   []byte
		soc       string
	}{
		{"AUTH", explicit, pb.Kind_AUTH, challenge, 0, nil, jsAuth},
		{"DATA", explicit, pb.Kind_DATA, challenge, 5, []byte("bps rev 8"), jsData},
		{"ROSTER", explicit, pb.Kind_ROSTER, challenge, 1, rosterPayload, jsRoster},
		{"EOS", explicit, pb.Kind_EOS, challenge, 0, nil, jsEOS},
		{"implicit FEED_TOPIC", implicit, pb.Kind_DATA, nil, 7, []byte("implicit"), jsImplicit},
	} {
		b, err := tc.sp.Chunk(signer, owner, tc.kind, tc.challenge, tc.index, tc.payload)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := hex.EncodeToString(b.Soc); got != tc.soc {
			t.Errorf("%s: soc %s, want %s", tc.name, got, tc.soc)
		}
		if err := tc.sp.Verify(b, owner, tc.challenge); err != nil {
			t.Errorf("%s: a broker refuses it: %v", tc.name, err)
		}
	}

	// the storage update of the DATA chunk (SWIP-65 on Rev 8): the same
	// payload under the channel's own id, signed by the same key
	stored, _, err := bps.StorageUpdate(signer, owner, topic, 5, []byte("bps rev 8"))
	if err != nil {
		t.Fatal(err)
	}
	if got := hex.EncodeToString(stored); got != jsStorage {
		t.Errorf("storage update %s, want %s", got, jsStorage)
	}
}

// TestJSClientVectorsInSync checks that the JavaScript client's unit tests
// hold these vectors, and sessionfeed's ids for the vectors' topic and
// challenge: a vector changed here and not there fails here.
func TestJSClientVectorsInSync(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../../js/test/unit/govectors.mjs")
	if err != nil {
		t.Fatal(err)
	}
	// the JavaScript file splits long hex strings: 'ab' +\n 'cd'
	js := regexp.MustCompile(`'\s*\+\s*'`).ReplaceAllString(string(raw), "")
	want := map[string]string{"AUTH": jsAuth, "DATA": jsData, "ROSTER": jsRoster, "EOS": jsEOS, "implicit": jsImplicit, "storage": jsStorage}
	seq := func(b byte) []byte {
		out := make([]byte, 32)
		for i := range out {
			out[i] = b + byte(i)
		}
		return out
	}
	for _, kind := range []sessionfeed.Kind{sessionfeed.Data, sessionfeed.Auth, sessionfeed.Roster, sessionfeed.EOS} {
		topicS, err := sessionfeed.KindTopic(kind, seq(0x00), seq(0x20))
		if err != nil {
			t.Fatal(err)
		}
		want[kind.String()+" topic_s"] = hex.EncodeToString(topicS)
		for _, index := range []uint64{0, 1, 0x0102030405060708} {
			id, err := sessionfeed.KindID(kind, seq(0x00), seq(0x20), index)
			if err != nil {
				t.Fatal(err)
			}
			want[kind.String()+" id "+hex.EncodeToString(id[:4])] = hex.EncodeToString(id)
		}
	}
	for name, v := range want {
		if !strings.Contains(js, "'"+v+"'") {
			t.Errorf("%s: js/test/unit/govectors.mjs does not hold %s", name, v)
		}
	}
}

// The vectors: each chunk's data as on the wire, id(32) ‖ signature(65) ‖
// span(8, LE) ‖ payload.
const (
	jsAuth = "1c0e934a59bed593e2ef827c862c9d3316696b8444d843f02031376b578b7c2d" +
		"0308337ef04a2c498fe4719bf60fceaea7c8011bac9939e7415c1256f5f95d025aa4887373ab68dc4515f782d55a9161defbe919ea41e20575cb2c3a759ef1991b" +
		"0000000000000000"
	jsData = "0b0985170f89d38e106a1c09e594c8bcddf7b3f07904f6ddb26e8f232703a046" +
		"29d0050daed0315b0a45a1872137a43dc285b172064321b6b2202912843a62f7528aeb718da025a4b969d908cb0073c7c1c812dc3635cf25572ef71505ac7aab1c" +
		"0900000000000000" +
		"627073207265762038"
	jsRoster = "1b303140b0fd59644d574594dd8d9900c0c254f851f388095b935d8c21089a4f" +
		"f6581131b529acb2d24927ce5fe4641cce77d60ffe3aa3300e98d159c0500ca35937d0d697d23391fcf55b99ef0e450d49eb83a5dd9b6e5698297f53b9c1e1cd1c" +
		"2c00000000000000" +
		"0a1411111111111111111111111111111111111111110a142222222222222222222222222222222222222222"
	jsEOS = "da442d45d7a3f3f8306961cc4c32e87344658f29e6c1ed3972ee3aa9e628c9b5" +
		"1f353dbf36d3dd2d639fb9e16aa5d47a28226115363c5aed577044b0028a60583f6a71b55ddd321268518167d6993ce7c8021174fed23d14cbd89c57dea0b6dc1c" +
		"0000000000000000"
	jsImplicit = "8e34231d958e6886dced5ef6150a0697d5e10719b23ebc7e656cf5dd57507dda" +
		"0bf1322923cbad674cd3edf0c062fda1af39e104e51b2ca195b73ce382e5c03046b4478072c98fd197d03f0b1c341976a5ab0108387b078828adb3bc2eebf0161b" +
		"0800000000000000" +
		"696d706c69636974"
	jsStorage = "15c101cbe2c58abf19f7c3e29350bae9a0ac5ace8a12ab04c7ac691e8ef04831" +
		"5ff3931a96853d829b0a4c6fc66b75fd7288b678c440b846702815571bf4f3ff25b619ba7498efee404e72269e61a2888c730fe65b00c8216302bc9f313cd9bf1b" +
		"0900000000000000" +
		"627073207265762038"
)
