#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Builds the eBPF object into obj/ (build output, never committed) and
# regenerates its committed Go bindings from c/ with clang and bpf2go (pinned in tools/go.mod at the version of github.com/cilium/ebpf
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
  Vip c/vip.c -- -I"$multiarch" -O2 -mcpu=v3 -g -Wall -Werror

# The object is build output: it goes to obj/, which object.go embeds.
mkdir -p "$out/obj"
mv "$out/vip_bpfel.o" "$out/obj/vip_bpfel.o"

# bpf2go's file carries no license header; Podmin's files all do. Its
# embed of the object beside it is replaced by object.go's embed of obj/.
gen="$out/vip_bpfel.go"
{
  printf '// Podmin <https://podmin.dev>\n// Copyright The Podmin Authors\n// SPDX-License-Identifier: Apache-2.0\n\n'
  sed -e '/^\/\/ Do not access this directly\.$/,/^var _VipBytes \[\]byte$/d' -e '/^	_ "embed"$/d' "$gen"
} >"$gen.tmp"
mv "$gen.tmp" "$gen"
gofmt -w "$gen"
