// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"strings"
	"testing"
)

func TestDepsFetchArguments(t *testing.T) {
	e := newEnv(t)
	_, err := e.run(Options{}, `podmin.deps.fetch(arch = ["riscv64"])`)
	if err == nil || !strings.Contains(err.Error(), `unknown architecture "riscv64": use amd64 or arm64`) {
		t.Fatalf("err = %v", err)
	}
	_, err = e.run(Options{}, `podmin.deps.fetch(otel_logs = "yes")`)
	if err == nil || !strings.Contains(err.Error(), "otel_logs") {
		t.Fatalf("err = %v", err)
	}
}
