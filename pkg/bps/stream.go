// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/ethersphere/bee/v2/pkg/p2p"
	"github.com/ethersphere/bee/v2/pkg/swarm"
)

// clientStream is what subscriptions and publishers share: the stream, its
// reader goroutine, and the end-of-life signalling.
type clientStream struct {
	s       *Service
	broker  swarm.Address
	spec    *Spec
	stream  p2p.Stream
	started time.Time

	quit     chan struct{} // closed by Close or abort
	quitOnce sync.Once
	done     chan struct{} // closed when the reader has ended
	err      error         // why it ended; read after done
}

func (cs *clientStream) abort() {
	cs.quitOnce.Do(func() {
		close(cs.quit)
		_ = cs.stream.Reset()
	})
}

// closeWait bounds how long a clean close waits for the broker's side.
const closeWait = 5 * time.Second

// closeClean ends the stream cleanly: our side closes, the broker sees EOF
// and closes its own. It waits for the reader to end, at most closeWait,
// then resets.
func (cs *clientStream) closeClean() error {
	cs.quitOnce.Do(func() {
		close(cs.quit)
		_ = cs.stream.Close()
	})
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-cs.done:
		return nil
	case <-t.C:
		_ = cs.stream.Reset()
		<-cs.done
		return fmt.Errorf("bps: close: broker did not end the stream within %s", closeWait)
	}
}

// Done is closed when the stream has ended.
func (cs *clientStream) Done() <-chan struct{} { return cs.done }

// Err is why the stream ended: nil if it was closed by us or ended cleanly by
// the broker. Valid after Done is closed.
func (cs *clientStream) Err() error {
	select {
	case <-cs.done:
		return cs.err
	default:
		return nil
	}
}

// Broker is the overlay of the broker this stream is attached to.
func (cs *clientStream) Broker() swarm.Address { return cs.broker }

// Spec is the cohort this stream joined.
func (cs *clientStream) Spec() *Spec { return cs.spec }

// run starts the reader on a goroutine owned by the Service; read handles one
// frame and returns false to stop.
func (cs *clientStream) run(h handle, read func(fr *frameReader) error, fr *frameReader, onEnd func()) error {
	s := cs.s
	s.handles.add(h)
	ok := s.goOwned(func() {
		defer close(cs.done)
		defer s.handles.remove(h)
		defer onEnd()
		var err error
		for err == nil {
			err = read(fr)
		}
		select {
		case <-cs.quit:
			cs.err = nil // we ended it
		default:
			if errors.Is(err, ErrEndOfStream) {
				cs.err = err
				_ = cs.stream.Close()
				return
			}
			if errors.Is(err, io.EOF) {
				cs.err = nil
				_ = cs.stream.FullClose()
			} else {
				cs.err = err
				_ = cs.stream.Reset()
			}
		}
		s.streamEnded(cs.broker, cs.spec, cs.started, cs.err)
	})
	if !ok {
		s.handles.remove(h)
		_ = cs.stream.Reset()
		close(cs.done)
		return ErrClosed
	}
	return nil
}

// closeWrite closes stream for writing, the peer reading EOF after what was
// written, if the stream can half-close (bee's libp2p streams can); else it
// closes the stream whole. It reports whether it half-closed.
func closeWrite(stream p2p.Stream) (half bool, err error) {
	if cw, ok := stream.(interface{ CloseWrite() error }); ok {
		return true, cw.CloseWrite()
	}
	return false, stream.FullClose()
}

// writeLoop writes the Ack and then every queued frame to a subscriber stream.
// One timer per stream bounds each write; a stalled write kills the member.
// The cohort's end is the last frame: the writer writes END_OF_STREAM, if
// the stream receives it, closes our side and returns.
func (s *Service) writeLoop(m *member, ack []byte) error {
	t := time.AfterFunc(time.Hour, func() { m.kill(errWriteTimeout) })
	t.Stop()
	defer t.Stop()
	write := func(frame []byte) error {
		t.Reset(s.opts.WriteTimeout)
		_, err := m.stream.Write(frame)
		t.Stop()
		return err
	}
	if err := write(ack); err != nil {
		m.kill(err)
		return fmt.Errorf("write ack: %w", err)
	}
	for {
		select {
		case <-m.quit:
			return nil
		case f := <-m.queue:
			if f.end {
				m.ending.Store(true)
			}
			if f.b != nil {
				if err := write(f.b); err != nil {
					m.kill(err)
					return fmt.Errorf("write delivery: %w", err)
				}
			}
			if f.svc > 0 {
				m.told.Store(f.svc)
			}
			if f.end {
				m.endTimer = time.AfterFunc(s.opts.EndGrace, func() { m.kill(errEndGrace) })
				if _, err := closeWrite(m.stream); err != nil {
					m.kill(err)
					return fmt.Errorf("close at the end: %w", err)
				}
				return nil
			}
		}
	}
}

// withDeadline runs f, resetting stream if f has not returned within d or
// when ctx or the service ends first. p2p.Stream has no deadlines; a reset is
// how a blocked read or write is ended.
func (s *Service) withDeadline(ctx context.Context, stream p2p.Stream, d time.Duration, f func() error) error {
	t := time.AfterFunc(d, func() { _ = stream.Reset() })
	stopCtx := context.AfterFunc(ctx, func() { _ = stream.Reset() })
	stopSvc := context.AfterFunc(s.ctx, func() { _ = stream.Reset() })
	err := f()
	timedOut := !t.Stop()
	stopCtx()
	stopSvc()
	if err != nil && timedOut {
		return fmt.Errorf("%w after %s: %w", context.DeadlineExceeded, d, err)
	}
	return err
}
