// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package bpf

import (
	"embed"
	"errors"
	"io/fs"
)

// objects holds what generate.sh built into obj/: the compiled program is
// build output, so a checkout holds only the folder's README until
// "make generate" (or make build/test with clang installed) has run.
//
//go:embed obj
var objects embed.FS

// objectName is the compiled program inside objects.
const objectName = "obj/vip_bpfel.o"

// ErrNotBuilt reports a binary built without the compiled eBPF program.
var ErrNotBuilt = errors.New("the eBPF program was not compiled into this build: install clang, llvm and libbpf-dev, run \"make generate\" (bpf/generate.sh), then build again")

// _VipBytes is the compiled program the generated loader reads; empty
// when it was not built.
var _VipBytes, _ = fs.ReadFile(objects, objectName)

// Built reports whether this build carries the compiled program; without
// it every load fails with ErrNotBuilt.
func Built() error {
	if len(_VipBytes) == 0 {
		return ErrNotBuilt
	}
	return nil
}
