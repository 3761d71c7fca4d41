#!/usr/bin/env bash
# Podmin <https://podmin.dev>
# Copyright The Podmin Authors
# SPDX-License-Identifier: Apache-2.0
#
# Generate Go code for protobuf files with protoc and the plugins pinned in
# tools/go.mod, the outputs keep the .proto file's license header.
# Usage: genproto.sh FILE.proto [OUTDIR]   (OUTDIR defaults to the file's directory)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
proto=$1
src=$(cd "$(dirname "$proto")" && pwd)
out=${2:-$src}
command -v protoc >/dev/null || { echo "protoc is missing: apt-get install protobuf-compiler" >&2; exit 1; }
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$root/tools" &&
  go build -o "$bin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go &&
  go build -o "$bin/protoc-gen-go-grpc" google.golang.org/grpc/cmd/protoc-gen-go-grpc)
mkdir -p "$out"
protoc --plugin=protoc-gen-go="$bin/protoc-gen-go" --plugin=protoc-gen-go-grpc="$bin/protoc-gen-go-grpc" \
  -I "$src" --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative "$src/$(basename "$proto")"
# The license header comes from the .proto file's leading comment.
base=$(basename "$proto" .proto)
for f in "$out/$base.pb.go" "$out/${base}_grpc.pb.go"; do
  head -n 1 "$f" | grep -q '^// Podmin' || { echo "$f: the .proto file must start with the license header" >&2; exit 1; }
done
