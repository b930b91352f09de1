// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package session

import (
	"errors"
	"testing"
)

// endingSession records the error it was ended with.
type endingSession struct {
	Session // only End is called
	ended   error
}

func (s *endingSession) End(err error) { s.ended = err }

// TestSessionSetLateAdd: a session added after its stream ended learns the
// error the sessions before it were ended with, so a session that joins a
// moment late is ended exactly as the others were (a reset is never told
// as a clean end).
func TestSessionSetLateAdd(t *testing.T) {
	t.Parallel()
	set := newSessionSet()
	early := &endingSession{}
	if err := set.Add(early); err != nil {
		t.Fatalf("add to an open set: %v", err)
	}
	reset := &StreamEndError{Err: errors.New("stream reset")}
	set.endAll(reset)
	if early.ended != reset {
		t.Fatalf("early session ended with %v, want %v", early.ended, reset)
	}
	if err := set.Add(&endingSession{}); err != reset {
		t.Fatalf("late add: %v, want %v", err, reset)
	}
	if set.count() != 0 {
		t.Fatalf("%d sessions held after the end", set.count())
	}
}
