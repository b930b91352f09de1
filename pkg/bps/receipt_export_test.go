// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// TellReceipts sends every multihop parent stream's untold receipt and
// waits until each is written (what Settle does first), applying nothing.
func (s *Service) TellReceipts() { s.tellReceipts() }

// UnackedMax is how many deliveries a parent writes past a child's last
// receipt.
const UnackedMax = unackedMax

// UnackedStart and UnackedGrow are the window's slow start: a parent
// writes UnackedStart deliveries past no receipt, and UnackedGrow more
// for each delivery a receipt acknowledges.
const (
	UnackedStart = unackedStart
	UnackedGrow  = unackedGrow
)
