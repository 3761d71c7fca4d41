#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Runs every test with the race detector, keeps the verbose log, prints the
# package results and a summary, and fails unless the object-store
# conformance suite ran against the local store, a real S3 server and the
# dry run's copy-on-write overlay. It reports whether the real Terraform
# checks of the AWS module ran, and the moto tier's figures; where moto is
# installed, the moto tier must have run.
set -euo pipefail
cd "$(dirname "$0")/.."

# The Terraform checks install the AWS provider offline from a filesystem
# mirror: PODMIN_TF_PROVIDER_MIRROR, else one of Terraform's standard plugin
# directories (the tests look there), else the first mirror found on this
# machine's root file system.
if [[ -z "${PODMIN_TF_PROVIDER_MIRROR:-}" ]] && command -v terraform >/dev/null; then
  provider=$(find / -xdev -maxdepth 9 \( -path /proc -o -path /sys -o -name .terraform -o -path "$(go env GOMODCACHE)" -o -path "$(go env GOCACHE)" \) -prune \
    -o -type f -name 'terraform-provider-aws_*' -path '*/registry.terraform.io/hashicorp/aws/*' -print -quit 2>/dev/null || true)
  if [[ -n "$provider" ]]; then
    export PODMIN_TF_PROVIDER_MIRROR="${provider%%/registry.terraform.io/*}"
    echo "terraform: AWS provider mirror found at $PODMIN_TF_PROVIDER_MIRROR"
  fi
fi

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
# The real Terraform checks of the AWS module: validate and terraform test
# per golden fixture, or the reason they were skipped.
if grep -qE '^\s*--- PASS: TestTerraformModule/validate' "$log"; then
  grep -E '^\s+terraform_test\.go:[0-9]+: terraform (validate|test)' "$log" | sed 's/^ *terraform_test.go:[0-9]*: /terraform module: /' || true
elif grep -qE '^\s*--- SKIP: TestTerraformModule' "$log"; then
  echo "terraform module: skipped: $(grep -A1 -E '^\s*--- SKIP: TestTerraformModule' "$log" | tail -n 1 | sed 's/^ *//')"
else
  echo "terraform module: validate and test did NOT pass (see $log)" >&2
  status=1
fi
# The moto tier: the module applied, re-planned and destroyed for real,
# and setup/destroy through the podmin binary, against moto's server.
# Where moto is installed (CI installs it) it must have run and passed.
moto_tests='TestModuleAgainstMoto|TestLifecycleAgainstMoto'
if grep -qE "^\s*--- (PASS|FAIL): (${moto_tests})" "$log"; then
  grep -E '^\s+moto(_test|lifecycle_test)?\.go:[0-9]+: moto ' "$log" | sed 's/^ *[a-z_]*\.go:[0-9]*: moto /moto tier: /' || true
fi
for t in TestModuleAgainstMoto TestLifecycleAgainstMoto; do
  if grep -qE "^\s*--- PASS: ${t}\b" "$log"; then
    echo "moto tier: ${t} passed"
  elif grep -qE "^\s*--- SKIP: ${t}\b" "$log"; then
    reason=$(grep -A1 -E "^\s*--- SKIP: ${t}\b" "$log" | tail -n 1 | sed 's/^ *//')
    echo "moto tier: ${t} skipped: ${reason}"
    # Skipped for want of Terraform is reported above; for want of moto
    # where moto_server is installed, the machine is broken.
    if command -v moto_server >/dev/null && [[ $reason == *moto* ]]; then
      echo "moto tier: moto_server is installed, so ${t} must run (see $log)" >&2
      status=1
    fi
  else
    echo "moto tier: ${t} did NOT pass (see $log)" >&2
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
