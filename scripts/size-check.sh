#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Checks the release binaries "make build" wrote into BIN: each is static
# (no cgo, no dynamic loader), stripped, within its size limit in bytes,
# and reports the version, commit and date the build injected; the agent
# imports no terminal UI and no template package.
#
#   scripts/size-check.sh BIN MAX_PODMIN MAX_AGENT VERSION COMMIT DATE
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# != 6)); then
  echo "usage: $0 BIN MAX_PODMIN MAX_AGENT VERSION COMMIT DATE" >&2
  exit 2
fi
bin=$1 version=$4 commit=$5 date=$6
declare -A limit=([podmin]=$2 [podmin-agent]=$3)
status=0
fail() {
  echo "size-check: $*" >&2
  status=1
}

for name in podmin podmin-agent; do
  f=$bin/$name
  if [[ ! -x $f ]]; then
    fail "$f is missing: run make build"
    continue
  fi
  size=$(stat -c %s "$f")
  max=${limit[$name]}
  echo "size-check: $name is $size bytes ($((size / 1000000)) MB), limit $max"
  if ((size > max)); then
    fail "$name is $size bytes, more than its limit of $max. Find what grew with
  go tool nm -size -sort size <an unstripped build> | head
and whether something reaches text/template or html/template execution (which keeps
every exported method of every linked type) with
  go build -ldflags=-dumpdep ./cmd/$name 2>&1 | grep ReflectMethod"
  fi
  meta=$(go version -m "$f")
  grep -qE '^[[:space:]]+build[[:space:]]+CGO_ENABLED=0$' <<<"$meta" || fail "$name was not built with CGO_ENABLED=0"
  # The ELF header names a program interpreter (the dynamic loader) only in
  # a dynamically linked binary.
  if grep -q 'ld-linux' <(head -c 4096 "$f" | tr -c '[:print:]' '\n'); then
    fail "$name is dynamically linked"
  fi
  if go tool nm "$f" >/dev/null 2>&1; then
    fail "$name still has its symbol table: link with -ldflags=-s -w"
  fi
done

# The agent links no terminal UI and no template executor: text/template and
# html/template look methods up by name, which keeps every exported method
# of every linked type. Its packages are listed with the build's own tags.
tags=$(go version -m "$bin/podmin-agent" | sed -n 's/^[[:space:]]*build[[:space:]]*-tags=//p')
if agent_deps=$(go list -tags "$tags" -deps ./cmd/podmin-agent); then
  for pkg in podmin.dev/podmin/internal/progress/bars github.com/vbauerster/mpb/v8 text/template html/template golang.org/x/net/trace; do
    if grep -qxF "$pkg" <<<"$agent_deps"; then
      fail "podmin-agent imports $pkg: $(go list -tags "$tags" -deps -f '{{.ImportPath}}: {{join .Imports " "}}' ./cmd/podmin-agent | grep -E " $pkg( |\$)" | cut -d: -f1 | tr '\n' ' ')"
    fi
  done
else
  fail "go list ./cmd/podmin-agent failed"
fi

# podmin version and podmin-agent --version report what the build injected.
home=$(mktemp -d)
trap 'rm -rf "$home"' EXIT
# In a fresh home: the check never reads or writes the caller's contexts.
podmin() { env -u XDG_CONFIG_HOME -u XDG_CACHE_HOME -u XDG_DATA_HOME -u XDG_RUNTIME_DIR HOME="$home" "$bin/podmin" "$@"; }
json=$(podmin version -o json) || fail "podmin version -o json failed"
for field in version commit date; do
  case $field in
    version) want=$version ;;
    commit) want=$commit ;;
    date) want=$date ;;
  esac
  grep -qF "\"$field\": \"$want\"" <<<"$json" || fail "podmin version -o json does not report $field \"$want\":
$json"
done
want="$version (commit $commit, built $date,"
line=$(podmin version) || fail "podmin version failed"
[[ $line == "podmin $want"* ]] || fail "podmin version printed \"$line\", want \"podmin $want …\""
line=$("$bin/podmin-agent" --version) || fail "podmin-agent --version failed"
[[ $line == "podmin-agent $want"* ]] || fail "podmin-agent --version printed \"$line\", want \"podmin-agent $want …\""

if ((status == 0)); then
  echo "size-check: ok (static, stripped, within limits; version $version, commit $commit, date $date)"
fi
exit "$status"
