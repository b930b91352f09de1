// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package streamtest_test

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bps/pkg/bps/streamtest"
)

// BenchmarkStream measures one stream direction: a writer of frames and a
// handler that reads them, on an ideal link (the path the broker benchmarks
// use) and on a link with latency and bandwidth, where every write is
// stamped and the reader waits for the stamps (with a window large enough
// that the bandwidth-delay product does not bound it).
func BenchmarkStream(b *testing.B) {
	for _, size := range []int{128, 1024, 4096} {
		b.Run(fmt.Sprintf("ideal/frame=%d", size), func(b *testing.B) {
			benchStream(b, size)
		})
	}
	b.Run("latency=10ms/bandwidth=1GB/frame=1024", func(b *testing.B) {
		benchStream(b, 1024, streamtest.WithBufferSize(64<<20),
			streamtest.WithLinkConfig(streamtest.LinkConfig{Latency: 10 * time.Millisecond, Bandwidth: 1 << 30}))
	})
}

func benchStream(b *testing.B, size int, opts ...streamtest.Option) {
	n := streamtest.New(opts...)
	b.Cleanup(func() { _ = n.Close() })
	a, c := n.NewNode(), n.NewNode()
	done := make(chan int64, 1)
	if err := c.AddProtocol(p2p.ProtocolSpec{Name: protocolName, Version: protocolVersion, StreamSpecs: []p2p.StreamSpec{{
		Name: streamName,
		Handler: func(_ context.Context, _ p2p.Peer, s p2p.Stream) error {
			k, err := io.Copy(io.Discard, s)
			done <- k
			if err != nil {
				return err
			}
			return s.Close()
		},
	}}}); err != nil {
		b.Fatal(err)
	}
	if err := n.Connect(a, c); err != nil {
		b.Fatal(err)
	}
	s, err := a.NewStream(context.Background(), c.Overlay(), nil, protocolName, protocolVersion, streamName)
	if err != nil {
		b.Fatal(err)
	}
	frame := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.Write(frame); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if got := <-done; got != int64(b.N*size) {
		b.Fatalf("read %d bytes, want %d", got, b.N*size)
	}
}
