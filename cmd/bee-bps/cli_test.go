// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// execute runs args to the end and returns the command's error and output.
func execute(t *testing.T, args ...string) (error, string) {
	t.Helper()

	c, err := newCommand(func(c *command) { c.homeDir = t.TempDir() })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done, out := run(ctx, t, c, args...)
	select {
	case err := <-done:
		return err, out.String()
	case <-ctx.Done():
		t.Fatalf("%v: still running after a minute:\n%s", args, out)
		return nil, ""
	}
}

// refused runs args and checks they fail with an error containing each of
// want, and none of notWant.
func refused(t *testing.T, args []string, want []string, notWant ...string) {
	t.Helper()

	err, out := execute(t, args...)
	if err == nil {
		t.Fatalf("%v: no error:\n%s", args, out)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%v: error %q does not say %q", args, err, w)
		}
	}
	for _, w := range notWant {
		if strings.Contains(err.Error(), w) {
			t.Errorf("%v: error %q says %q", args, err, w)
		}
	}
}

// TestBadBPSOptionsRefusedByName: every bps-* bound out of range is refused
// before anything starts, with the option's name — by dev (which used to
// start the chain and a node, then panic) and by start.
func TestBadBPSOptionsRefusedByName(t *testing.T) {
	for _, tc := range [][]string{
		{"--bps-queue-len", "-5"},
		{"--bps-queue-len", "0"},
		{"--bps-queue-len", "100000000"},
		{"--bps-max-cohorts", "-1"},
		{"--bps-max-cohorts-per-peer", "0"},
		{"--bps-max-streams-per-cohort", "-64"},
		{"--bps-inactivity", "-1s"},
		{"--bps-inactivity", "0s"},
		{"--bps-claim-deadline", "-30s"},
	} {
		t.Run(strings.Join(tc, " "), func(t *testing.T) {
			refused(t, append([]string{"dev", "--verbosity", "0"}, tc...), []string{tc[0], tc[1]})
			refused(t, append([]string{"start", "--data-dir", "", "--bps-enable"}, tc...), []string{tc[0], tc[1]})
		})
	}
	t.Run("all at once", func(t *testing.T) {
		refused(t, []string{"dev", "--bps-queue-len", "-5", "--bps-max-cohorts", "-1", "--bps-inactivity", "-1s"},
			[]string{"--bps-queue-len -5", "--bps-max-cohorts -1", "--bps-inactivity -1s"})
	})
}

// TestDevRefusesBeforeStarting: options dev cannot run with are refused
// before the chain and the nodes start (each case returns at once; a
// started cluster would not return at all).
func TestDevRefusesBeforeStarting(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no", "such", "dir")
	refused(t, []string{"dev", "--info-file", filepath.Join(missing, "bps-dev.json")},
		[]string{"--info-file", "directory " + missing + " does not exist"}, ".bps-dev.json.")
	refused(t, []string{"dev", "--info-file", t.TempDir()}, []string{"is a directory"})
	refused(t, []string{"dev", "--nodes", "0"}, []string{"--nodes 0"})
	refused(t, []string{"dev", "--nodes", "-3"}, []string{"--nodes -3"})
	refused(t, []string{"dev", "--api-addr", "1633"}, []string{"--api-addr"})
	refused(t, []string{"dev", "--api-addr", "127.0.0.1:65535"}, []string{"--api-addr", "bad port"})
	refused(t, []string{"dev", "extra"}, []string{"unknown command"})
}

