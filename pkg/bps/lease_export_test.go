// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// The bounds of the root's lease tables (lease.go), for the hostile relay
// tests.
const (
	MaxLeasesPerChild = maxLeasesPerChild
	MaxForeign        = maxForeign
)
