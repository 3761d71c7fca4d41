// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"testing"

	"podmin.dev/podmin/builtins/openv/openvtest"
)

// testEnv is the composed environment over temporary state directories;
// the tests here cross families (connect, then destroy through the
// lifecycle), which only the composition wires together.
func testEnv(t *testing.T) *Env { return (*Env)(openvtest.NewEnv(t)) }
