// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"os"
	"strings"
	"testing"
)

func TestDocsUpToDate(t *testing.T) {
	got, err := os.ReadFile("../docs/starlark.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != Markdown() {
		t.Fatal("docs/starlark.md is stale: run \"make generate\" (go generate ./starlark) and commit the result")
	}
}

func TestRegistryIsConsistent(t *testing.T) {
	for _, b := range Builtins() {
		if b.Doc == "" || b.impl == nil {
			t.Errorf("%s lacks a docstring or an implementation", b.Name)
		}
		required := true
		for _, p := range b.Params {
			if p.Required && !required {
				t.Errorf("%s: required parameter %s follows an optional one", b.Name, p.Name)
			}
			required = p.Required
			if strings.Contains(p.Name, "-") {
				t.Errorf("%s: parameter %s must use _ where the flag uses -", b.Name, p.Name)
			}
		}
		if !strings.Contains(Markdown(), "### `"+b.FullName()+"`") {
			t.Errorf("%s is missing from the reference", b.Name)
		}
	}
}