// TestDevSaysWithoutDevLDFlags: dev from a binary built without the dev
// ldflags (a plain go build, make build) says at start that uploads will
// bounce; one built with them (make run) does not.
func TestDevSaysWithoutDevLDFlags(t *testing.T) {
	defer func(v string) { devReachability = v }(devReachability)
	devReachability = ""
	if _, out := execute(t, "dev", "--nodes", "0"); !strings.Contains(out, "built without the dev ldflags") {
		t.Fatalf("no warning:\n%s", out)
	}
	devReachability = "true"
	if _, out := execute(t, "dev", "--nodes", "0"); strings.Contains(out, "dev ldflags") {
		t.Fatalf("a warning from a dev binary:\n%s", out)
	}
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "publisher.key")

	err, out := execute(t, "keygen", "--out", key)
	if err != nil {
		t.Fatal(err)
	}
	addr := strings.TrimSpace(out)
	first, err := os.ReadFile(key)
	if err != nil || len(addr) != 40 {
		t.Fatalf("address %q, key file %v", addr, err)
	}
	if fi, _ := os.Stat(key); fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", fi.Mode().Perm())
	}

	refused(t, []string{"keygen", "--out", key}, []string{key + " exists", "--force"})
	if b, _ := os.ReadFile(key); string(b) != string(first) {
		t.Fatal("the refused keygen changed the key file")
	}
	refused(t, []string{"keygen", "--out", key, "publisher2.key"}, []string{"unknown command"})

	if err, out = execute(t, "keygen", "--out", key, "--force"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(key); string(b) == string(first) || strings.TrimSpace(out) == addr {
		t.Fatal("--force did not replace the key")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("keygen --force left %d files in the directory, want the key file only", len(entries))
	}
}

// TestClientMessages: the pub and sub commands refuse bad input with a
// message that says what is wrong and what to do, before they connect.
func TestClientMessages(t *testing.T) {
	dir := t.TempDir()
	cluster := filepath.Join(dir, "bps-dev.json")
	c := devCluster{Nodes: []devNode{
		{Name: "broker", API: "http://127.0.0.1:1", Underlays: []string{"/ip4/127.0.0.1/tcp/1/p2p/QmeSEpMSWWWjSNEjHefut4stUVVtoWp2xa85XscELmsR8Q"}},
		{Name: "node-1", API: "http://127.0.0.1:2"},
		{Name: "node-2", API: "http://127.0.0.1:3"},
	}}
	b, _ := json.Marshal(c)
	if err := os.WriteFile(cluster, b, 0o600); err != nil {
		t.Fatal(err)
	}
	brokerOnly := filepath.Join(dir, "broker-only.json")
	c.Nodes = c.Nodes[:1]
	b, _ = json.Marshal(c)
	if err := os.WriteFile(brokerOnly, b, 0o600); err != nil {
		t.Fatal(err)
	}
	empty := writeFile(t, "empty.key", "\n")
	garbage := writeFile(t, "garbage.key", "not a key at all\n")
	zero := writeFile(t, "zero.key", strings.Repeat("0", 64))
	good := filepath.Join(dir, "good.key")
	if err, _ := execute(t, "keygen", "--out", good); err != nil {
		t.Fatal(err)
	}
	feed := []string{"--cluster", cluster, "--topic", "demo", "--admin", strings.Repeat("ab", 20)}

	for _, tc := range []struct {
		name    string
		args    []string
		want    []string
		notWant []string
	}{
		{"empty key file", append([]string{"pub", "--key-file", empty}, feed...), []string{"key file " + empty + " is empty", "64 hex characters"}, nil},
		{"garbage key file", append([]string{"pub", "--key-file", garbage}, feed...), []string{"key file " + garbage + " does not hold a private key"}, []string{"not a key at all"}},
		{"zero key", append([]string{"pub", "--key-file", zero}, feed...), []string{"not a valid secp256k1 private key"}, nil},
		{"missing key file", append([]string{"pub", "--key-file", filepath.Join(dir, "none.key")}, feed...), []string{"does not exist", "keygen"}, nil},
		{"key and key file", append([]string{"pub", "--key-file", good, "--key", "00"}, feed...), []string{"not both"}, nil},
		{"payload over a chunk", append([]string{"pub", "--key-file", good}, append(feed, "ok", strings.Repeat("x", 4097))...), []string{"message 2 is 4097 bytes", "at most 4096 bytes"}, nil},
		{"node out of range", []string{"sub", "--cluster", cluster, "--node", "7", "--topic", "demo", "--admin", strings.Repeat("ab", 20)}, []string{"--node 7", "--node 1 to 2"}, nil},
		{"negative node", []string{"sub", "--cluster", cluster, "--node", "-1", "--topic", "demo", "--admin", strings.Repeat("ab", 20)}, []string{"--node -1", "--node 1 to 2"}, nil},
		{"node 0", []string{"sub", "--cluster", cluster, "--node", "0", "--topic", "demo", "--admin", strings.Repeat("ab", 20)}, []string{"--node 0 is the broker", "cannot join its own cohorts", "--node 1 to 2"}, nil},
		{"broker only", []string{"sub", "--cluster", brokerOnly, "--topic", "demo", "--admin", strings.Repeat("ab", 20)}, []string{"only the broker", "--nodes 2"}, nil},
		{"missing cluster file", []string{"sub", "--cluster", filepath.Join(dir, "none.json"), "--topic", "demo", "--admin", strings.Repeat("ab", 20)}, []string{"--cluster", "no such file"}, nil},
		{"negative count", []string{"sub", "--cluster", cluster, "--count", "-3", "--topic", "demo", "--admin", strings.Repeat("ab", 20)}, []string{"--count -3"}, nil},
		{"topic name without admin", []string{"sub", "--cluster", cluster, "--topic", "demo"}, []string{"--topic demo without --admin", "--admin", "--gsoc-id"}, nil},
		{"gsoc topic name", []string{"sub", "--cluster", cluster, "--topic", "demo", "--gsoc-id", "x"}, []string{"SOC address"}, nil},
		{"admin and gsoc", []string{"sub", "--cluster", cluster, "--topic", "demo", "--admin", strings.Repeat("ab", 20), "--gsoc-id", "x"}, []string{"one or the other"}, nil},
		{"bad admin", []string{"sub", "--cluster", cluster, "--topic", "demo", "--admin", "0x12"}, []string{"--admin 0x12", "40 hex characters"}, nil},
		{"pub not the admin", append([]string{"pub", "--key-file", good}, feed...), []string{"is not the admin"}, nil},
		{"pub gsoc without id", []string{"pub", "--key-file", good, "--cluster", cluster, "--topic", strings.Repeat("ab", 32)}, []string{"--gsoc-id"}, nil},
		{"mistyped topic address", []string{"sub", "--cluster", cluster, "--topic", "0x" + strings.Repeat("a", 63), "--admin", strings.Repeat("ab", 20)}, []string{"--topic 0x", "64 hex characters"}, nil},
		{"hex-looking topic", []string{"sub", "--cluster", cluster, "--topic", strings.Repeat("a", 63), "--admin", strings.Repeat("ab", 20)}, []string{"looks like a hex address"}, nil},
		{"sub stray argument", []string{"sub", "--cluster", cluster, "--topic", "demo", "--admin", strings.Repeat("ab", 20), "extra"}, []string{"unknown command"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) { refused(t, tc.args, tc.want, tc.notWant...) })
	}
}

