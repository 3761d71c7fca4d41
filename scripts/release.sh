#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Builds a release: static, stripped podmin and podmin-agent for linux/amd64
# and linux/arm64 with the eBPF dataplane object embedded, and their
# SHA256SUMS and SHA512SUMS, into OUT/v<version>/. That directory is the
# layout setup's dependency resolver fetches the agent from: a GitHub
# release's download directory (releases/download/v<version>/), or
# <mirror>/podmin/v<version>/ under PODMIN_DEPENDENCY_MIRROR.
#
#   scripts/release.sh VERSION OUT [COMMIT DATE]
#
# RELEASE_ARCHS (default "amd64 arm64") narrows the architectures, for tests
# that need only this machine's.
set -euo pipefail
cd "$(dirname "$0")/.."

version=${1:?usage: scripts/release.sh VERSION OUT [COMMIT DATE]}
out=${2:?usage: scripts/release.sh VERSION OUT [COMMIT DATE]}
commit=${3:-$(git rev-parse --verify -q HEAD 2>/dev/null || echo unknown)}
date=${4:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}
version=${version#v}
# setup fetches the agent of its own version: only a semantic version names
# a release it can find.
if [[ ! $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]]; then
  echo "release version \"$version\" is not a semantic version: run make release VERSION=1.2.3" >&2
  exit 1
fi
# An agent without the compiled program has no VIP dataplane; a release
# never ships one.
obj=bpf/obj/vip_bpfel.o
if [[ ! -s $obj ]]; then
  echo "$obj is missing: the agent would have no eBPF dataplane; install clang (apt-get install -y clang llvm libbpf-dev linux-libc-dev) and run make bpf" >&2
  exit 1
fi

dir="$out/v$version"
rm -rf "$dir"
mkdir -p "$dir"
pkg=podmin.dev/podmin/internal/version
ldflags="-s -w -X $pkg.Version=$version -X $pkg.Commit=$commit -X $pkg.Date=$date"
read -r -a archs <<<"${RELEASE_ARCHS:-amd64 arm64}"
files=()
for arch in "${archs[@]}"; do
  for prog in podmin podmin-agent; do
    CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -tags grpcnotrace -ldflags "$ldflags" \
      -o "$dir/$prog-linux-$arch" "./cmd/$prog"
    files+=("$prog-linux-$arch")
  done
done
(
  cd "$dir"
  sha256sum "${files[@]}" >SHA256SUMS
  sha512sum "${files[@]}" >SHA512SUMS
)
echo "release v$version in $dir:"
cat "$dir/SHA256SUMS"
