# agent2env — `make run` starts the daemon, `make test` runs every test,
# `make bench` measures the performance targets. Each installs what it needs.

GO        ?= go
BIN       := bin/agent2env
DATA_DIR  ?= /var/lib/agent2env
LISTEN    ?= 127.0.0.1:8080
# Built images are cached here across clones and data directories.
export AGENT2ENV_CACHE_DIR ?= /var/cache/agent2env
SUDO      := $(shell [ "$$(id -u)" -eq 0 ] || echo sudo)

.PHONY: all build deps mcp-clients run test test-go test-api bench vet clean

all: build

deps:
	@scripts/deps.sh

# The stock MCP clients the end-to-end tests use (MCP Inspector, Python mcp),
# cached by version under $(AGENT2ENV_CACHE_DIR)/mcp-clients.
mcp-clients:
	@scripts/mcp-clients.sh

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN) ./cmd/agent2env

run: deps build
	$(SUDO) AGENT2ENV_CACHE_DIR=$(AGENT2ENV_CACHE_DIR) $(BIN) serve --listen $(LISTEN) --data-dir $(DATA_DIR)

vet:
	$(GO) vet ./...
	cd api && $(GO) vet ./...
	@test -z "$$(gofmt -l cmd internal api)" || { echo "gofmt needed:"; gofmt -l cmd internal api; exit 1; }

# The tests that need root, runc and built images run here; as root they
# are on, and CI=true turns a missing prerequisite into a failure.
test: deps build vet mcp-clients
	cd api && $(GO) test -count=1 ./...
	AGENT2ENV_BUILD_TESTS=1 AGENT2ENV_BIN=$(CURDIR)/$(BIN) $(GO) test -count=1 -timeout 15m ./...

bench: deps build
	AGENT2ENV_BIN=$(CURDIR)/$(BIN) $(GO) run ./internal/bench

clean:
	rm -rf bin
