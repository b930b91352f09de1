// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bpsnet

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/ethersphere/bps/pkg/bps"
)

// Cohort is a SWIP-74 cohort laid out on nodes: a broker, the nodes that
// publish as the admin (the first of them holds the admin key, and the
// admin may publish from several nodes at once), and its subscribers, all
// connected to the broker.
type Cohort struct {
	Spec        *bps.Spec
	Admin       Key
	Broker      *Node
	Publishers  []*Node
	Subscribers []*Node
}

// CohortLayout sizes the cohorts NewCohorts builds.
type CohortLayout struct {
	Cohorts     int
	Publishers  int // nodes publishing as the admin, per cohort; default 1
	Subscribers int // per cohort
	Spare       int // more subscribers, one each to the first Spare cohorts
	// Broker are the service options of the brokers; zero: the Network's.
	Broker *bps.Options
	// Topic names cohort i's topic; default "cohort-<i>".
	Topic func(i int) string
}

// LayoutFor lays nodes out in as few cohorts as hold them with at most
// fanout subscribers each: every cohort a broker, publishers nodes and its
// share of the subscribers.
func LayoutFor(nodes, fanout, publishers int) CohortLayout {
	publishers = max(publishers, 1)
	per := fanout + 1 + publishers
	cohorts := max((nodes+per-1)/per, 1)
	subs := max(nodes-cohorts*(1+publishers), 0)
	return CohortLayout{Cohorts: cohorts, Publishers: publishers, Subscribers: subs / cohorts, Spare: subs % cohorts}
}

// Nodes is how many nodes the layout takes.
func (l CohortLayout) Nodes() int {
	return l.Cohorts*(1+max(l.Publishers, 1)+l.Subscribers) + l.Spare
}

// NewCohorts builds the cohorts of l: Cohorts brokers, then for each cohort
// its publisher and subscriber nodes, each connected to its broker. Nothing
// is joined yet.
func (n *Network) NewCohorts(l CohortLayout) ([]Cohort, error) {
	if l.Publishers == 0 {
		l.Publishers = 1
	}
	if l.Topic == nil {
		l.Topic = func(i int) string { return fmt.Sprintf("cohort-%d", i) }
	}
	bo := n.opts.Service
	if l.Broker != nil {
		bo = *l.Broker
	}
	brokers, err := n.NewNodesWith(l.Cohorts, bo)
	if err != nil {
		return nil, err
	}
	cs := make([]Cohort, l.Cohorts)
	for i := range cs {
		pubs, err := n.NewNodes(l.Publishers)
		if err != nil {
			return nil, err
		}
		k := l.Subscribers
		if i < l.Spare {
			k++
		}
		subs, err := n.NewNodes(k)
		if err != nil {
			return nil, err
		}
		admin := pubs[0].Key()
		cs[i] = Cohort{Spec: Spec(l.Topic(i), admin), Admin: admin, Broker: brokers[i], Publishers: pubs, Subscribers: subs}
		if err := n.ConnectStar(brokers[i], slices.Concat(pubs, subs)); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// SubscribeAll subscribes every subscriber of every cohort once, the
// cohorts in parallel; it returns the subscriptions in cohort order.
func SubscribeAll(ctx context.Context, cs []Cohort) ([][]*bps.Subscription, error) {
	out := make([][]*bps.Subscription, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, nd := range c.Subscribers {
				sub, err := nd.Subscribe(ctx, c.Broker, c.Spec)
				if err != nil {
					errs[i] = fmt.Errorf("cohort %d: subscribe %s: %w", i, nd.Overlay(), err)
					return
				}
				out[i] = append(out[i], sub)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return out, err
		}
	}
	return out, nil
}
