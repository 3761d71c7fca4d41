// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package recipes_test

import (
	"bytes"
	"context"
	"testing"

	pstar "podmin.dev/podmin/starlark"
)

// TestRecipes runs every *_test.star in this directory through the same
// machinery as "podmin test".
func TestRecipes(t *testing.T) {
	files, err := pstar.FindTests([]string{"."})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 3 {
		t.Fatalf("found only %q: every recipe has a _test.star", files)
	}
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			var out bytes.Buffer
			sum, err := pstar.RunTests(context.Background(), pstar.TestOptions{Paths: []string{f}, Stdout: &out, CacheDir: t.TempDir(), TempDir: func() (string, error) { return t.TempDir(), nil }})
			if err != nil {
				t.Fatal(err)
			}
			t.Log(out.String())
			if sum.Failed > 0 || sum.Passed == 0 {
				t.Fatalf("%d passed, %d failed:\n%s", sum.Passed, sum.Failed, out.String())
			}
		})
	}
}
