#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# The quick start on the embedded local provider: no account, no network.
# Everything lives in a throwaway directory (or $PODMIN_QUICKSTART_DIR).
# Usage: scripts/quickstart.sh [PODMIN] [PODMIN-AGENT]; the agent defaults to
# podmin-agent beside podmin.
set -euo pipefail
podmin=${1:-bin/podmin}
podmin=$(cd "$(dirname "$podmin")" && pwd)/$(basename "$podmin")
agent=${2:-$(dirname "$podmin")/podmin-agent}
agent=$(cd "$(dirname "$agent")" && pwd)/$(basename "$agent")
recipe=$(cd "$(dirname "$0")/.." && pwd)/recipes/quickstart.star
work=${PODMIN_QUICKSTART_DIR:-$(mktemp -d)}
export XDG_CONFIG_HOME="$work/config" XDG_DATA_HOME="$work/data" XDG_CACHE_HOME="$work/cache" XDG_RUNTIME_DIR="$work/run"
cd "$work"

step() { printf '\n$ podmin %s\n' "$*"; "$podmin" "$@"; }

step version
step run "$recipe"
step use

# Setup on a local context stores the cluster's CA secrets and publishes the
# cluster configuration, so the node gives every Pod its workload identity.
step setup --nodegroup workers -y

# One pass of a node agent of NodeGroup workers, in local node mode: the
# directory node/ stands in for the node's /, so nothing outside $work is
# touched and no privileges are needed.
manifests="$work/node/etc/podmin/manifests"
agent_pass() {
  printf '\n$ PODMIN_ROOT=%s PODMIN_AGENT_ONCE=1 podmin-agent --provider local --bucket demo ...\n' "$work/node"
  PODMIN_ROOT="$work/node" PODMIN_AGENT_ONCE=1 PODMIN_AGENT_DNS_ADDR=off "$agent" --provider local --bucket demo \
    --region local --cluster demo --nodegroup workers --ipv6-prefix 2001:db8:0:1:2::/80
}
agent_pass
printf '\n$ ls %s\n' "$manifests"
ls "$manifests"
for f in "$manifests"/*.yaml; do
  printf '\n$ cat %s\n' "$f"
  cat "$f"
done
printf '\n$ ls %s\n' "$work/node/run/podmin/workloads/web/identity/"
ls "$work/node/run/podmin/workloads/web/identity/"

# An update: a new image, committed by the CLI and reconciled by the node.
cp "$manifests/web.yaml" "$work/web.yaml.before"
step deploy web -g workers --image hello:v2 --service
agent_pass
printf '\n$ diff -u web.yaml.before %s\n' "$manifests/web.yaml"
diff -u "$work/web.yaml.before" "$manifests/web.yaml" || true
echo
echo "quick start finished; state is in $work, the node's files in $work/node"
