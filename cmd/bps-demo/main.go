// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

// Command bps-demo runs a BPS cohort in one process: a broker, a publisher
// and a few subscribers, each a pkg/bps service on its own node of the
// in-memory network (pkg/bps/streamtest). The publisher claims its stream
// with a fresh key, publishes feed updates, and every subscriber prints what
// it receives after verifying it end to end. It is the protocol alone; the
// real bee node is `bee-bps dev`.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/crypto"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

func main() {
	subscribers := flag.Int("subscribers", 3, "subscriber nodes")
	messages := flag.Int("messages", 5, "feed updates to publish")
	topic := flag.String("topic", "bps-demo", "feed topic (hashed)")
	flag.Parse()
	if err := run(os.Stdout, *subscribers, *messages, *topic); err != nil {
		fmt.Fprintln(os.Stderr, "bps-demo:", err)
		os.Exit(1)
	}
}

// run brings up the cohort, publishes messages updates and prints what
// every subscriber receives to out.
func run(out io.Writer, subscribers, messages int, topic string) error {
	var mu sync.Mutex // the subscribers print concurrently
	printf := func(format string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, format, a...)
	}

	net := streamtest.New()
	defer func() { _ = net.Close() }()
	node := func() (*streamtest.Node, *bps.Service, error) {
		nd := net.NewNode()
		svc, err := bps.New(nd, nd.Overlay(), bps.Options{})
		if err != nil {
			return nil, nil, err
		}
		return nd, svc, nd.AddProtocol(svc.Protocol())
	}
	brokerNode, broker, err := node()
	if err != nil {
		return err
	}
	defer func() { _ = broker.Close() }()
	printf("broker     %s\n", brokerNode.Overlay())

	key, err := crypto.GenerateSecp256k1Key()
	if err != nil {
		return err
	}
	signer := crypto.NewDefaultSigner(key)
	admin, err := signer.EthereumAddress()
	if err != nil {
		return err
	}
	topicHash, err := crypto.LegacyKeccak256([]byte(topic))
	if err != nil {
		return err
	}
	spec, err := bps.NewFeedSpec(topicHash, admin.Bytes())
	if err != nil {
		return err
	}
	printf("cohort     topic=%q admin=%s\n", topic, admin)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for i := range subscribers {
		nd, svc, err := node()
		if err != nil {
			return err
		}
		defer func() { _ = svc.Close() }()
		if err := net.Connect(nd, brokerNode); err != nil {
			return err
		}
		sub, err := svc.Subscribe(ctx, brokerNode.Overlay(), spec)
		if err != nil {
			return fmt.Errorf("subscriber %d: %w", i, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for d := range sub.C() {
				printf("subscriber %d  index=%d payload=%q\n", i, d.Index, d.Payload())
				if d.Index == uint64(messages-1) {
					_ = sub.Close()
				}
			}
		}()
	}

	pubNode, pubSvc, err := node()
	if err != nil {
		return err
	}
	defer func() { _ = pubSvc.Close() }()
	if err := net.Connect(pubNode, brokerNode); err != nil {
		return err
	}
	pub, err := pubSvc.Publish(ctx, brokerNode.Overlay(), spec, bps.PublishOptions{Addr: admin.Bytes(), Signer: signer})
	if err != nil {
		return fmt.Errorf("publisher: %w", err)
	}
	for i := range messages {
		payload := fmt.Sprintf("update %d at %s", i, time.Now().Format(time.TimeOnly))
		if err := pub.PublishUpdate(ctx, uint64(i), []byte(payload)); err != nil {
			return fmt.Errorf("publish %d: %w", i, err)
		}
		printf("published  index=%d\n", i)
	}
	wg.Wait()
	for _, c := range broker.Cohorts() {
		printf("broker     cohort %s accepted=%d cursor=%d counters=%v\n", c.Spec, c.Accepted, c.Cursor, c.Counters)
	}
	return pub.Close()
}
