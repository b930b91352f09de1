// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import dto "github.com/prometheus/client_model/go"

// Rationed is how many Joins the node answered without a probe round of
// their own (ration.go).
func (s *Service) Rationed() int {
	var m dto.Metric
	if err := s.metrics.Rationed.Write(&m); err != nil {
		return -1
	}
	return int(m.GetCounter().GetValue())
}

// MaxRepeatJoins is how many plain Joins a peer has served by rounds at a
// root within a minute (ration.go).
const MaxRepeatJoins = maxRepeatJoins

// FirstJoins is how many plain Joins a peer has served as a joiner's at a
// root within a minute (ration.go).
const FirstJoins = firstJoins
