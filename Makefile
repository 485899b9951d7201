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

.PHONY: all build tools test demo bench bench-scale bench-audit lint fuzz clean debian-deps node-deps fixture-upstream reliability

all: build

build: $(FEVAL)

# bin/feval is linked statically (cgo stays on for the Python gate's parser;
# net and os/user use their Go implementations): no dynamic loader at every
# start, which each command and each sandbox init pays.
FEVAL_BUILDFLAGS := -tags netgo,osusergo -ldflags '-linkmode=external -extldflags=-static'

$(FEVAL): $(shell find . \( -name '*.go' -o -name '*.py' \) -not -path './bin/*' -not -path './meter/testdata/*') go.mod go.sum
	$(GO) build -buildvcs=auto $(FEVAL_BUILDFLAGS) -o $@ ./cmd/feval

# The sandbox init (docs/SANDBOX.md), beside bin/feval: small and static, so
# that a sandboxed run does not pay for starting the whole feval binary.
build: $(BIN)/feval-sandbox-init
$(BIN)/feval-sandbox-init: $(shell find sandbox cmd/feval-sandbox-init -name '*.go') go.mod go.sum
	CGO_ENABLED=0 $(GO) build -trimpath -tags feval_sandbox_init -o $@ ./cmd/feval-sandbox-init

tools: $(TOOLS)

$(BIN)/registry:
	GOBIN=$(BIN) $(GO) install github.com/distribution/distribution/v3/cmd/registry@$(REGISTRY_VERSION)

$(BIN)/oras:
	GOBIN=$(BIN) $(GO) install oras.land/oras/cmd/oras@$(ORAS_VERSION)

$(BIN)/cosign:
	GOBIN=$(BIN) $(GO) install github.com/sigstore/cosign/v3/cmd/cosign@$(COSIGN_VERSION)

# System packages from Debian that tests and the demo use: Python with torch
# (optimizer training), pytest (hidden scenario tests), nltk (the IFEval
# reference oracle) and cryptography (the second verifier).
DEBIAN_PYTHON := python3-torch python3-pytest python3-nltk python3-cryptography
# The browser the web viewer's test drives headless.
DEBIAN_BROWSER := chromium
debian-deps:
	@need=""; \
	[ -x /usr/bin/python3 ] || need="$$need python3"; \
	command -v gcc >/dev/null 2>&1 || need="$$need gcc libc6-dev"; \
	command -v curl >/dev/null 2>&1 || need="$$need curl"; \
	for p in $(DEBIAN_PYTHON) $(DEBIAN_BROWSER); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' || need="$$need $$p"; \
	done; \
	command -v npm >/dev/null 2>&1 || need="$$need nodejs npm"; \
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
demo: debian-deps build tools $(BIN)/genrollouts $(BIN)/genmodelround $(BIN)/genoptask $(BIN)/genscentask $(BIN)/fixture-upstream
	./scripts/demo.sh
	./scripts/demo-rollouts-model.sh
	./scripts/demo-optimizer.sh
	./scripts/demo-scenarios.sh

$(BIN)/genrollouts: $(shell find fixtures -name '*.go') go.mod go.sum
	$(GO) build -o $@ ./fixtures/cmd/genrollouts

$(BIN)/genmodelround: $(shell find fixtures model protocol gate -name '*.go') go.mod go.sum
	$(GO) build -o $@ ./fixtures/cmd/genmodelround

$(BIN)/genoptask: $(shell find fixtures -name '*.go' -o -name '*.py') go.mod go.sum
	$(GO) build -o $@ ./fixtures/cmd/genoptask

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

bench: build tools debian-deps $(BIN)/genrollouts
	./scripts/bench.sh

# A round at scale (256 miners, 16 validators, 10k and 100k rows); not part
# of bench or test: it takes minutes and a few GB of disk.
bench-scale:
	./scripts/bench-scale.sh

# feval evaluate against feval evaluate --full as whole processes.
bench-audit: build $(BIN)/genrollouts
	./scripts/bench-audit.sh

fuzz:
	./scripts/fuzz.sh

# The long reliability suite (docs/RELIABILITY.md): SIGKILL at random points of
# pack, push, pull and commit, 32 concurrent committers through the CLI, and
# longer runs of the fault-proxy and hostile-store tests. 'make test' runs the
# fast part of each.
reliability: debian-deps build tools
	FEVAL_RELIABILITY=1 $(GO) test -timeout 90m -run 'Fault|Flipped|Stalled|Concurrent|Hostile|Irregular' -count=1 -v ./cas
	FEVAL_RELIABILITY=1 $(GO) test -tags reliability -timeout 90m -run 'Reliability|RegistryFaults|Hostile|DamagedIndex|ExitCodeClasses' -count=1 -v ./cmd/feval

clean:
	rm -rf $(BIN)
