# The two commands a newcomer needs are `make run` and `make test`; both
# install what they need (Go modules, pi and Node 22 through npm ci).

GO      ?= go
NPM     ?= npm
GOBIN   := $(CURDIR)/bin/tools
export PATH := $(GOBIN):$(PATH)

# Linters, pinned: staticcheck for Go 1.26, workflowcheck for determinism.
STATICCHECK_VERSION   := v0.8.2
WORKFLOWCHECK_VERSION := v0.6.0

# npm ci writes this file; it is newer than the lockfile once installed.
PI_STAMP := extension/node_modules/.package-lock.json

# Arguments for `make run`, e.g. make run ARGS="--port 17233".
ARGS ?=

.PHONY: all build buildprogress pi-extension extension ext-check run demo tour chaos browser terminal postgres cluster-tools test check test-ext test-docker test-go testprogress lint lint-go vet fmt staticcheck workflowcheck bench deps pi tools clean dist registry

all: deps build

## build: compile bin/subagents (client verbs, serve, worker), bin/subagents-dev (dev and demo: the embedded server), bin/scripted-model (docs/walkthrough.md), the pi extension, and write bin/pi
# One go build for the three, through cmd/buildprogress: the first one
# compiles the Temporal server, about 7 minutes on two cores, and shows a
# line of progress instead of silence; a warm one adds nothing.
build: extension bin/pi buildprogress
	$(GOBIN)/buildprogress -- $(GO) build -v -o bin/ ./cmd/subagents ./cmd/subagents-dev ./cmd/scripted-model

# Built each time, as testprogress is: a no-op when nothing changed.
buildprogress:
	$(GO) build -o $(GOBIN)/buildprogress ./cmd/buildprogress

## dist: release binaries (CGO off, stripped) and the npm packages a pi user installs, into dist/: make dist PLATFORMS=linux-amd64 builds one platform
# Four platforms' Temporal servers take long to cross-compile on two cores:
# the tests build this machine's only.
PLATFORMS ?= linux-amd64,linux-arm64,darwin-amd64,darwin-arm64
dist: extension
	$(GO) run ./cmd/dist -platforms $(PLATFORMS) -out dist

## registry: verdaccio, the npm registry server the install tests publish dist/npm to (loopback only), from e2e/registry's lockfile
REGISTRY_STAMP := e2e/registry/node_modules/.package-lock.json
registry: $(REGISTRY_STAMP)
$(REGISTRY_STAMP): e2e/registry/package.json e2e/registry/package-lock.json pi
	cd e2e/registry && $(NPM) ci --no-audit --no-fund --ignore-scripts --loglevel=error

## pi-extension: for the pi user: build, then install the extension in your pi (pi install records it in ~/.pi/agent/settings.json, or in $PI_CODING_AGENT_DIR)
# A local path is loaded from where it is, not copied: a later `make build`
# is what pi loads next. pi install needs no network for it.
pi-extension: build
	PI_OFFLINE=1 bin/pi install "$(CURDIR)/extension"
	@echo 'Start pi with bin/pi (or put $(CURDIR)/bin first on PATH and run pi).'

# bin/pi runs the lockfile's pi, from any folder, on the Node 22 npm ci put
# beside it: pi needs Node >= 22.19 and the machine's node may be older.
bin/pi: Makefile
	@mkdir -p bin
	@printf '%s\n' '#!/bin/sh' \
		'# pi from extension/package-lock.json on the Node 22 npm ci installed beside it' \
		'# (pi needs Node >= 22.19). Written by make build; see docs/walkthrough.md.' \
		'tree=$$(dirname "$$(dirname "$$(readlink -f "$$0")")")' \
		'bin="$$tree/extension/node_modules/.bin"' \
		'if [ ! -x "$$bin/pi" ]; then echo "pi is not installed in $$tree/extension: run make pi-extension there" >&2; exit 127; fi' \
		'PATH="$$bin:$$PATH" exec "$$bin/pi" "$$@"' >$@.tmp
	@chmod +x $@.tmp && mv $@.tmp $@

## deps: Go modules and pi (with Node 22) from the lockfile
deps: pi
	$(GO) mod download
	cd docker && $(GO) mod download

pi: $(PI_STAMP)

# npm ci through cmd/npmci: on a machine whose node is older than 22, every
# package of pi warns EBADENGINE (45 lines); npmci says in one line why that is
# harmless (pi runs on the Node 22 installed beside it) and keeps the rest.
$(PI_STAMP): extension/package.json extension/package-lock.json
	$(GO) build -o $(GOBIN)/npmci ./cmd/npmci
	$(GOBIN)/npmci -dir extension -- $(NPM) ci --no-audit --no-fund
	@touch $(PI_STAMP)

