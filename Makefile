# sf2loki — build, test and tooling entry points. `make test` is what CI runs.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
GO ?= go
BIN := bin/sf2loki
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/sf2loki/sf2loki/cli.version=$(VERSION) -X github.com/sf2loki/sf2loki/cli.commit=$(COMMIT)
TOOLS := $(GO) run ./internal/testenv/cmd/sf2loki-tools
# Build tags of every sf2loki binary: gRPC without x/net/trace, aws-lambda-go without the net/rpc
# mode of the retired go1.x runtime (sf2loki's Lambda mode is a custom runtime), urfave/cli
# without its man-page and Markdown generator. They leave out packages whose initialisation
# every run paid and none used (docs/performance.md). The Dockerfile, .ko.yaml and
# .goreleaser.yaml carry the same list; internal/deploytest checks that they do.
TAGS := grpcnotrace lambda.norpc urfave_cli_no_docs
comma := ,
space := $(subst ,, )
TAGS_FLAG := -tags=$(subst $(space),$(comma),$(TAGS))

# Iteration counts of the concurrency, crash and soak tests (make test runs few, make soak many).
SF2LOKI_TEST_ITERATIONS ?= 3
SOAK_ITERATIONS ?= 100
export SF2LOKI_TEST_ITERATIONS
# How long `make fuzz` (and so `make soak`) fuzzes each Fuzz target.
FUZZTIME ?= 30s

# Packages whose tests run under the race detector (concurrency-sensitive).
RACE_PKGS := $(shell $(GO) list ./store/... ./lease/... ./job/... ./loki/... ./internal/sim/... 2>/dev/null)
ALL_PKGS := $(shell $(GO) list ./... 2>/dev/null)
PLAIN_PKGS := $(filter-out $(RACE_PKGS),$(ALL_PKGS))
TEST_TIMEOUT ?= 40m
# Vet and the tests outside the race run build like the release binary (static, -trimpath, its
# tags), so the Dockerfile test's build of cmd/sf2loki reuses their compiled packages instead of
# compiling everything a second time. The race run needs cgo and builds apart anyway.
STATIC := CGO_ENABLED=0 GOFLAGS='-trimpath $(TAGS_FLAG)'

.PHONY: all build test unit e2e lint fmt generate check-generated tools soak fuzz bench demo clean \
	release-check snapshot image

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath $(TAGS_FLAG) -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sf2loki

## tools: build (once, into the cache outside the repo) every real server and tool the suite uses.
tools:
	$(TOOLS) ensure all

## test: everything CI needs — lint, generated-file drift, the release configuration, unit,
## integration and end-to-end (including a one-platform snapshot of the release).
test: tools lint check-generated release-check
	$(STATIC) SF2LOKI_REQUIRE_REAL_SERVERS=1 $(GO) test -timeout $(TEST_TIMEOUT) $(PLAIN_PKGS)
	SF2LOKI_REQUIRE_REAL_SERVERS=1 $(GO) test -race -timeout $(TEST_TIMEOUT) $(RACE_PKGS)

## unit: the fast subset (no real servers).
unit:
	$(GO) test -short ./...

## e2e: only the tests that run against real servers (named TestE2E*).
e2e: tools
	SF2LOKI_REQUIRE_REAL_SERVERS=1 $(GO) test -timeout $(TEST_TIMEOUT) -run '^TestE2E' ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^vendor/') 2>&1); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(STATIC) $(GO) vet ./...
	"$$($(TOOLS) path golangci-lint)" run --allow-serial-runners ./...
	$(STATIC) $(GO) test -count=1 ./internal/layering/ # dependencies point one way (docs/architecture.md)

fmt:
	gofmt -w $$(git ls-files '*.go')

## generate: regenerate every generated file (config reference, JSON schema, protobuf code).
generate:
	$(GO) run ./internal/gen

## check-generated: fail when a generated file drifts from its source.
check-generated:
	$(GO) run ./internal/gen -check

## soak: iteration-heavy variants of the concurrency and crash tests, then every fuzz target.
soak: fuzz
	SF2LOKI_TEST_ITERATIONS=$(SOAK_ITERATIONS) SF2LOKI_REQUIRE_REAL_SERVERS=1 \
	  $(GO) test -race -timeout 3h -run 'Concurren|Crash|Soak' ./store/... ./lease/... ./job/...
	# The adversarial suite re-executes its test binary as run-once processes: no -race (every
	# child would be instrumented, too slow for its short lease timings).
	SF2LOKI_TEST_ITERATIONS=$(SOAK_ITERATIONS) SF2LOKI_REQUIRE_REAL_SERVERS=1 \
	  $(GO) test -timeout 3h -run 'Adversarial' ./cli/...

## fuzz: fuzz every `func Fuzz...` target of the tree for FUZZTIME each. Targets are found anew
## each time, so ones added later run too. (`make test` runs only their seed corpora in
## testdata/fuzz, as plain `go test` does; a crash found here is written there.)
fuzz:
	@targets=$$(grep -rl --include='*_test.go' --exclude-dir=.git --exclude-dir=vendor '^func Fuzz' . | sort); \
	  if [ -z "$$targets" ]; then echo "no fuzz targets"; exit 1; fi; \
	  for file in $$targets; do \
	    pkg=$$(dirname "$$file"); \
	    for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
	      echo "fuzz: $$pkg $$fn for $(FUZZTIME)"; \
	      $(GO) test -run '^$$' -fuzz "^$$fn$$" -fuzztime $(FUZZTIME) "$$pkg"; \
	    done; \
	  done

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...
	$(GO) run ./internal/bench $(BENCH_FLAGS)

demo:
	$(GO) run $(TAGS_FLAG) ./cmd/sf2loki demo

## release-check: validate .goreleaser.yaml. make test also builds a snapshot of it for this
## machine's platform (internal/deploytest, TestReleaseSnapshot); tags build every platform.
release-check:
	"$$($(TOOLS) path goreleaser)" check

## snapshot: the whole release matrix into dist/ (binaries, Lambda zips, SBOMs, checksums),
## without the image, the signatures or publishing.
snapshot:
	PATH="$$(dirname "$$($(TOOLS) path cyclonedx-gomod)"):$$PATH" \
	  "$$($(TOOLS) path goreleaser)" release --snapshot --clean --skip=ko,sign

## image: build and push a multi-arch image (linux/amd64, linux/arm64) of this checkout without
## a Docker daemon, and print the helm flags that install it:
##   make image IMAGE=registry.example.com/team/sf2loki
image:
	@test -n "$(IMAGE)" || { echo "usage: make image IMAGE=registry.example.com/team/sf2loki" >&2; exit 2; }
	@ref=$$(KO_DOCKER_REPO="$(IMAGE)" VERSION="$(VERSION)" COMMIT="$(COMMIT)" \
	  "$$($(TOOLS) path ko)" build --bare --platform=linux/amd64,linux/arm64 --tags="$(VERSION)" ./cmd/sf2loki); \
	  echo "pushed $$ref"; \
	  echo "install it: helm install sf2loki charts/sf2loki --set image.registry= --set image.repository=$(IMAGE) --set image.digest=$${ref##*@}"

clean:
	rm -rf bin dist
