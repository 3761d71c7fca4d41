// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"testing"

	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/objstore/objstoretest"
)

// testEnv is the composed environment over temporary state directories;
// the tests here cross families (connect, then destroy through the
// lifecycle), which only the composition wires together.
func testEnv(t *testing.T) *Env { return (*Env)(openvtest.NewEnv(t)) }

// useVersityGW points the AWS provider at a real S3-compatible server.
func useVersityGW(t *testing.T) *objstoretest.S3Server { return objstoretest.UseVersityGW(t) }
