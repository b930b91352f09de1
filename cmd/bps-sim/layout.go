// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest/bpsnet"
)

// newCohorts builds the cohorts of l the way bpsnet.NewCohorts does —
// brokers first, then each cohort's publishers and subscribers, connected
// to their broker — but every node with service options of its own, so
// that a node that joins through the tree can dial the candidates it is
// given (relays.go).
func (s *sim) newCohorts(l bpsnet.CohortLayout, base bps.Options) ([]bpsnet.Cohort, error) {
	node := func() (*bpsnet.Node, error) {
		self := new(atomic.Pointer[bpsnet.Node])
		o := withDialer(base, s.net, self)
		acc, err := s.priced(&o)
		if err != nil {
			return nil, err
		}
		nds, err := s.net.NewNodesWith(1, o)
		if err != nil {
			return nil, err
		}
		self.Store(nds[0])
		if acc != nil {
			s.ledgers.keep(nds[0], acc)
		}
		if err := s.price(nds[0]); err != nil {
			return nil, err
		}
		return nds[0], nil
	}
	nodes := func(k int) ([]*bpsnet.Node, error) {
		out := make([]*bpsnet.Node, 0, k)
		for range k {
			nd, err := node()
			if err != nil {
				return nil, err
			}
			out = append(out, nd)
		}
		return out, nil
	}
	brokers, err := nodes(l.Cohorts)
	if err != nil {
		return nil, err
	}
	cs := make([]bpsnet.Cohort, l.Cohorts)
	for i := range cs {
		pubs, err := nodes(max(l.Publishers, 1))
		if err != nil {
			return nil, err
		}
		k := l.Subscribers
		if i < l.Spare {
			k++
		}
		subs, err := nodes(k)
		if err != nil {
			return nil, err
		}
		admin := pubs[0].Key()
		cs[i] = bpsnet.Cohort{Spec: bpsnet.Spec(fmt.Sprintf("cohort-%d", i), admin), Admin: admin, Broker: brokers[i], Publishers: pubs, Subscribers: subs}
		if err := s.net.ConnectStar(brokers[i], slices.Concat(pubs, subs)); err != nil {
			return nil, err
		}
	}
	return cs, nil
}
