// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

//go:build !unix

package main

import "time"

// cpuTime is not measured on this platform.
func cpuTime() time.Duration { return 0 }

// loadAverage is not measured on this platform.
func loadAverage() float64 { return -1 }

// peakRSS is not measured on this platform.
func peakRSS() float64 { return -1 }
