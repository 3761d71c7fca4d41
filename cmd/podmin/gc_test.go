// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"runtime/debug"
	"testing"
)

// gcPercentAfter runs tuneGC with env and returns the GC target it left,
// restoring the previous one.
func gcPercentAfter(env map[string]string) int {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	tuneGC(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return debug.SetGCPercent(100)
}

func TestTuneGCKeepsTheOperatorsChoice(t *testing.T) {
	if got := gcPercentAfter(nil); got != cliGCPercent {
		t.Errorf("without GOGC or GOMEMLIMIT the GC target is %d, want %d", got, cliGCPercent)
	}
	for _, env := range []map[string]string{{"GOGC": "100"}, {"GOGC": "off"}, {"GOMEMLIMIT": "1GiB"}} {
		if got := gcPercentAfter(env); got != 100 {
			t.Errorf("with %v the GC target became %d: the operator's setting must stand", env, got)
		}
	}
}
