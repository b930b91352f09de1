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
// (bee's own shutdown), or bee's GET /chunks failing to retrieve a chunk,
// is no error-level line: dropped below debug
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
		// bee's GET /chunks/{address} for a chunk nobody delivers (a
		// recovery of an update never persisted); another handler's line
		// of the same words stays an error.
		l.WithName("api").WithName("get_chunk_by_address").Build().Error(nil, "read chunk failed")
		l.WithName("api").WithName("other_handler").Build().Error(nil, "read chunk failed")

		got := out.String()
		if strings.Count(got, `"level"="error"`) != 2 || !strings.Contains(got, `"msg"="a real error"`) ||
			!strings.Contains(got, `"logger"="node/api/other_handler" "msg"="read chunk failed"`) {
			t.Errorf("%s: the real errors are not the only error lines:\n%s", verbosity, got)
		}
		debugs := strings.Count(got, `"level"="debug"`)
		if want := map[string]int{"warn": 0, "debug": 3}[verbosity]; debugs != want {
			t.Errorf("%s: %d debug lines, want %d:\n%s", verbosity, debugs, want, got)
		}
	}
}
