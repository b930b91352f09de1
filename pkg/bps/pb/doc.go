// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Package pb holds the BPS wire messages, generated from bps.proto with protoc
// and protoc-gen-go (see the Makefile's protobuf target).
package pb

//go:generate protoc --go_out=. --go_opt=paths=source_relative bps.proto
