#!/usr/bin/env bash
# Copyright 2026 The BPS Authors. All rights reserved.
# Use of this source code is governed by a BSD-style
# license that can be found in the LICENSE file.
#
# BPS against bee pull request #5435 (the GSOC pubsub that preceded BPS), in
# the same run: builds bee-bps from this checkout and bee from a checkout of
# #5435, starts on loopback a development chain (bee-bps dev --nodes 1), a
# cluster of 7 bee-bps start processes and a cluster of 7 #5435 bee
# processes on it, and runs bee-bps bench-node on both, interleaved. Every
# process it starts binds to 127.0.0.1, runs under timeout(1) and is stopped
# when the script exits.
#
#   git clone https://github.com/ethersphere/bee /tmp/bee-5435
#   git -C /tmp/bee-5435 fetch origin refs/pull/5435/head && git -C /tmp/bee-5435 checkout FETCH_HEAD
#   make bench-5435 PR5435=/tmp/bee-5435
#
# Environment (defaults in brackets): PR5435 the #5435 checkout (or the
# first argument); SUBSCRIBERS [1,5]; MESSAGES [200]; RATE [20]; ROUNDS [2];
# IDLE [20s]; NODES per cluster [7]; VERBOSITY of every node [warn];
# BASE_PORT [21600]: BPS's node i listens on BASE_PORT+i (API) and
# BASE_PORT+100+i (p2p), #5435's on BASE_PORT+20+i and BASE_PORT+120+i;
# MAX_SECONDS [3600]: the processes' lifetime bound; WORK [a new temporary
# directory]: binaries, logs and the output, kept; PPROF_SECONDS [0]: after
# the run, one more of 5 subscribers per cluster, alone, during which the
# broker's, the publishing node's and a subscribing node's CPU profiles
# (bee's /debug/pprof) are taken for that long into WORK/pprof; BENCH_FLAGS: more
# bench-node flags; BPS_FLAGS: more bee-bps start flags for the BPS
# cluster (e.g. --bps-delivery-price 0 --bps-publish-price 0); PPROF_RATE [200]: the profiled runs' messages a
# second (the profiler samples 100 times a second of CPU: a slow run gives
# it few samples); RUN [1]: 0 skips the comparison; HOLD [0]: 1 keeps the
# clusters up at the end until interrupted (Ctrl-C) or MAX_SECONDS; GO [go]; BPS_LDFLAGS: bee-bps's link flags (the
# Makefile passes its dev ones, which bee's own build of #5435 gets too).
set -euo pipefail

PR5435=${PR5435:-${1:-}}
if [[ -z $PR5435 || ! -f $PR5435/go.mod ]]; then
	echo "usage: PR5435=<a bee checkout at refs/pull/5435/head> $0" >&2
	exit 2
fi
if [[ ! -f $PR5435/pkg/pubsub/mode.go ]]; then
	echo "$PR5435 has no pkg/pubsub/mode.go: not a checkout of bee pull request #5435" >&2
	exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PR5435=$(cd "$PR5435" && pwd)
GO=${GO:-go}
SUBSCRIBERS=${SUBSCRIBERS:-1,5}
MESSAGES=${MESSAGES:-200}
RATE=${RATE:-20}
ROUNDS=${ROUNDS:-2}
IDLE=${IDLE:-20s}
NODES=${NODES:-7}
VERBOSITY=${VERBOSITY:-warn}
BASE_PORT=${BASE_PORT:-21600}
MAX_SECONDS=${MAX_SECONDS:-3600}
PPROF_SECONDS=${PPROF_SECONDS:-0}
PPROF_RATE=${PPROF_RATE:-200}
RUN=${RUN:-1}
HOLD=${HOLD:-0}
BPS_LDFLAGS=${BPS_LDFLAGS:--s -w}
WORK=${WORK:-$(mktemp -d -t bench-5435.XXXXXX)}
mkdir -p "$WORK/logs" "$WORK/mod"
echo "bench-5435: working in $WORK"

# --- build -----------------------------------------------------------------
echo "building bee-bps ($ROOT)"
(cd "$ROOT" && $GO build -trimpath -ldflags "$BPS_LDFLAGS" -o "$WORK/bee-bps" ./cmd/bee-bps)
# #5435 pins github.com/ethersphere/batch-archive v0.0.8; build it with this
# project's replace of it (the same API), in a copy of its go.mod, so that
# the checkout is left as it is.
echo "building bee #5435 ($PR5435 at $(git -C "$PR5435" rev-parse --short HEAD 2>/dev/null || echo '?'))"
cp "$PR5435/go.mod" "$WORK/mod/go.mod"
cp "$PR5435/go.sum" "$WORK/mod/go.sum"
archive=$(grep -E '^replace github.com/ethersphere/batch-archive ' "$ROOT/go.mod" | sed -E 's/^replace //; s/ => /=/; s/ v/@v/')
(cd "$PR5435" && $GO mod edit -modfile="$WORK/mod/go.mod" -replace "$archive")
sumkey=$(echo "${archive#*=}" | sed 's/@/ /')
grep -E "^$sumkey(/go.mod)? " "$ROOT/go.sum" >>"$WORK/mod/go.sum"
(cd "$PR5435" && $GO build -modfile="$WORK/mod/go.mod" -trimpath \
	-ldflags "$BPS_LDFLAGS -X github.com/ethersphere/bee/v2.version=2.8.1-pr5435" -o "$WORK/bee-5435" ./cmd/bee)

# --- processes -------------------------------------------------------------
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# spawn name cmd...: runs cmd in the background under timeout, logging to
# logs/name.log.
spawn() {
	local name=$1
	shift
	timeout --signal=INT --kill-after=30s "$MAX_SECONDS" "$@" >"$WORK/logs/$name.log" 2>&1 &
	pids+=($!)
}

