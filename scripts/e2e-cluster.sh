#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# The real-cluster end-to-end test (make e2e-cluster): runs
# cmd/podmin-agent/realcluster's TestRealCluster as root with the node's
# programs of make node-tools and the S3 server of make tools, and prints
# its numbered proofs (1 to 7, with 4b) with their figures. Its last line,
# also written to bin/e2e-cluster-summary.txt, says what passed, what
# failed and what could not run here and why; nothing is skipped
# silently. Exits non-zero only when something failed.
set -euo pipefail
cd "$(dirname "$0")/.."

report=bin/e2e-cluster-report.txt
log=bin/e2e-cluster.log
summary=bin/e2e-cluster-summary.txt
mkdir -p bin
rm -f "$report" "$summary"
start=$SECONDS

say() {
  echo "$1" | tee "$summary"
}

if [[ "$(uname -s)" != Linux ]]; then
  say "e2e-cluster: NOT RUN: the real cluster needs Linux (network and mount namespaces, cgroups, gVisor, eBPF)"
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  say "e2e-cluster: NOT RUN: the real cluster needs root (namespaces, mounts, cgroups, kubelet, containerd, eBPF): run sudo make e2e-cluster"
  exit 0
fi
if [[ ! -e /proc/self/ns/net || ! -e /proc/self/ns/mnt ]]; then
  say "e2e-cluster: NOT RUN: this kernel has no network or mount namespaces"
  exit 0
fi
for prog in ip nsenter; do
  if ! command -v "$prog" >/dev/null; then
    say "e2e-cluster: NOT RUN: $prog is missing (make prereqs installs iproute2; nsenter is util-linux's)"
    exit 0
  fi
done
if ! command -v moto_server >/dev/null; then
  say "e2e-cluster: NOT RUN: moto_server is missing (pip install 'moto[server]'): the agents read the cluster's secrets from SSM Parameter Store"
  exit 0
fi

tools_start=$SECONDS
make --no-print-directory node-tools
if [[ -z "${PODMIN_VERSITYGW:-}" ]]; then
  [[ -x bin/tools/versitygw ]] || make --no-print-directory bin/tools/versitygw
  PODMIN_VERSITYGW="$PWD/bin/tools/versitygw"
fi
echo "make node-tools and versitygw: $((SECONDS - tools_start)) s"

status=0
PODMIN_E2E_TOOLS="$PWD/bin/tools" PODMIN_E2E_REPORT="$PWD/$report" PODMIN_VERSITYGW="$PODMIN_VERSITYGW" \
  go test -tags e2e -count=1 -timeout 45m -v -run '^TestRealCluster$' ./cmd/podmin-agent/realcluster >"$log" 2>&1 || status=$?

echo "--- real cluster ($log) ---"
[[ -f "$report" ]] && cat "$report"
# shellcheck source=scripts/e2e-summary.sh
source scripts/e2e-summary.sh
e2e_finish e2e-cluster "$status" "$report" "$log" "$start"
