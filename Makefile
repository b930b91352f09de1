GO ?= go
GOBIN ?= $(shell $(GO) env GOPATH)/bin
PROTOC_GEN_GO_VERSION ?= v1.36.11
GOLANGCI_LINT_VERSION ?= v2.6.2
# bee's version and API version are set at start from the bee module the
# binary links (pkg/node/version.go), however it is built.
LDFLAGS ?= -s -w
# The dev cluster runs on loopback, where autonat never finds a node
# reachable, and bee's pushsync then never stores a chunk at the closest
# node: uploads bounce until they time out. bee's own switch for local
# clusters reports every node reachable; it is for dev binaries only.
# main.devReachability tells bee-bps dev that the switch is on (it warns
# at start otherwise).
DEV_LDFLAGS ?= -X github.com/ethersphere/bee/v2/pkg/p2p/libp2p.reachabilityOverridePublic=true -X main.devReachability=true
# RUN_ARGS are more options for the dev cluster of make run.
RUN_ARGS ?=
# RUN_KEYS is where make run keeps the nodes' keys across restarts: the
# same overlays, p2p ports and underlays each run, so a page naming the
# broker carries on after a restart. RUN_KEYS= runs with new ones.
RUN_KEYS ?= .bps-dev-keys
TEST_TIMEOUT ?= 15m

.PHONY: all
all: build lint test

.PHONY: build
build:
	$(GO) build -trimpath -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...

# run builds, then runs the binary as make's own child: Ctrl-C reaches it
# directly, and make reports its exit status (go run would exit 1 on the
# interrupt however the program ended).
.PHONY: run
run: dev-bin
	bin/bee-bps-dev dev --info-file bps-dev.json --keys-dir=$(RUN_KEYS) $(RUN_ARGS)

# dev-bin is the binary of make run, with the dev ldflags; the JavaScript
# client's end-to-end tests start their clusters with it. Built as the Go
# end-to-end tests build theirs (no -trimpath, which changes every package's
# compilation): after make test, only the link is left to do.
.PHONY: dev-bin
dev-bin:
	$(GO) build -ldflags "$(LDFLAGS) $(DEV_LDFLAGS)" -o bin/bee-bps-dev ./cmd/bee-bps

# The JavaScript client (js/): installs it as package-lock.json says, builds
# it, runs its unit tests, then its end-to-end tests against dev clusters of
# real nodes (full, then light) that the tests start with bin/bee-bps-dev,
# and the demo room in headless Chromium (/usr/bin/chromium or
# $$CHROMIUM_PATH; skipped without one).
.PHONY: js-test
js-test: dev-bin
	cd js && npm ci --no-audit --no-fund && npm test
	cd js && BPS_DEV_BIN=$(CURDIR)/bin/bee-bps-dev node --test --test-concurrency=1 test/e2e/ test/browser/

# The demo room in a browser (js/demo): a dev cluster and the page, served on
# 127.0.0.1:$(DEMO_PORT); the host's page links the readers'.
DEMO_PORT ?= 8080
.PHONY: demo-web
demo-web: dev-bin
	cd js && npm ci --no-audit --no-fund && npm run build
	cd js && BPS_DEV_BIN=$(CURDIR)/bin/bee-bps-dev DEMO_PORT=$(DEMO_PORT) node scripts/demo.mjs

.PHONY: demo
demo:
	$(GO) run ./cmd/bps-demo

.PHONY: test
test:
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./...

.PHONY: test-race
test-race: test

.PHONY: test-short
test-short:
	$(GO) test -short -count=1 ./...

.PHONY: bench
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/...

