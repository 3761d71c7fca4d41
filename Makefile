# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

SHELL := /bin/bash
GO ?= go
BIN ?= bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
PKG := podmin.dev/podmin/internal/version
LDFLAGS := -X $(PKG).Version=$(VERSION) -X $(PKG).Commit=$(COMMIT) -X $(PKG).Date=$(DATE)
# The S3-compatible server the object-store conformance suite runs against,
# built from the tools module (tools/go.mod), which pins test-only programs
# apart from Podmin's own dependencies. Set PODMIN_VERSITYGW to an existing
# binary to use it instead.
VERSITYGW := $(BIN)/tools/versitygw
ifdef PODMIN_VERSITYGW
TEST_TOOLS :=
else
TEST_TOOLS := tools
PODMIN_VERSITYGW := $(abspath $(VERSITYGW))
endif

.PHONY: help build test lint bench generate clean quickstart tools prereqs bpf

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: bpf ## build bin/podmin and bin/podmin-agent with version metadata
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/podmin ./cmd/podmin
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/podmin-agent ./cmd/podmin-agent

tools: $(VERSITYGW) $(BIN)/tools/coredns ## build the test servers pinned in tools/go.mod

$(VERSITYGW): tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $(abspath $@) github.com/versity/versitygw/cmd/versitygw

# CoreDNS for the Service DNS tests and the side-by-side DNS benchmark
# (PODMIN_COREDNS overrides the path the tests look at).
$(BIN)/tools/coredns: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $(abspath $@) github.com/coredns/coredns

prereqs: ## install ShellCheck when missing (apt-get as root, else prints the command)
	scripts/prereqs.sh

test: prereqs lint $(TEST_TOOLS) bpf ## run lint and every test with the race detector (real S3 server included)
	PODMIN_VERSITYGW=$(PODMIN_VERSITYGW) scripts/test.sh

lint: ## gofmt, go vet, license headers, no committed binaries or files over 1 MiB, shellcheck
	scripts/lint.sh

bench: $(TEST_TOOLS) bpf ## run every benchmark
	PODMIN_VERSITYGW=$(PODMIN_VERSITYGW) $(GO) test -run '^$$' -bench . -benchmem ./...

# The eBPF object is build output (bpf/obj/, ignored): compiled with clang
# when it is installed; without clang the agent builds without its
# dataplane program (it reports so) and the eBPF tests skip with a reason.
BPF_OBJ := bpf/obj/vip_bpfel.o
bpf: ## compile the eBPF dataplane program into bpf/obj/ (needs clang)
	@if [ -s $(BPF_OBJ) ] && [ -z "$$(find bpf/c bpf/generate.sh -newer $(BPF_OBJ))" ]; then :; \
	elif command -v clang >/dev/null; then bpf/generate.sh; \
	else echo "clang is not installed: building without the eBPF dataplane program (apt-get install -y clang llvm libbpf-dev linux-libc-dev)" >&2; fi

generate: ## regenerate generated files
	$(GO) generate ./...

quickstart: build ## run the quick start on the embedded local provider
	scripts/quickstart.sh $(BIN)/podmin

clean: ## remove build output
	rm -rf $(BIN)
