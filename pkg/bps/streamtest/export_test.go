// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest

// MarksCap is the capacity of the marks of what s receives: what a stream on
// a link that delays holds per write in flight.
func MarksCap(s *Stream) int {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	return cap(s.c.dirs[1-s.side].marks)
}
