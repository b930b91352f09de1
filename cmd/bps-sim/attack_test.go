// Copyright 2026 The BPS Authors. All rights reserved.
// Use of this source code is governed by a BSD-style
// license that can be found in the LICENSE file.

package main

import (
	"strings"
	"testing"
	"time"
)

// Every attack at small scale: a cohort of 40 nodes, a broker that admits
// 4 and relays of 3 (a tree five or six deep), 10% of the subscribers
// attacking, three runs at a time. Every honest subscriber joins and stays
// connected to the root, none is dropped for lag or blocklisted, those not
// captured receive what was published while they were attached, few are
// captured,
// and the attack took place (its frames were sent; where it is a
// violation, the attackers were blocklisted for it).
//
// The goals (delivery ≥ 0.999, captured ≤ 2 %) are measured at 1,000
// nodes (docs/benchmarks.md). Here 34 honest nodes and 30 updates make one
// node weigh 3 %, fewer updates pass than the lag detector's window of 64
// (a withholding parent is not dropped yet, and a captured relay starves
// its subtree meanwhile), and under -race on a busy machine a repair
// takes seconds: the bounds below catch a broken defence (a false root or
// a cycle: cut off; a framed parent; joins that fail — forged candidates
// once kept 9 of 38 from joining; one or two joins may outlast the join
// wait under -race on a busy machine), not the last decimal.
//
// Not parallel with the package's other tests: its runs take the cores,
// and theirs measure latencies too.
func TestAttacks(t *testing.T) {
	// Attacks whose frames an honest node must refuse as violations.
	refused := map[string]bool{"candidate-flood": true}
	slots := make(chan struct{}, 3)
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			slots <- struct{}{}
			defer func() { <-slots }()
			sc := DefaultScenario()
			sc.Nodes, sc.Cohorts, sc.BrokerCapacity, sc.RelayCapacity = 40, 1, 4, 3
			sc.Rate, sc.Duration, sc.Latency, sc.Drain = 10, Dur(3*time.Second), Dur(2*time.Millisecond), Dur(5*time.Second)
			sc.JoinRate, sc.JoinWait, sc.ProbeWait = 80, Dur(20*time.Second), Dur(300*time.Millisecond)
			sc.BackoffMin, sc.BackoffMax = Dur(50*time.Millisecond), Dur(500*time.Millisecond)
			sc.Byzantine, sc.Attack, sc.AttackDelay = 0.1, a.name, Dur(500*time.Millisecond)
			if strings.HasPrefix(a.name, "squat") {
				// Two squats each: 4 attackers at 16 would hold 64 of the
				// tree's 118 slots, and the squat is not held (the table
				// at 1,000 nodes: docs/benchmarks.md, "Slot hunting"): what
				// this checks is that it runs, is measured, and costs the
				// honest nodes no delivery.
				sc.AttackFlood = 2
			}
			// Virtual time (virtual.go): the verdict is the protocol's,
			// whatever the load of the machine running it.
			res := runVirtual(t, sc)
			ar := res.Attack
			var table strings.Builder
			_ = writeTable(&table, res)
			var injected uint64
			for _, n := range ar.Injected {
				injected += n
			}
			switch {
			case ar.Attackers != 4 || ar.Honest != 34:
				t.Fatalf("%d attackers, %d honest subscribers", ar.Attackers, ar.Honest)
			case injected == 0 && a.name != "none":
				t.Fatalf("the attack did nothing\n%s", table.String())
			case ar.Expected < 200 || ar.DeliveryRatioFree < 0.9 || ar.NeverJoined > 2 || ar.CutOff > 0:
				// A captured node (every parent an attacker) receives what its
				// attackers pass on: what is promised is delivery at the rest,
				// and that few are captured.
				t.Fatalf("honest delivery %.4f of %d at nodes not captured (%.4f at all), %d never joined, %d cut off\n%s",
					ar.DeliveryRatioFree, ar.ExpectedFree, ar.DeliveryRatio, ar.NeverJoined, ar.CutOff, table.String())
			case ar.HonestDropped > ar.HonestStarved || ar.ViolationsHonest != 0:
				// A captured honest relay lacks what its attackers withheld,
				// and its children drop it: starved, not framed.
				t.Fatalf("honest parents dropped: %d for lag (%d starved), %d for violations (%v)\n%s",
					ar.HonestDropped, ar.HonestStarved, ar.ViolationsHonest, ar.Framed, table.String())
			case ar.CapturedMean > 0.12:
				t.Fatalf("captured: mean %.3f\n%s", ar.CapturedMean, table.String())
			case strings.HasPrefix(a.name, "squat") && (ar.Squats == 0 || ar.SquatDeliveries == 0 || ar.UnpaidUnits == 0):
				t.Fatalf("no slot squatted, or nothing delivered on one: %d squats, %d deliveries, %d units\n%s", ar.Squats, ar.SquatDeliveries, ar.UnpaidUnits, table.String())
			case refused[a.name] && ar.ViolationsAttacker == 0:
				t.Fatalf("no attacker was blocklisted\n%s", table.String())
			case a.name == "claim-replay" && res.Counters["wrong_challenge"] == 0:
				// SWIP-74 Rev 8: a publisher's chunk replayed on another
				// stream is signed under another challenge: dropped and
				// counted, claiming nothing (no penalty: reset past 64).
				t.Fatalf("the replayed claims were not counted wrong_challenge: %v\n%s", res.Counters, table.String())
			}
		})
	}
}
