#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# The real-node end-to-end test (make e2e): builds the node's programs
# (make node-tools), runs cmd/podmin-agent/realnode's TestRealNode as root, and
# prints its numbered proofs with their figures. Its last line, also written
# to bin/e2e-summary.txt, says what passed, what failed and what could not
# run here and why; nothing is skipped silently. Exits non-zero only when
# something failed.
set -euo pipefail
cd "$(dirname "$0")/.."

report=bin/e2e-report.txt
log=bin/e2e.log
summary=bin/e2e-summary.txt
mkdir -p bin
rm -f "$report" "$summary"
start=$SECONDS

say() {
  echo "$1" | tee "$summary"
}

if [[ "$(uname -s)" != Linux ]]; then
  say "e2e: NOT RUN: the real node needs Linux (network and mount namespaces, cgroups, gVisor)"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  say "e2e: NOT RUN: the real node needs root (namespaces, mounts, cgroups, kubelet, containerd, eBPF): run sudo make e2e"
  exit 0
fi
if [[ ! -e /proc/self/ns/net || ! -e /proc/self/ns/mnt ]]; then
  say "e2e: NOT RUN: this kernel has no network or mount namespaces"
  exit 0
fi
if ! command -v ip >/dev/null; then
  say "e2e: NOT RUN: iproute2 is missing (make prereqs installs it)"
  exit 0
fi

tools_start=$SECONDS
make --no-print-directory node-tools
echo "make node-tools: $((SECONDS - tools_start)) s"

status=0
PODMIN_E2E_TOOLS="$PWD/bin/tools" PODMIN_E2E_REPORT="$PWD/$report" \
  go test -tags e2e -count=1 -timeout 30m -v -run '^TestRealNode$' ./cmd/podmin-agent/realnode >"$log" 2>&1 || status=$?

echo "--- real node ($log) ---"
[[ -f "$report" ]] && cat "$report"
# shellcheck source=scripts/e2e-summary.sh
source scripts/e2e-summary.sh
e2e_finish e2e "$status" "$report" "$log" "$start"