# Node 22 and the tools npm ci put beside pi.
NODE_PATH_ENV := PATH="$(CURDIR)/extension/node_modules/.bin:$$PATH"

## extension: compile the pi extension (extension/src/*.ts) to the one file pi loads, extension/dist/extension.js
extension: pi
	cd extension && $(NODE_PATH_ENV) node --run build

# The compiled extension in the repository is what its sources compile to.
ext-check: pi
	@mkdir -p bin && cp extension/dist/extension.js bin/extension.js.committed
	@cd extension && $(NODE_PATH_ENV) node --run build
	@cmp -s bin/extension.js.committed extension/dist/extension.js || { echo "extension/dist/extension.js did not match extension/src/*.ts: rebuilt it, commit the result"; exit 1; }

## run: the service: embedded durable Temporal, its UI and a worker
run: deps build
	./bin/subagents dev $(ARGS)

## test: everything: lint, the workflow and activity packages under -race, all tests
# Go's linters run beside npm ci, two jobs at a time: installing pi (and
# the Node 22 beside it) keeps about one of the two cores busy for its
# 20 s on a warm npm cache, and the linters need no pi.
test: browser postgres terminal
	$(MAKE) --no-print-directory -j2 deps registry lint-go
	$(MAKE) --no-print-directory ext-check test-ext test-docker test-go

# docker/ is a module of its own: its parsers stay out of the service's build.
test-docker: testprogress
	cd docker && $(TEST_ENV) $(GOBIN)/testprogress -- $(GO) test -json ./...

