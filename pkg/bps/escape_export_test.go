// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// EscapeMinWait is the shortest interval between two gap escapes of one
// subscription.
const EscapeMinWait = escapeMinWait
