// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package bps_test

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ethersphere/bee/v2/pkg/log"
	"github.com/ethersphere/bps/pkg/bps"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// syncBuffer is a log sink the nodes' goroutines write to.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// metricValue is the value of svc's counter named name.
func metricValue(t *testing.T, svc *bps.Service, name string) float64 {
	t.Helper()
	for _, c := range svc.Metrics() {
		if col, ok := c.(prometheus.Counter); ok && strings.Contains(col.Desc().String(), `"bee_bps_`+name+`"`) {
			var m dto.Metric
			if err := col.Write(&m); err != nil {
				t.Fatal(err)
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// TestRepairVisible covers issue 26's operator view: a node whose only
// parent dies logs the loss and the reattachment at info level, with the
// cause and how long it went without a parent, and counts that time and
// the repair.
func TestRepairVisible(t *testing.T) {
	t.Parallel()
	mt := newMTree(t, 4, 2, 2, func(a key) *bps.Spec { return feedSpec(t, "repair-visible", a) })
	mt.subscribeAll()
	o := relayOptions(2)
	o.SingleParent = true
	var sink syncBuffer
	o.Logger = log.NewLogger("test", log.WithSink(&sink), log.WithVerbosity(log.VerbosityInfo))
	victim := newNode(t, mt.net, o)
	for _, nd := range append([]*tnode{mt.broker}, mt.nodes...) {
		if err := mt.net.Connect(victim.Node, nd.Node); err != nil {
			t.Fatal(err)
		}
	}
	sub := subscribe(t, victim, mt.broker, mt.sp)
	parents := sub.Parents()
	if len(parents) != 1 || parents[0].Equal(mt.broker.Overlay()) {
		t.Fatalf("parents %v, want one relay", parents)
	}
	if v := metricValue(t, victim.svc, "repairs"); v != 0 {
		t.Fatalf("%v repairs before any loss", v)
	}
	before := victim.rec.count(parentOK)
	mt.net.Remove(findNode(mt.nodes, parents[0]).Node)
	victim.rec.wait(t, "liveness fault", kind(bps.EventFault))
	victim.rec.waitN(t, before+1, "rejoined", parentOK)
	if v := metricValue(t, victim.svc, "repairs"); v != 1 {
		t.Errorf("repairs %v, want 1", v)
	}
	if v := metricValue(t, victim.svc, "parentless_seconds"); v <= 0 {
		t.Errorf("parentless_seconds %v, want more than 0", v)
	}
	if v := metricValue(t, victim.svc, "repair_seconds"); v <= 0 {
		t.Errorf("repair_seconds %v, want more than 0", v)
	}
	out := sink.String()
	for _, want := range []string{`"msg"="bps: parent lost"`, `"parents_left"=0`, `"msg"="bps: repaired"`, `"cause"=`, `"duration"=`} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %s:\n%s", want, out)
		}
	}
}

// TestSingleParentLossRepairsAtOnce is issue 26's outage: a node that had
// asked for a second parent for minutes — the tree had no room — has its
// next request minutes away (the retry doubles, to maxRepairWait). When its
// one parent dies it must rejoin at once, not when that request is due:
// the armed retry used to hold the repair, cutting the node and its whole
// subtree off for the rest of the wait (44–52 s on the soak). Synctest's
// clock runs the minutes.
func TestSingleParentLossRepairsAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		// broker (1 stream) → a (1 child) → v: no room for v's second parent.
		mt := newMTreeWith(t, 2, bps.Options{Bounds: bps.Bounds{MaxStreamsPerCohort: 1}, Timing: bps.Timing{Inactivity: time.Hour}}, 1,
			func(a key) *bps.Spec { return feedSpec(t, "single-parent-loss", a) })
		mt.subscribeAll()
		a, v := mt.nodes[0], mt.nodes[1]
		sub := mt.subs[1]
		if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(a.Overlay()) {
			t.Fatalf("v's parents %v, want a alone", ps)
		}
		// Minutes of requests for a second parent, each refused.
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		before := v.rec.count(parentOK)
		lost := time.Now()
		mt.net.Remove(a.Node)
		v.rec.waitN(t, before+1, "v attached again", parentOK)
		if d := time.Since(lost); d > 5*time.Second {
			t.Fatalf("v attached again %s after its one parent died, want within the probe wait (5s)", d)
		}
		if ps := sub.Parents(); len(ps) != 1 || !ps[0].Equal(mt.broker.Overlay()) {
			t.Fatalf("v's parents %v, want the broker, whose slot a left", ps)
		}
	})
}
