# ordersync — build, test, lint, run.
GO       ?= go
BIN      ?= bin/ordersync
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
CONFIG   ?=

.PHONY: build test test-short lint bench bench-ingest bench-rss fuzz run demo clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/ordersync

# The tests need PostgreSQL: scripts/with-postgres uses TEST_DATABASE_URL or the local
# server, or starts a throwaway cluster with initdb when the binaries are installed.
# The pages' browser tests drive Debian's chromium and leave their screenshots in
# test-artifacts/.
test:
	ORDERSYNC_TEST_ARTIFACTS=$(CURDIR)/test-artifacts scripts/with-postgres $(GO) test -race -count=1 -timeout 20m ./...

# Every fuzz target for FUZZTIME each (default 30s); CI runs them for 10s.
FUZZTIME ?= 30s
fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz

# go vet, gofmt, then golangci-lint with .golangci.yaml: the layering's depguard rules,
# govet and the gofmt/goimports formatters. golangci-lint is pinned and run with go run
# from the Go module proxy, so nothing is installed and go.mod does not carry it; the
# first run builds it (about 3 minutes on 2 cores), later ones come from the build cache.
GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GOLANGCI_LINT) run ./...

# The benchmarks (their tables analysed before measuring), then pgbench's single-row
# INSERT and UPDATE ceilings at each concurrency they use, in the same run, and a
# table of each figure beside its ceiling with the ratio. See scripts/bench for
# BENCH, BENCH_PKGS, BENCH_COUNT, CLAIM_BENCHTIME and PGBENCH_SECONDS.
bench:
	GO='$(GO)' scripts/with-postgres scripts/bench

# Webhook ingest over HTTP against pgbench's single-row INSERT ceiling (needs pgbench;
# about 90 s).
bench-ingest:
	scripts/with-postgres $(GO) test -run '^$$' -bench Ingest -benchtime 1x ./internal/server/

# Resident memory of `ordersync run` on the embedded SQLite journal against the 1C
# simulator: the largest VmRSS while idle after start-up and while it drains a backlog
# of orders, beside the goals (needs curl and jq; no database server). See
# scripts/bench-rss for BENCH_RSS_ORDERS, BENCH_RSS_ENV and BENCH_RSS_PROFILE.
bench-rss:
	GO='$(GO)' BIN='$(BIN)' scripts/bench-rss

run: build
	$(BIN) run $(if $(CONFIG),--config $(CONFIG))

demo:
	$(GO) run ./cmd/ordersync demo

clean:
	rm -rf bin

# Debian package: $(DIST)/ordersync_<version>_amd64.deb, the version made Debian-valid
# from VERSION (0.0.0~git<hash> before the first tag). The binary is make build's;
# packaging/cmd/mkdeb stages it with the unit, the example config and the docs, and runs
# nfpm (a pinned version, through go run from the Go module proxy). See packaging/.
DIST ?= dist
.PHONY: deb
deb:
	$(MAKE) --no-print-directory build BIN=$(DIST)/build/ordersync VERSION='$(VERSION)'
	$(GO) run ./packaging/cmd/mkdeb -version '$(VERSION)' -bin $(DIST)/build/ordersync -out $(DIST) -go '$(GO)'
