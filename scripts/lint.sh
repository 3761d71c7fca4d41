#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Lint: formatting, vet, license headers and shell scripts. Fails on the first
# class of problem with the files to fix.
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t gofiles < <(git ls-files --cached --others --exclude-standard '*.go')
unformatted=$(gofmt -l "${gofiles[@]}")
if [[ -n "$unformatted" ]]; then
  printf 'gofmt would change these files (run gofmt -w):\n%s\n' "$unformatted" >&2
  exit 1
fi

go vet ./...

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

if ! command -v shellcheck >/dev/null; then
  echo "shellcheck is not installed: apt-get install -y shellcheck (.ci/run does)" >&2
  exit 1
fi
shellcheck "${scripts[@]}"
echo "lint: ok (${#gofiles[@]} Go files, ${#scripts[@]} shell scripts)"
