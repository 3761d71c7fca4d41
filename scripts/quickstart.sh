#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# The quick start on the embedded local provider: no account, no network.
# Everything lives in a throwaway directory (or $PODMIN_QUICKSTART_DIR).
set -euo pipefail
podmin=${1:-bin/podmin}
podmin=$(cd "$(dirname "$podmin")" && pwd)/$(basename "$podmin")
recipe=$(cd "$(dirname "$0")/.." && pwd)/recipes/quickstart.star
work=${PODMIN_QUICKSTART_DIR:-$(mktemp -d)}
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache" XDG_RUNTIME_DIR="$work/run"
cd "$work"

step() { printf '\n$ podmin %s\n' "$*"; "$podmin" "$@"; }

step version
step run "$recipe"
step use
echo
echo "quick start finished; state is in $work"
