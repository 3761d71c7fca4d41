#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Lint: formatting, vet, license headers, committed binaries and large files,
# and shell scripts. Fails on the first class of problem with the files to fix.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t gofiles < <(git ls-files --cached --others --exclude-standard '*.go')
unformatted=$(gofmt -l "${gofiles[@]}")
if [[ -n "$unformatted" ]]; then
  printf 'gofmt would change these files (run gofmt -w):\n%s\n' "$unformatted" >&2
  exit 1
fi

# -tags e2e: the real-node test (make e2e) is vetted too.
go vet -tags e2e ./...

# Test-only programs are pinned in tools/go.mod; their dependencies must not
# leak into Podmin's own module graph.
if leaked=$(go list -m all | grep -E '^github\.com/(versity/|Azure/|AzureAD/|segmentio/kafka-go|nats-io/|rabbitmq/)'); then
  printf 'modules of test-only tools are in go.mod (pin tools in tools/go.mod, then go mod tidy):\n%s\n' "$leaked" >&2
  exit 1
fi

missing=()
for f in "${gofiles[@]}"; do
  [[ -f "$f" ]] || continue
  if [[ "$(head -n 3 "$f")" != $'// Podmin <https://podmin.dev>\n// Copyright The Podmin Authors\n// SPDX-License-Identifier: Apache-2.0' ]]; then
    missing+=("$f")
  fi
done
mapfile -t scripts < <(git ls-files --cached --others --exclude-standard '*.sh' '.ci/run')
for f in "${scripts[@]}" Makefile; do
  [[ -f "$f" ]] || continue
  grep -q 'SPDX-License-Identifier: Apache-2.0' "$f" || missing+=("$f")
done
if ((${#missing[@]})); then
  printf 'missing the license header:\n%s\n' "${missing[@]}" >&2
  exit 1
fi

# Build output and other large files never belong in the repository. A
# tracked file may not be a compiled binary (any ELF file, compiled eBPF
# objects included, Mach-O, PE), nor larger than 1 MiB unless it is listed here with
# the reason it must be that large.
max_bytes=$((1 << 20))
large_allowed=(
)
mapfile -d '' -t tracked < <(git ls-files -z --cached --others --exclude-standard)
binaries=()
large=()
for f in "${tracked[@]}"; do
  [[ -f "$f" && ! -L "$f" ]] || continue
  magic=$(head -c 20 "$f" | od -An -tx1 -v | tr -d ' \n')
  case "$magic" in
    7f454c46*) binaries+=("$f (ELF)") ;;  # executables, shared and relocatable objects (eBPF too)
    feedface* | feedfacf* | cefaedfe* | cffaedfe* | cafebabe*) binaries+=("$f (Mach-O)") ;;
    4d5a*00*) binaries+=("$f (PE)") ;;  # "MZ" and a binary DOS header
  esac
  size=$(stat -c %s "$f")
  if ((size > max_bytes)); then
    allowed=false
    for a in "${large_allowed[@]}"; do [[ "$a" == "$f" ]] && allowed=true; done
    $allowed || large+=("$f ($size bytes)")
  fi
done
if ((${#binaries[@]})); then
  printf 'executable binaries must not be committed (build output goes to bin/, which is ignored):\n%s\n' "${binaries[@]}" >&2
  exit 1
fi
if ((${#large[@]})); then
  printf 'files larger than 1 MiB must not be committed (list test data that must be larger in scripts/lint.sh):\n%s\n' "${large[@]}" >&2
  exit 1
fi

if ! command -v shellcheck >/dev/null; then
  echo "shellcheck is not installed: apt-get install -y shellcheck (make prereqs and .ci/run do)" >&2
  exit 1
fi
shellcheck "${scripts[@]}"
echo "lint: ok (${#gofiles[@]} Go files, ${#scripts[@]} shell scripts, ${#tracked[@]} files without binaries or files over 1 MiB)"
