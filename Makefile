# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0

SHELL := /bin/bash
GO ?= go
BIN ?= bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)
DATE ?= $(shell date -u +%Y-%m-%dT%H:%M:%SZ)
# Evaluated once, so size-check compares exactly what the build injected.
VERSION := $(VERSION)
COMMIT := $(COMMIT)
DATE := $(DATE)
PKG := podmin.dev/podmin/internal/version
# Release builds are static (CGO_ENABLED=0), stripped of symbols and DWARF
# (-s -w) and free of local paths (-trimpath). grpcnotrace drops gRPC's
# golang.org/x/net/trace, whose html/template pages would make the linker
# keep every exported method of every type in the agent (builtins/deps
# builds --agent-source agents with the same flags).
BUILD_FLAGS := -trimpath -tags grpcnotrace
LDFLAGS := -s -w -X $(PKG).Version=$(VERSION) -X $(PKG).Commit=$(COMMIT) -X $(PKG).Date=$(DATE)
# Size limits in bytes of the release binaries; every node downloads the
# agent when it boots.
MAX_PODMIN ?= 50000000
MAX_AGENT ?= 36000000
# The S3-compatible server the object-store conformance suite runs against,
# built from the tools module (tools/go.mod), which pins test-only programs
# apart from Podmin's own dependencies. Set PODMIN_VERSITYGW to an existing
# binary to use it instead.
VERSITYGW := $(BIN)/tools/versitygw
ifdef PODMIN_VERSITYGW
TEST_TOOLS :=
else
TEST_TOOLS := $(VERSITYGW) $(BIN)/tools/coredns
PODMIN_VERSITYGW := $(abspath $(VERSITYGW))
endif
# The real node of make e2e: kubelet, containerd (and ctr), gVisor's runsc
# and shim, and the CNI plugins, each pinned in its own module under
# tools/node/ so their dependency versions stay those their releases build
# with and never move versitygw's or CoreDNS's. Each is rebuilt only when
# its module's go.sum changes; the Go build cache makes a rebuild on a
# fresh checkout mostly linking.
NODE := $(BIN)/tools
NODE_TOOLS := $(NODE)/kubelet $(NODE)/containerd $(NODE)/ctr $(NODE)/runsc $(NODE)/containerd-shim-runsc-v1 \
	$(NODE)/cni/ptp $(NODE)/cni/host-local $(NODE)/cni/loopback

.PHONY: help build release size-check test lint bench generate clean quickstart tools node-tools prereqs bpf e2e e2e-cluster

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z0-9-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: bpf ## build static, stripped bin/podmin and bin/podmin-agent with version metadata
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -ldflags '$(LDFLAGS)' -o $(BIN)/podmin ./cmd/podmin
	CGO_ENABLED=0 $(GO) build $(BUILD_FLAGS) -ldflags '$(LDFLAGS)' -o $(BIN)/podmin-agent ./cmd/podmin-agent

# make release VERSION=1.2.3 builds dist/v1.2.3/: podmin and podmin-agent
# for linux/amd64 and linux/arm64, static and stripped, the eBPF object
# embedded, with SHA256SUMS and SHA512SUMS. arm64 is cross-compiled (CGO
# off), so one machine builds both. The CI workflow publishes it on a tag.
DIST ?= dist
release: bpf ## build a versioned release (VERSION=1.2.3) for linux/amd64 and arm64 with checksums into dist/v$(VERSION)/
	scripts/release.sh '$(VERSION)' '$(DIST)' '$(COMMIT)' '$(DATE)'

size-check: build ## check the release binaries: static, stripped, within their size limits, version metadata
	scripts/size-check.sh $(BIN) $(MAX_PODMIN) $(MAX_AGENT) '$(VERSION)' '$(COMMIT)' '$(DATE)'

tools: $(VERSITYGW) $(BIN)/tools/coredns $(NODE_TOOLS) ## build the test-only programs pinned under tools/ (test servers, the real node)