# The soak (issue 26): a dev broker and separate bee-bps start processes
# (relays of capacity 2), a subscriber on each, node 1 publishing, relays
# SIGKILLed and restarted on a schedule; a report per node. Then a node
# restarted after a crash resumes a persistent feed (TestRestartResumes).
# SOAK=short is the short run (8 nodes, 5 kills 20 s apart, under 4 minutes;
# CI runs it),
# SOAK=long the operator's (20 nodes, 40 kills 45 s apart, 30 minutes);
# BPS_SOAK_NODES, BPS_SOAK_KILLS, BPS_SOAK_KILL_EVERY, BPS_SOAK_DOWN,
# BPS_SOAK_RATE, BPS_SOAK_SEED, BPS_SOAK_DIR (keep the logs) and
# BPS_SOAK_VERBOSITY override (cmd/bee-bps/soak_e2e_test.go).
SOAK ?= short
.PHONY: soak
soak: dev-bin
	BPS_SOAK=$(SOAK) BPS_SOAK_BIN=$(CURDIR)/bin/bee-bps-dev $(GO) test ./cmd/bee-bps -run '^(TestSoakProcesses|TestRestartResumes)$$' -count=1 -timeout 0 -v

# bps-sim in virtual time (cmd/bps-sim/virtual.go): the run in a synctest
# bubble, from the package's test binary; ARGS are bps-sim's flags:
# make sim-virtual ARGS='-nodes 10000 -cohorts 1 -tree tree.svg'
.PHONY: sim-virtual
sim-virtual:
	$(GO) test ./cmd/bps-sim -run '^TestVirtual$$' -count=1 -timeout 0 -v -args -sim.args="$(ARGS)"

# BPS and gossipsub side by side (bench/, a Go module of its own); flags:
# make bench-compare BENCH_COMPARE_FLAGS='-n 100 -messages 50'
.PHONY: bench-compare
bench-compare:
	cd bench && $(GO) run . $(BENCH_COMPARE_FLAGS)

# BPS against bee pull request #5435 (the GSOC pubsub before BPS), same run:
# 7 bee-bps start and 7 #5435 bee processes on loopback, bee-bps bench-node
# on both, interleaved (docs/benchmarks.md). PR5435 is a bee checkout at
# refs/pull/5435/head; bench/pr5435.sh lists its other settings.
.PHONY: bench-5435
bench-5435:
	GO=$(GO) BPS_LDFLAGS="$(LDFLAGS) $(DEV_LDFLAGS)" PR5435="$(PR5435)" bench/pr5435.sh

.PHONY: fuzz
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzVerify -fuzztime 60s ./pkg/bps/
	$(GO) test -run '^$$' -fuzz FuzzBrokerStream -fuzztime 60s ./pkg/bps/
	$(GO) test -run '^$$' -fuzz FuzzRecoverSOC -fuzztime 60s ./pkg/bps/
	$(GO) test -run '^$$' -fuzz FuzzEnvelopeUp -fuzztime 60s ./pkg/bps/
	$(GO) test -run '^$$' -fuzz FuzzEnvelopeDown -fuzztime 60s ./pkg/bps/

.PHONY: lint
lint:
	@if command -v golangci-lint >/dev/null 2>&1; then golangci-lint run ./...; \
	else echo "golangci-lint not installed (make lint-tools); running go vet"; $(GO) vet ./...; fi

.PHONY: tools
tools:
	GOBIN=$(GOBIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

.PHONY: lint-tools
lint-tools:
	GOBIN=$(GOBIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

.PHONY: openapi
openapi:
	@command -v npm >/dev/null || { echo "npm missing: apt-get install npm"; exit 1; }
	@test -x .cache/openapi/node_modules/.bin/swagger-cli || npm install --prefix .cache/openapi --no-audit --no-fund --silent @apidevtools/swagger-cli@4.0.4
	.cache/openapi/node_modules/.bin/swagger-cli validate openapi/bps.yaml

.PHONY: protobuf
protobuf:
	@command -v protoc >/dev/null || { echo "protoc missing: apt-get install protobuf-compiler"; exit 1; }
	@test -x $(GOBIN)/protoc-gen-go || $(MAKE) tools
	PATH=$(GOBIN):$$PATH $(GO) generate ./pkg/bps/pb/...
