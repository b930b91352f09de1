// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ethersphere/bps/pkg/node"
)

// TestLoggerQuietsCancellation: an error whose cause is a cancelled context
// (bee's own shutdown) is no error-level line: dropped below debug
// verbosity, written at debug level at it; other errors stay errors.
func TestLoggerQuietsCancellation(t *testing.T) {
	t.Parallel()

	for _, verbosity := range []string{"warn", "debug"} {
		var out bytes.Buffer
		l, err := node.NewLogger(verbosity, &out, "n")
		if err != nil {
			t.Fatal(err)
		}
		l.Error(context.Canceled, "reserve worker initial radius")
		l.Error(fmt.Errorf("sync: %w", context.Canceled), "wrapped")
		l.Error(errors.New("disk full"), "a real error")

		got := out.String()
		if strings.Count(got, `"level"="error"`) != 1 || !strings.Contains(got, `"msg"="a real error"`) {
			t.Errorf("%s: the real error is not the only error line:\n%s", verbosity, got)
		}
		debugs := strings.Count(got, `"level"="debug"`)
		if want := map[string]int{"warn": 0, "debug": 2}[verbosity]; debugs != want {
			t.Errorf("%s: %d debug lines, want %d:\n%s", verbosity, debugs, want, got)
		}
	}
}
