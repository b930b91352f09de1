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
