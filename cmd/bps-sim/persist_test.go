// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

// TestRunPersist: with -persist every published update is stored (its SOC
// and wrapped chunk), each gap a single-parented subscriber sees when a
// quarter of the relays fail is recovered from storage with one retrieval
// per missed update, and nothing stays lost.
// The relays fail halfway; the 2 s after leave the orphans time to rejoin
// and see the next update, by which a gap is detected and recovered, even
// on a machine busy with other work (a gap at the very end of a run has no
// next update to show it).
func TestRunPersist(t *testing.T) {
	t.Parallel()
	args := []string{"-nodes", "40", "-cohorts", "1", "-broker-capacity", "4", "-relay-capacity", "3", "-parents", "1",
		"-latency", "2ms", "-rate", "10", "-duration", "4s", "-fail-relays", "0.25", "-probe-wait", "200ms",
		"-backoff-min", "20ms", "-backoff-max", "100ms", "-join-rate", "20", "-join-wait", "30s", "-persist", "-json"}
	var out, stderr bytes.Buffer
	if err := run(context.Background(), args, &out, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	var res Result
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatal(err)
	}
	ps := res.Persistence
	if ps == nil || ps.Uploads != res.Sent || ps.Uploads == 0 || ps.BytesStored < ps.Uploads*2*uint64(res.Tree.SOCSize-105) {
		t.Fatalf("persistence %+v, %d sent (SOC %d B)\n%s", ps, res.Sent, res.Tree.SOCSize, stderr.String())
	}
	if ps.Unrecovered != 0 || ps.Retrievals != ps.Recovered {
		t.Fatalf("persistence %+v: every missed update is one retrieval, recovered", ps)
	}
	if tr := res.Tree; tr.LostKept != 0 || tr.LostRejoined != 0 {
		t.Fatalf("lost %d at nodes that kept a parent, %d at nodes that rejoined, with persistence on\n%s", tr.LostKept, tr.LostRejoined, stderr.String())
	}
}
