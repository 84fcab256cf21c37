# agent2env — `make run` starts the daemon, `make test` runs every test,
# `make bench` measures the performance targets. Each installs what it needs.

GO        ?= go
BIN       := bin/agent2env
# The agent alone, which the kubernetes runtime copies into its Pods out of
# the agent2env image (make image): static and stripped, a fifteenth of BIN.
AGENT_BIN := bin/agent2env-agent
DATA_DIR  ?= /var/lib/agent2env
LISTEN    ?= 127.0.0.1:8080
# Built images are cached here across clones and data directories.
export AGENT2ENV_CACHE_DIR ?= /var/cache/agent2env
SUDO      := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)
# What "agent2env version" says; a build outside git says "dev".
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS   := -X github.com/agent2env/agent2env/internal/buildinfo.version=$(VERSION) \
             -X github.com/agent2env/agent2env/internal/buildinfo.commit=$(COMMIT)

.PHONY: all build deps test-deps criu crun mcp-clients run test test-go test-race bench vet tidy docs envd-proto clean kube-binaries kube-background kube-node image web web-check

all: build

deps:
	@scripts/deps.sh

# The daemon's packages and those only the tests and benchmarks use (tmux,
# postgresql, chromium): make run installs none of the latter.
test-deps: crun
	@scripts/deps.sh --tests

# CRIU 4.1.1 with the fix for kernels >= 6.16, built once from Debian's
# source package and cached under $(AGENT2ENV_CACHE_DIR)/criu-<version>-<key>
# (scripts/criu.sh says why): the oci runtime's checkpoint and restore.
criu:
	@scripts/criu.sh >/dev/null

# crun 1.21 built with CRIU against the CRIU above (which it builds first),
# cached under $(AGENT2ENV_CACHE_DIR)/crun-<version>-<key> (scripts/crun.sh
# says why): the OCI runtime binary serve runs sandboxes with by default.
crun:
	@scripts/crun.sh >/dev/null

# The stock clients the tests drive agent2env with (MCP Inspector on Node.js;
# in one Python venv: mcp, openai, anthropic, google-genai, pytest), cached
# by version under $(AGENT2ENV_CACHE_DIR)/peers; scripts/test-peers.sh prints
# the venv's python, which make test passes as AGENT2ENV_PYTHON.
mcp-clients:
	@scripts/test-peers.sh >/dev/null

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/agent2env
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(AGENT_BIN) ./cmd/agent2env-agent
	@# go build leaves an up-to-date binary untouched; the daemon takes the agent
	@# beside it only when it is no older than itself (internal/runtime/oci/agentbin.go).
	touch $(AGENT_BIN)

# crun and CRIU are built (as root: they are cached under the cache dir) but
# not required: without them the daemon runs sandboxes with runc and has no
# snapshots, and says so.
run: deps build
	@$(SUDO) AGENT2ENV_CACHE_DIR=$(AGENT2ENV_CACHE_DIR) scripts/crun.sh >/dev/null || \
		echo "make run: crun and CRIU were not built (see above): the daemon runs sandboxes with runc, without snapshots" >&2
	$(SUDO) AGENT2ENV_CACHE_DIR=$(AGENT2ENV_CACHE_DIR) $(BIN) serve --listen $(LISTEN) --data-dir $(DATA_DIR)

vet: tidy
	$(GO) vet ./...
	cd api && $(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal api)" || { echo "gofmt needed:"; gofmt -l cmd internal api; exit 1; }

# Fails, changing nothing, when "go mod tidy" would change go.mod or go.sum
# of either module.
tidy:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy and commit"; exit 1; }
	@cd api && { $(GO) mod tidy -diff || { echo "api/go.mod/go.sum are not tidy: run go mod tidy in api and commit"; exit 1; }; }

# Rebuilds the web console (web/) into internal/console/dist, which is
# committed and embedded: go build needs no Node.js. Node.js and the npm
# packages are pinned and cached (scripts/web.sh).
web:
	@scripts/web.sh build

# Fails when the committed console build differs from a fresh one.
web-check:
	@scripts/web.sh check

