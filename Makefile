# feval build, test, demo and benchmarks. Needs only Go; everything else is
# installed into ./bin (Go tools) or from Debian (system packages) on first use.

GO        ?= go
BIN       := $(CURDIR)/bin
export GOTOOLCHAIN := local
export PATH := $(BIN):$(PATH)

REGISTRY_VERSION := v3.1.2
ORAS_VERSION     := v1.3.6
COSIGN_VERSION   := v3.1.3
STATICCHECK_VERSION := v0.8.2

FEVAL := $(BIN)/feval
TOOLS := $(BIN)/registry $(BIN)/oras $(BIN)/cosign

.PHONY: all build tools test demo bench lint fuzz clean debian-deps node-deps fixture-upstream

all: build

build: $(FEVAL)

$(FEVAL): $(shell find . \( -name '*.go' -o -name '*.py' \) -not -path './bin/*' -not -path './meter/testdata/*') go.mod go.sum
	$(GO) build -o $@ ./cmd/feval

tools: $(TOOLS)

$(BIN)/registry:
	GOBIN=$(BIN) $(GO) install github.com/distribution/distribution/v3/cmd/registry@$(REGISTRY_VERSION)

$(BIN)/oras:
	GOBIN=$(BIN) $(GO) install oras.land/oras/cmd/oras@$(ORAS_VERSION)

$(BIN)/cosign:
	GOBIN=$(BIN) $(GO) install github.com/sigstore/cosign/v3/cmd/cosign@$(COSIGN_VERSION)

# System packages from Debian that tests and the demo use.
debian-deps:
	@need=""; \
	[ -x /usr/bin/python3 ] || need="$$need python3"; \
	command -v gcc >/dev/null 2>&1 || need="$$need gcc libc6-dev"; \
	command -v curl >/dev/null 2>&1 || need="$$need curl"; \
	command -v npm >/dev/null 2>&1 || need="$$need nodejs npm"; \
	[ -f /usr/lib/python3/dist-packages/torch/__init__.py ] || need="$$need python3-torch"; \
	[ -f /usr/lib/python3/dist-packages/pytest/__init__.py ] || need="$$need python3-pytest"; \
	if [ -n "$$need" ]; then \
	  echo "installing Debian packages:$$need"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$need; \
	fi

# Every test: unit, conformance against a real registry, CLI scripts, interop
# with oras and cosign. The tests start and stop their own registry.
$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# gofmt, go vet and staticcheck must be clean.
lint: $(BIN)/staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...

test: debian-deps build tools lint node-deps
	$(GO) test -race -timeout 30m $$($(GO) list ./... | grep -v '/cmd/feval$$')
	$(GO) test -timeout 30m ./cmd/feval

# The main job end to end on the embedded local store.
demo: debian-deps build tools $(BIN)/genrollouts $(BIN)/genoptask $(BIN)/genscentask $(BIN)/fixture-upstream
	./scripts/demo.sh
	./scripts/demo-optimizer.sh
	./scripts/demo-scenarios.sh

$(BIN)/genrollouts: $(shell find fixtures -name '*.go') go.mod go.sum
	$(GO) build -o $@ ./fixtures/cmd/genrollouts

# The official openai npm client that the meter's tests drive, pinned by its
# lockfile.
node-deps: debian-deps
	cd meter/testdata/openai-client && npm ci --no-audit --no-fund

# The fixture upstream (deterministic stand-ins for the allowlisted model APIs)
# for the demo and for trying 'feval meter serve' by hand.
fixture-upstream: $(BIN)/fixture-upstream

$(BIN)/fixture-upstream: $(shell find fixtures/upstream fixtures/cmd/fixture-upstream -name '*.go') go.mod go.sum
	$(GO) build -o $@ ./fixtures/cmd/fixture-upstream
$(BIN)/genscentask: $(shell find fixtures protocol/scenarios -name '*.go' -o -name '*.py' -o -name '*.json' -o -name '*.md') go.mod go.sum
	$(GO) build -o $@ ./fixtures/cmd/genscentask

$(BIN)/genoptask: $(shell find fixtures -name '*.go' -o -name '*.py') go.mod go.sum
	$(GO) build -o $@ ./fixtures/cmd/genoptask

bench: build tools debian-deps
	./scripts/bench.sh

fuzz:
	./scripts/fuzz.sh

clean:
	rm -rf $(BIN)
