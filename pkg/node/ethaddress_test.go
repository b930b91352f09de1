// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	filekeystore "github.com/ethersphere/bee/v2/pkg/keystore/file"
	"github.com/ethersphere/bps/pkg/node"
)

// TestEthereumAddress checks that a config's Ethereum address is the one of
// the swarm key in its data directory, as bee's keystore reads it, made on
// the first call and the same on the next; without a data directory or a
// password there is none.
func TestEthereumAddress(t *testing.T) {
	t.Parallel()

	c := node.Config{DataDir: t.TempDir(), Password: "secret"}
	a, err := c.EthereumAddress()
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.EthereumAddress()
	if err != nil || again != a {
		t.Fatalf("second call: %s, %v; first %s", again, err, a)
	}
	key, created, err := filekeystore.New(filepath.Join(c.DataDir, "keys")).Key("swarm", c.Password, crypto.EDGSecp256_K1)
	if err != nil || created {
		t.Fatalf("bee's keystore: created %v, %v", created, err)
	}
	want, err := crypto.NewEthereumAddress(key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), want) {
		t.Fatalf("address %s, the swarm key's is %x", a, want)
	}

	if _, err := (&node.Config{DataDir: c.DataDir, Password: "wrong"}).EthereumAddress(); err == nil {
		t.Error("wrong password: no error")
	}
	if _, err := (&node.Config{Password: "secret"}).EthereumAddress(); err == nil {
		t.Error("no data dir: no error")
	}
	if _, err := (&node.Config{DataDir: t.TempDir()}).EthereumAddress(); err == nil {
		t.Error("no password: no error")
	}
}
