// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"os"

	"podmin.dev/podmin/internal/paths"
	pstar "podmin.dev/podmin/starlark"
)

func main() {
	out := flag.String("o", "docs/starlark.md", "output file")
	flag.Parse()
	if err := paths.WriteFileAtomic(*out, []byte(pstar.Markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs:", err)
		os.Exit(1)
	}
}
