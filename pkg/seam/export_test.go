// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package seam

// CheckType and ReadStruct run the shape check and the read on any struct,
// so tests can feed them look-alikes of node.Bee.
var (
	CheckType  = check
	ReadStruct = read
)
