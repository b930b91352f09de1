// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// pricing charges for depth on bee's accounting (docs/design.md): set by
// SetAccounting, nil when nothing is priced.
type pricing struct{}
