// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestDemo: every subscriber prints every update, in order, and the broker
// reports them accepted with no counter moved.
func TestDemo(t *testing.T) {
	var out strings.Builder
	if err := run(&out, 2, 3, "demo-test"); err != nil {
		t.Fatal(err)
	}
	for s := range 2 {
		var got []string
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, fmt.Sprintf("subscriber %d ", s)) {
				got = append(got, l[strings.Index(l, "index="):strings.Index(l, " payload")])
			}
		}
		if strings.Join(got, ",") != "index=0,index=1,index=2" {
			t.Fatalf("subscriber %d printed %v\n%s", s, got, out.String())
		}
	}
	if !strings.Contains(out.String(), "accepted=3 cursor=3") || !strings.Contains(out.String(), "queue_reset:0") {
		t.Fatalf("broker summary missing:\n%s", out.String())
	}
}
