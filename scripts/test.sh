#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Runs every test with the race detector, keeps the verbose log, prints the
# package results and a summary, and fails unless the object-store
# conformance suite ran against the local store, a real S3 server and the
# dry run's copy-on-write overlay.
set -euo pipefail
cd "$(dirname "$0")/.."

log=${TEST_LOG:-bin/test.log}
mkdir -p "$(dirname "$log")"
status=0
go test -race -count=1 -timeout 20m -v ./... >"$log" 2>&1 || status=$?

# Package lines, failures and their output.
grep -E '^(ok|FAIL|---|panic:|\s+--- FAIL)|^\S+\.go:[0-9]+:|no test files' "$log" | grep -v -- '--- PASS' | grep -v -- '--- SKIP' || true

passed=$(grep -cE '^\s*--- PASS' "$log" || true)
failed=$(grep -cE '^\s*--- FAIL' "$log" || true)
skipped=$(grep -cE '^\s*--- SKIP' "$log" || true)

for backend in local versitygw overlay; do
  if grep -qE "^\s*--- PASS: TestConformance/${backend}" "$log"; then
    echo "conformance suite: ran and passed against ${backend}"
  else
    echo "conformance suite: did NOT pass against ${backend} (see $log)" >&2
    status=1
  fi
done
if ((skipped)); then
  echo "skipped tests:"
  grep -E '^\s*--- SKIP' "$log" || true
fi
echo "full log: $log"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
exit "$status"