# Regenerates the command reference in docs/cli (a test fails when it is
# out of date).
docs:
	$(GO) generate ./internal/cli

# Regenerates the Go code of E2B's envd protocol (internal/e2b/envdpb) from
# the .proto files copied there, with protoc (Debian's protobuf-compiler)
# and the two plugins at the versions go.mod pins. The generated code is
# committed: a build needs none of this.
envd-proto:
	GOBIN=$(CURDIR)/bin $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go connectrpc.com/connect/cmd/protoc-gen-connect-go
	PATH=$(CURDIR)/bin:$$PATH $(GO) generate ./internal/e2b/envdpb

# The tests that need root, runc and built images run here; as root they
# are on. Under CI (CI set to anything but empty, 0 or false: see
# internal/testenv) a missing prerequisite is a failure, and the tests
# skipped for a reason no install changes are listed at the end. The race
# run comes after the others: its kube tests would wait for the Kubernetes
# binaries, which a cold run builds in the background meanwhile.
test: test-go test-race

# The longest package, $(FIRST_PKG) (its real node), would start among the
# last of go test ./..., which runs packages in order: it runs in a go test
# of its own, started first, beside the go test of every other package. Its
# output is printed after theirs; either failing fails the target.
FIRST_PKG := ./internal/runtime/kube/kubetest
test-go: kube-background test-deps build vet web-check test-python mcp-clients kube-node
	cd api && $(GO) test -count=1 ./...
	status=1 && firststatus=1 && \
	skips=$$(mktemp) && first=$$(mktemp) && trap 'rm -f "$$skips" "$$first"' EXIT && \
	AGENT2ENV_PYTHON=$$(scripts/test-peers.sh) && export AGENT2ENV_PYTHON && \
	AGENT2ENV_CLIENTS=$$(scripts/test-peers.sh --env) && export AGENT2ENV_CLIENTS && \
	AGENT2ENV_NODE_BIN=$$(scripts/web.sh deps) && export AGENT2ENV_NODE_BIN && \
	export AGENT2ENV_SKIP_LOG=$$skips AGENT2ENV_BUILD_TESTS=1 AGENT2ENV_BIN=$(CURDIR)/$(BIN) && \
	firstpkg=$$($(GO) list $(FIRST_PKG)) && pkgs=$$($(GO) list ./... | grep -vxF "$$firstpkg") && \
	{ $(GO) test -count=1 -timeout 40m $(FIRST_PKG) >"$$first" 2>&1 & pid=$$!; } && \
	{ $(GO) test -count=1 -timeout 40m $$pkgs && status=0 || status=$$?; } && \
	{ wait $$pid && firststatus=0 || firststatus=$$?; } && \
	cat "$$first"; \
	if [ -s "$$skips" ]; then echo "skipped (no install changes these):"; sort "$$skips" | sed 's/^/  /'; fi; \
	if [ $$firststatus -ne 0 ]; then echo "FAIL: $(FIRST_PKG) (go test exit $$firststatus, its output above)"; fi; \
	[ $$status -eq 0 ] && [ $$firststatus -eq 0 ]

# The packages whose code runs concurrently, again under the race detector
# (it needs cgo: gcc, CGO_ENABLED=1), as the same user and with the same
# prerequisites as make test. Left out: TestScale, a measurement of a
# thousand Pods that the race detector would only slow down, and
# TestKillLeader, whose daemons are processes of their own (not raced).
RACE_PKGS := ./internal/manager ./internal/contexts ./internal/session ./internal/run ./internal/pool \
	./internal/llm/gate ./internal/llm/archive ./internal/llm/proxy ./internal/runtime/kube
test-race: kube-background test-deps build mcp-clients
	AGENT2ENV_PYTHON=$$(scripts/test-peers.sh) && export AGENT2ENV_PYTHON && \
	AGENT2ENV_CLIENTS=$$(scripts/test-peers.sh --env) && export AGENT2ENV_CLIENTS && \
	CGO_ENABLED=1 AGENT2ENV_BUILD_TESTS=1 AGENT2ENV_BIN=$(CURDIR)/$(BIN) \
		$(GO) test -race -count=1 -timeout 30m -skip '^(TestScale|TestKillLeader)$$' $(RACE_PKGS)

