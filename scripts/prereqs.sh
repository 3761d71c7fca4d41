#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Installs the system packages "make test" needs beyond Go, make and git:
# ShellCheck (required), and for the eBPF dataplane tests iproute2 and
# clang/LLVM with the libbpf and kernel headers, and protoc for the generated
# protobuf check (optional: those tests skip
# with a reason without them). As root on Debian or Ubuntu it installs them
# with apt-get; otherwise it prints the command to run and fails only when
# ShellCheck is missing.
set -euo pipefail

need=()
command -v shellcheck >/dev/null || need+=(shellcheck)
for tool in "$@"; do
  command -v "$tool" >/dev/null || need+=("$tool")
done
required=${#need[@]}
command -v ip >/dev/null || need+=(iproute2)
command -v protoc >/dev/null || need+=(protobuf-compiler)
if ! command -v clang >/dev/null || [[ ! -e /usr/include/bpf/bpf_helpers.h ]]; then
  need+=(clang llvm libbpf-dev linux-libc-dev)
fi
((${#need[@]})) || exit 0

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
  exit 0
fi
echo "missing: ${need[*]}: install with: sudo apt-get install -y ${need[*]} (or your system's package manager)" >&2
((required == 0))