# The extension's pure parts, with the Node 22 that npm ci put beside pi.
test-ext: pi
	@echo "extension tests (a dot per passing test; failures in full at the end)"
	cd extension && $(NODE_PATH_ENV) node --test --test-reporter=dot test/*.test.ts

# The e2e package runs for minutes (real pi, a PostgreSQL cluster it builds
# the Temporal server for): beyond go test's default 10 minute limit on a
# cold CI cache.
# The upgrade test's next release (-tags upgradeprobe: a changed workflow
# step) replays every history this release recorded.
# The race detector slows the activities package five- to tenfold: past go
# test's default 10 minutes per package on a loaded two-core machine.
# The workflow and activity packages run once, under -race, and
# TestCluster on its own, both in the background beside every other
# package and test (the last line): the e2e tests run three at a time,
# each mostly waiting on pi and the server (one at a time kept 0.75 of the
# two cores busy; three, about 1.3), and 1,372 s of them took 698-882 s.
# The background runs mostly wait too (TestCluster's 30 s outage and the
# cluster's start, 0.56 of a core over its 95 s alone; the -race run 0.63
# of a core over 105-145 s): run after them, the other packages' link and
# the e2e package's first tests left the cores half idle for about 90 s.
# Each run's failures print; the recipe fails if any did.
test-go: testprogress
	$(TEST_ENV) $(GOBIN)/testprogress -- $(GO) test -json -run '^TestCluster$$' -timeout 20m ./e2e/ & cluster_pid=$$!; \
	$(TEST_ENV) $(GOBIN)/testprogress -- $(GO) test -json -race -timeout 20m ./activities/... ./workflows/... & race_pid=$$!; \
	$(TEST_ENV) $(GOBIN)/testprogress -- $(GO) test -json -tags upgradeprobe -run 'TestReplay|TestReleaseStep' ./workflows/ && \
	$(TEST_ENV) $(GOBIN)/testprogress -- $(GO) test -json -parallel 3 -skip '^TestCluster$$' -timeout 30m $$($(GO) list ./... | grep -v -E '/(activities|workflows)$$'); rest=$$?; \
	wait $$race_pid; race=$$?; wait $$cluster_pid; cluster=$$?; \
	[ $$race -eq 0 ] || echo "make test: the -race run of ./activities/... ./workflows/... failed (its failures above)"; \
	[ $$cluster -eq 0 ] || echo "make test: TestCluster failed (its failures above)"; \
	[ $$rest -eq 0 ] || echo "make test: a test of the other packages failed (its failures above)"; \
	[ $$rest -eq 0 ] && [ $$race -eq 0 ] && [ $$cluster -eq 0 ]

# check is the edit-test loop (README "Contributing"): lint, the extension's
# unit tests and every Go package whose tests need no real pi (all but
# the end-to-end tests, the activities that run children and the dev
# command's), about two minutes with warm caches. make test runs all of it
# and the rest.
check: deps lint test-ext testprogress
	$(TEST_ENV) $(GOBIN)/testprogress -- $(GO) test -json -timeout 10m $$($(GO) list ./... | grep -v -E '/(e2e|activities|cli/dev)$$')

# The tests link without DWARF (-ldflags=-w), their test binaries and the
# programs they build: nothing they run reads it (a panic's stack comes from
# the pclntab), and it is about a fifth of each link's CPU (the end-to-end
# test binary 16.4-17.2 CPU seconds, 12.5-13.7 without); the linker took 149
# of make test's 1,342 CPU seconds. Only go test gets it: the linters' caches
# are keyed by the build flags (staticcheck ran 3 minutes cold under them),
# and make build keeps DWARF for a debugger. The user's own GOFLAGS (the
# environment's, or what go env -w saved, which a GOFLAGS in the
# environment would hide) come first; an -ldflags among them gives way.
TEST_ENV = GOFLAGS="$(strip $(shell $(GO) env GOFLAGS) -ldflags=-w)"

# go test through cmd/testprogress: each test's name as it passes (the e2e
# package is silent for minutes otherwise), a failing test's whole output,
# and go test's exit code. Built each time: a no-op when nothing changed.
testprogress:
	$(GO) build -o $(GOBIN)/testprogress ./cmd/testprogress

## terminal: tmux, the terminal the fleet view's test drives pi in (installed when missing; needs root or sudo)
terminal:
	@if command -v tmux >/dev/null 2>&1; then exit 0; fi; \
	SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	echo "installing tmux for the fleet view's test"; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends tmux

## browser: Debian's chromium for the UI test (installed when missing; needs root or sudo)
browser:
	@if command -v chromium >/dev/null 2>&1 || [ -n "$$SUBAGENTS_CHROMIUM" ]; then exit 0; fi; \
	SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	echo "installing chromium for the UI test"; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends chromium

## postgres: Debian's PostgreSQL for the cluster test (installed when missing; needs root or sudo)
postgres:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null 2>&1; then exit 0; fi; \
	SUDO=; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	echo "installing postgresql for the cluster test"; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends postgresql

## cluster-tools: bin/temporal-server and bin/temporal-sql-tool, from the Temporal module go.mod requires (README, "A cluster on PostgreSQL")
cluster-tools:
	$(GO) build -o bin/temporal-server go.temporal.io/server/cmd/server
	$(GO) build -o bin/temporal-sql-tool go.temporal.io/server/cmd/tools/sql

## lint: go vet, gofmt, staticcheck, workflowcheck, the compiled extension up to date
lint: lint-go ext-check

# The linters that read Go only: make test runs them beside npm ci.
lint-go: vet fmt staticcheck workflowcheck

vet:
	$(GO) vet ./...
	cd docker && $(GO) vet ./...

fmt:
	@out=$$(find . -name '*.go' -not -path './extension/node_modules/*' -not -path './e2e/registry/node_modules/*' -not -path './bin/*' | xargs gofmt -l); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

tools: $(GOBIN)/staticcheck $(GOBIN)/workflowcheck

$(GOBIN)/staticcheck:
	GOBIN=$(GOBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

$(GOBIN)/workflowcheck:
	GOBIN=$(GOBIN) $(GO) install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

staticcheck: $(GOBIN)/staticcheck
	staticcheck ./...
	cd docker && staticcheck ./...

workflowcheck: $(GOBIN)/workflowcheck
	workflowcheck ./workflows/...

## demo: the stack with a scripted model; a delegation survives a worker kill (Ctrl-C ends it)
demo: deps build
	./bin/subagents demo $(ARGS)

## tour: every capability once with the scripted model (a delegation, a batch, a plan, a worktree, a question, nesting, a schedule, a crash), each with the command to try it by hand; its service stays up until Ctrl-C
tour: deps build
	./bin/subagents demo --tour $(ARGS)

## chaos: the long reliability suite: 20 worker kills, 5 kills of subagents dev, 1,000 delegations of load, a 30 s cluster outage; figures into BENCHMARKS.md
chaos: deps
	$(GO) test ./e2e -run 'TestChaosWorkerKills|TestChaosDevKills|TestLoadStubDelegations|TestCluster' -count=1 -v -timeout 60m \
		-args -chaos-rounds=20 -dev-kills=5 -load-delegations=1000 -chaos-report=$(CURDIR)/BENCHMARKS.md

## bench: benchmarks, figures into BENCHMARKS.md
bench: deps postgres extension
	$(GO) run ./cmd/bench -out BENCHMARKS.md

clean:
	rm -rf bin