# The agent2env image (the static binary, the agent alone, CA roots, a
# nonroot user) as a `docker save` tarball that docker/podman load, skopeo,
# crane push, ctr import and "agent2env image import" read. Dated by the
# commit: one commit, one digest.
IMAGE ?= agent2env/agent2env
image: deps build
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || echo 0) $(GO) run ./internal/image/mkimage \
		-binary $(BIN) -agent $(AGENT_BIN) -o bin/agent2env-image.tar -version $(VERSION) -tag $(IMAGE):$(VERSION) -tag $(IMAGE):latest

# The Kubernetes binaries the kube runtime's tests run (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, kwok; tier b, the
# default, adds kubelet; KUBE_TIER=a leaves it out), built from the Go
# module proxy and cached under $(AGENT2ENV_CACHE_DIR)/kube: tens of
# minutes cold, nothing warm.
KUBE_TIER ?= b
kube-binaries:
	@scripts/kube-binaries.sh $(KUBE_TIER) >/dev/null

# The same build started in the background at the lowest CPU priority, so
# that a cold make test overlaps it with everything else; the kube tests
# wait for it (scripts/kube-binaries.sh --dir waits while it holds its lock).
kube-background:
	@scripts/kube-binaries.sh --background $(KUBE_TIER) >/dev/null

# What the tier-B tests' real node runs besides the kubelet: Debian's
# containerd (the tests start their own, with its own config and socket),
# runc and CNI plugins, and the static busybox the test images are made
# of; installed when missing.
kube-node:
	@scripts/deps.sh containerd runc containernetworking-plugins busybox-static bash-static iproute2 iptables ipset

# The Python SDK (sdk/python): ruff, mypy --strict, unit tests with coverage,
# and its integration tests against $(BIN); with the SDK's ruff and mypy, the
# repository's other Python too (scripts/lint-python.sh, ruff.toml, mypy.ini);
# its snapshot tests run a daemon with the project's crun and criu.
.PHONY: test-python
test-python: deps build crun
	AGENT2ENV_BIN=$(CURDIR)/$(BIN) scripts/test-python.sh

bench: test-deps build
	AGENT2ENV_BIN=$(CURDIR)/$(BIN) AGENT2ENV_PYTHON=$$(scripts/test-peers.sh) $(GO) run ./internal/bench
	AGENT2ENV_BIN=$(CURDIR)/$(BIN) $(GO) run ./internal/bench -agent-memory 4
	AGENT2ENV_BIN=$(CURDIR)/$(BIN) $(GO) run ./internal/bench -density 2000
	$(GO) test -run '^$$' -bench 'BenchmarkCheckpointRestore|BenchmarkCreateStart' -benchtime 10x ./internal/runtime/oci
	$(GO) test -run '^$$' -bench '^BenchmarkCreateBurst$$' -benchtime 5x ./internal/store/sqlite
	out=$$(mktemp) && trap 'rm -f "$$out"' EXIT && status=0 && \
	AGENT2ENV_NODE_BIN=$$(scripts/web.sh deps) AGENT2ENV_BIN=$(CURDIR)/$(BIN) \
		$(GO) test -count=1 -run TestConsoleInBrowser -v ./internal/e2e >"$$out" 2>&1 || status=$$?; \
	grep -e '^ *BenchmarkConsole' -e 'over the 1 s target' "$$out"; \
	[ $$status -eq 0 ] || { cat "$$out"; exit $$status; }
	@$(MAKE) --no-print-directory bench-kube

# The kubernetes runtime on a real node (tier B) against oci in the same
# run: create → ready, warm-pool claims, exec, with ratios and targets.
# Builds the Kubernetes binaries when they are not cached (tens of minutes
# cold) and installs the node's packages; as non-root it says it skips.
# KUBE_BENCH_N iterations per measurement (default 10).
.PHONY: bench-kube
bench-kube: build kube-binaries kube-node
	AGENT2ENV_BIN=$(CURDIR)/$(BIN) scripts/bench-kube.sh

clean:
	rm -rf bin