// TestClientHelp: cobra takes a back-quoted word of a flag's usage as its
// value's name; the --cluster line reads as a sentence.
func TestClientHelp(t *testing.T) {
	for _, cmd := range []string{"pub", "sub"} {
		err, out := execute(t, cmd, "--help")
		if err != nil {
			t.Fatal(err)
		}
		var line string
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "--cluster ") {
				line = strings.Join(strings.Fields(l), " ")
			}
		}
		if want := "--cluster file the file bee-bps dev --info-file wrote"; !strings.HasPrefix(line, want) {
			t.Errorf("%s --help: %q, want %q…", cmd, line, want)
		}
	}
}

// TestPubState: the state file keeps each feed's next index, other feeds'
// entries survive an update, and a file that is not one is refused by name.
func TestPubState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "publisher.key"+stateSuffix)
	st, err := loadFeedState(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := st.get("a/b"); ok {
		t.Fatal("an empty state has an entry")
	}
	if err := st.set("a/b", 3); err != nil {
		t.Fatal(err)
	}
	other, _ := loadFeedState(path)
	if err := other.set("a/c", 7); err != nil {
		t.Fatal(err)
	}
	if err := st.set("a/b", 5); err != nil {
		t.Fatal(err)
	}
	if err := st.set("a/b", 1); err != nil { // a run with a lower --index
		t.Fatal(err)
	}
	got, err := loadFeedState(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := got.get("a/b"); b != 5 {
		t.Errorf("a/b: %d, want 5 (the highest: an index is never signed twice)", b)
	}
	if c, _ := got.get("a/c"); c != 7 {
		t.Errorf("a/c: %d, want 7 (lost by another feed's update)", c)
	}
	bad := writeFile(t, "bad.feeds", "{")
	if _, err := loadFeedState(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "--index") {
		t.Errorf("bad state file: %v", err)
	}
}
