// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestDevKeysKept: with a keys directory, a second run of the dev cluster
// starts its nodes with the first run's keys (the same Ethereum addresses,
// so the same overlays); without one, each run has new keys.
func TestDevKeysKept(t *testing.T) {
	names := []string{devNodeName(0), devNodeName(1)}
	run := func(keysDir string) []string {
		t.Helper()
		dataDir := t.TempDir()
		password, err := devPassword(keysDir)
		if err != nil {
			t.Fatal(err)
		}
		if err := devKeys(keysDir, dataDir, names, false); err != nil {
			t.Fatal(err)
		}
		batches, err := devBatches(dataDir, password, names)
		if err != nil {
			t.Fatal(err)
		}
		if err := devKeys(keysDir, dataDir, names, true); err != nil {
			t.Fatal(err)
		}
		owners := make([]string, len(batches))
		for i, b := range batches {
			owners[i] = b.Owner.Hex()
		}
		return owners
	}
	keys := filepath.Join(t.TempDir(), "keys")
	first, second := run(keys), run(keys)
	if !slices.Equal(first, second) || first[0] == first[1] {
		t.Fatalf("kept keys: first run %v, second %v", first, second)
	}
	if fi, err := os.Stat(filepath.Join(keys, "password")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("password file: %v %v", fi, err)
	}
	if a, b := run(""), run(""); slices.Equal(a, b) {
		t.Fatalf("without a keys directory the keys repeat: %v", a)
	}
}
