// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package devchain

// SetOnBlock makes the block loop call f with each new head. Set it before
// Start.
func SetOnBlock(c *Chain, f func(uint64)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.onBlock = f
}