node-tools: $(BIN)/tools/coredns $(NODE_TOOLS) ## build only what make e2e runs: the real node's programs and CoreDNS

$(VERSITYGW): tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $(abspath $@) github.com/versity/versitygw/cmd/versitygw

# CoreDNS for the Service DNS tests and the side-by-side DNS benchmark
# (PODMIN_COREDNS overrides the path the tests look at).
$(BIN)/tools/coredns: tools/go.mod tools/go.sum
	cd tools && $(GO) build -o $(abspath $@) github.com/coredns/coredns

# Version of a module as tools/node/<name>/go.mod pins it.
node_version = $(shell cd tools/node/$(1) && $(GO) list -m -f '{{.Version}}' $(2))
$(NODE)/kubelet: tools/node/kubelet/go.mod tools/node/kubelet/go.sum
	v=$(call node_version,kubelet,k8s.io/kubernetes); m=$${v#v}; m=$${m%%.*}; n=$${v#v*.}; n=$${n%%.*}; \
	cd tools/node/kubelet && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $@) \
	  -ldflags "-X k8s.io/component-base/version.gitVersion=$$v -X k8s.io/component-base/version.gitMajor=$$m -X k8s.io/component-base/version.gitMinor=$$n" \
	  k8s.io/kubernetes/cmd/kubelet
$(NODE)/containerd $(NODE)/ctr: tools/node/containerd/go.mod tools/node/containerd/go.sum
	cd tools/node/containerd && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $@) \
	  -ldflags "-X github.com/containerd/containerd/v2/version.Version=$(call node_version,containerd,github.com/containerd/containerd/v2)" \
	  github.com/containerd/containerd/v2/cmd/$(notdir $@)
$(NODE)/runsc: tools/node/gvisor/go.mod tools/node/gvisor/go.sum
	cd tools/node/gvisor && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $@) \
	  -ldflags "-X gvisor.dev/gvisor/runsc/version.version=$(call node_version,gvisor,gvisor.dev/gvisor)" gvisor.dev/gvisor/runsc
$(NODE)/containerd-shim-runsc-v1: tools/node/gvisor/go.mod tools/node/gvisor/go.sum
	cd tools/node/gvisor && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $@) gvisor.dev/gvisor/shim
$(NODE)/cni/ptp $(NODE)/cni/loopback: tools/node/cni/go.mod tools/node/cni/go.sum
	cd tools/node/cni && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $@) github.com/containernetworking/plugins/plugins/main/$(notdir $@)
$(NODE)/cni/host-local: tools/node/cni/go.mod tools/node/cni/go.sum
	cd tools/node/cni && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $@) github.com/containernetworking/plugins/plugins/ipam/host-local

e2e: prereqs bpf ## run a real node here (root): kubelet, containerd and gVisor run Podmin's Pods, twelve proofs with figures
	scripts/e2e.sh

# make test runs the real cluster after the real node; E2E_CLUSTER=0
# leaves it out.
E2E_CLUSTER ?= 1
e2e-cluster: prereqs bpf $(TEST_TOOLS) ## run a real cluster of three nodes here (root): rollouts, a leader's death and a lost node under a client, with figures
	PODMIN_VERSITYGW=$(PODMIN_VERSITYGW) scripts/e2e-cluster.sh

prereqs: ## install ShellCheck when missing (apt-get as root, else prints the command)
	scripts/prereqs.sh

test: prereqs lint $(TEST_TOOLS) bpf size-check ## run lint, the release-binary check, every test with the race detector (real S3 server included), then the real node (make e2e) and the real cluster (make e2e-cluster; as root)
	PODMIN_VERSITYGW=$(PODMIN_VERSITYGW) scripts/test.sh
	scripts/e2e.sh
	@if [ "$(E2E_CLUSTER)" = 1 ]; then PODMIN_VERSITYGW=$(PODMIN_VERSITYGW) scripts/e2e-cluster.sh; \
	else echo "e2e-cluster: left out of make test (E2E_CLUSTER=$(E2E_CLUSTER))"; fi

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