# wait_api url: until url/health answers (two minutes at most).
wait_api() {
	for _ in $(seq 240); do
		curl -sf "$1/health" >/dev/null 2>&1 && return 0
		sleep 0.5
	done
	echo "no node at $1 after two minutes; logs in $WORK/logs" >&2
	exit 1
}

# underlay url: the node's first loopback underlay.
underlay() {
	curl -sf "$1/addresses" | grep -o '"/ip4/127\.0\.0\.1/tcp/[0-9]*/p2p/[A-Za-z0-9]*"' | head -1 | tr -d '"'
}

echo "starting the development chain (bee-bps dev --nodes 1)"
spawn chain "$WORK/bee-bps" dev --nodes 1 --api-addr 127.0.0.1:0 --verbosity "$VERBOSITY" --info-file "$WORK/dev.json"
for _ in $(seq 240); do [[ -s $WORK/dev.json ]] && break; sleep 0.5; done
[[ -s $WORK/dev.json ]] || { echo "no development chain; see $WORK/logs/chain.log" >&2; exit 1; }
rpc=$(grep -o '"rpc": *"[^"]*"' "$WORK/dev.json" | cut -d'"' -f4)
netid=$(grep -o '"networkId": *[0-9]*' "$WORK/dev.json" | grep -o '[0-9]*$')

# Bee's options for a full node on the chain, keys and state in memory;
# each cluster on its own network id.
common=(--full-node --mainnet=false --blockchain-rpc-endpoint "$rpc" --block-time 1
	--swap-enable=false --chequebook-enable=false --storage-incentives-enable=false
	--data-dir '' --password bench --allow-private-cidrs --verbosity "$VERBOSITY")

# cluster name binary port0 netid extra...: the broker first, then the
# others bootstrapping from it; their API URLs, comma separated, in $apis,
# the broker's process id (timeout's child) in $broker.
apis=
broker=
cluster() {
	local name=$1 bin=$2 port=$3 id=$4
	shift 4
	local urls=() boot=''
	for i in $(seq 0 $((NODES - 1))); do
		local api=127.0.0.1:$((port + i)) p2p=127.0.0.1:$((port + 100 + i))
		spawn "$name-$i" "$bin" start "$@" "${common[@]}" --network-id "$id" \
			--api-addr "$api" --p2p-addr "$p2p" --bootnode "$boot"
		urls+=("http://$api")
		if ((i == 0)); then
			wait_api "http://$api"
			boot=$(underlay "http://$api")
			broker=$(pgrep -P "${pids[-1]}" | head -1)
		fi
	done
	for a in "${urls[@]}"; do wait_api "$a"; done
	apis=$(IFS=,; echo "${urls[*]}")
}

echo "starting $NODES bee-bps start processes (BPS, default prices) and $NODES #5435 bee processes"
# shellcheck disable=SC2086 # BPS_FLAGS is a list of flags
cluster bps "$WORK/bee-bps" "$BASE_PORT" "$netid" --bps-enable ${BPS_FLAGS:-}
bps_apis=$apis bps_broker=$broker
cluster pr5435 "$WORK/bee-5435" $((BASE_PORT + 20)) $((netid + 1))
pr_apis=$apis pr_broker=$broker
echo "BPS:   $bps_apis"
echo "#5435: $pr_apis"

# --- the run ---------------------------------------------------------------
# shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
# The brokers' CPU from /proc (nanoseconds), not /metrics (ticks of 10 ms:
# ±50 µs a publication over 200).
((RUN == 0)) || "$WORK/bee-bps" bench-node --api "$bps_apis" --pr5435 "$pr_apis" \
	--broker-pid "$bps_broker" --pr5435-broker-pid "$pr_broker" \
	--subscribers "$SUBSCRIBERS" --messages "$MESSAGES" --rate "$RATE" --rounds "$ROUNDS" --idle "$IDLE" \
	${BENCH_FLAGS:-} | tee "$WORK/result.md"

# --- profiles --------------------------------------------------------------
# profile name apis: a run of 5 subscribers on one cluster, long enough
# for the profiles, which start once its warm-up is over.
profile() {
	local name=$1 apis=$2 server=bps
	[[ $name == pr5435 ]] && server=pr5435
	local urls
	IFS=, read -r -a urls <<<"$apis"
	local pid=$bps_broker
	[[ $name == pr5435 ]] && pid=$pr_broker
	"$WORK/bee-bps" bench-node --server "$server" --api "$apis" --broker-pid "$pid" --subscribers 5 --rounds 1 --idle 0 \
		--rate "$PPROF_RATE" --messages $(((PPROF_SECONDS + 10) * PPROF_RATE)) >"$WORK/pprof/$name-run.md" &
	local run=$!
	sleep 5
	local got=()
	for role in broker:0 publisher:1 subscriber:2; do
		curl -sf -o "$WORK/pprof/$name-${role%%:*}.pb.gz" "${urls[${role##*:}]}/debug/pprof/profile?seconds=$PPROF_SECONDS" &
		got+=($!)
	done
	wait "${got[@]}" "$run"
}
if ((PPROF_SECONDS > 0)); then
	mkdir -p "$WORK/pprof"
	profile bps "$bps_apis"
	profile pr5435 "$pr_apis"
	echo "bench-5435: profiles in $WORK/pprof (go tool pprof -top $WORK/pprof/bps-broker.pb.gz)"
fi
((RUN == 0)) || echo "bench-5435: result in $WORK/result.md, logs in $WORK/logs"
if ((HOLD == 1)); then
	echo "bench-5435: holding the clusters (Ctrl-C stops them)"
	wait "${pids[0]}"
fi
