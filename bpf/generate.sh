#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Rebuilds the committed eBPF object and its Go bindings from c/ with clang
# and bpf2go (pinned in tools/go.mod at the version of github.com/cilium/ebpf
# that go.mod requires, because the generated code calls that library). Usage: bpf/generate.sh [OUTPUT_DIR]
# The default output is this directory; the up-to-date test writes to a
# temporary one and compares.
set -euo pipefail
cd "$(dirname "$0")"

out=${1:-.}
mkdir -p "$out"
command -v clang >/dev/null || {
  echo "clang is not installed: apt-get install -y clang llvm libbpf-dev linux-libc-dev" >&2
  exit 1
}
# <asm/types.h> lives in the multiarch include directory on Debian.
multiarch="/usr/include/$(uname -m)-linux-gnu"

go tool -modfile=../tools/go.mod bpf2go \
  -cc clang -target bpfel -go-package bpf -output-dir "$out" -output-stem vip \
  Vip c/vip.c -- -I"$multiarch" -O2 -g -Wall -Werror

# bpf2go's file carries no license header; Podmin's files all do.
gen="$out/vip_bpfel.go"
{
  printf '// Podmin <https://podmin.dev>\n// Copyright The Podmin Authors\n// SPDX-License-Identifier: Apache-2.0\n\n'
  cat "$gen"
} >"$gen.tmp"
mv "$gen.tmp" "$gen"
