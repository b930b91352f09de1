// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

// Settlement is when the service's meters apply what they counted; zero if
// it charges nothing.
func (s *Service) Settlement() Settlement {
	if s.pricing == nil {
		return Settlement{}
	}
	return s.pricing.settle
}
