// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package node

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bee/v2/pkg/metrics"
	beenode "github.com/ethersphere/bee/v2/pkg/node"
)

// ParseVerbosity reads bee's verbosity option: 0 or silent, 1 or error, 2 or
// warn, 3 or info, 4 or debug, 5 or trace. Silent is log.VerbosityNone, for
// which NewLogger discards everything.
func ParseVerbosity(v string) (level log.Level, err error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "0", "silent":
		return log.VerbosityNone, nil
	case "1", "error":
		return log.VerbosityError, nil
	case "2", "warn":
		return log.VerbosityWarning, nil
	case "3", "info":
		return log.VerbosityInfo, nil
	case "4", "debug":
		return log.VerbosityDebug, nil
	case "5", "trace":
		// bee maps trace to the first V level above debug.
		return log.VerbosityDebug + 1, nil
	}
	return 0, fmt.Errorf("unknown verbosity level %q", v)
}

// NewLogger builds a logger the way NewBee needs it: bee's log defaults are
// pinned first with log metrics on (NewBee registers the logger's metrics and
// panics without them) and timestamps. name, if not empty, is added to every
// line as node_name.
func NewLogger(verbosity string, sink io.Writer, name string) (log.Logger, error) {
	level, err := ParseVerbosity(verbosity)
	if err != nil {
		return nil, err
	}
	// Pins bee's process-wide defaults on the first call in the process;
	// later calls, from here or anywhere, change nothing.
	log.ModifyDefaults(log.WithTimestamp(), log.WithLogMetrics())
	if level == log.VerbosityNone {
		sink = io.Discard
	} else {
		sink = &quietCancel{w: sink, debug: level >= log.VerbosityDebug}
	}
	l := log.NewLogger(beenode.LoggerName, log.WithSink(sink), log.WithVerbosity(level))
	if name != "" {
		return l.WithValues("node_name", name).Register(), nil
	}
	return l.Register(), nil
}

// quietCancel is the sink of a node's logger. bee logs at error level
// events an operator has nothing to act on, which are written at debug
// level instead (dropped below debug verbosity). bee writes each line with
// one Write. Two such events:
//   - work that its own shutdown cancels: v2.8.1's storer, waiting for a
//     network storage radius that a small private network never reports,
//     logs "reserve worker initial radius" "context canceled" on every stop
//     of a full node — an error line whose error ends in "context canceled";
//   - a chunk the network does not deliver: bee's GET /chunks/{address}
//     logs "read chunk failed" at error level, without its cause, for a
//     retrieval that found no holder ("no peers left", the timeout) — and
//     the node's own recovery (SWIP-65) asks for updates that were never
//     persisted, a line per update of every gap. bee logs the cause at
//     debug just before; the session is told the gap, and the recovery logs
//     it with its reason (pkg/session, at debug).
type quietCancel struct {
	w     io.Writer
	debug bool // debug lines are written
}

var (
	levelError = []byte(`"level"="error"`)
	levelDebug = []byte(`"level"="debug"`) // as long as levelError
	canceled   = regexp.MustCompile(`"error"="[^"]*context canceled"`)
	// bee's GET /chunks/{address} handler's line for a failed retrieval.
	chunkLogger = []byte(`"logger"="node/api/get_chunk_by_address"`)
	chunkFailed = []byte(`"msg"="read chunk failed"`)
)

// expected reports whether an error line p is one of the events above.
func expected(p []byte) bool {
	return canceled.Match(p) || bytes.Contains(p, chunkLogger) && bytes.Contains(p, chunkFailed)
}

func (q *quietCancel) Write(p []byte) (int, error) {
	if !bytes.Contains(p, levelError) || !expected(p) {
		return q.w.Write(p)
	}
	if !q.debug {
		return len(p), nil
	}
	return q.w.Write(bytes.Replace(p, levelError, levelDebug, 1))
}

// errNoLogMetrics explains the panic checkLogMetrics prevents.
var errNoLogMetrics = errors.New("logger has no log metrics: bee's log defaults were pinned (by a log.NewLogger call) before log.ModifyDefaults(log.WithLogMetrics()); build loggers with node.NewLogger, before any other logger in the process")

// checkLogMetrics reports whether NewBee can register l's metrics. NewBee
// calls Metrics on any logger that has it, and that panics on a logger built
// without log metrics.
func checkLogMetrics(l log.Logger) (err error) {
	c, ok := l.(metrics.Collector)
	if !ok {
		return nil
	}
	defer func() {
		if recover() != nil {
			err = errNoLogMetrics
		}
	}()
	if len(c.Metrics()) == 0 {
		return errNoLogMetrics
	}
	return nil
}
