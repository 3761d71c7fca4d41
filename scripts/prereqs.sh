#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Installs the one system package "make test" needs beyond Go, make and git:
# ShellCheck. As root on Debian or Ubuntu it installs it with apt-get;
# otherwise it prints the command to run and fails.
set -euo pipefail

need=()
command -v shellcheck >/dev/null || need+=(shellcheck)
for tool in "$@"; do
  command -v "$tool" >/dev/null || need+=("$tool")
done
((${#need[@]})) || exit 0

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}"
  exit 0
fi
echo "missing: ${need[*]}: install with: sudo apt-get install -y ${need[*]} (or your system's package manager)" >&2
exit 1
