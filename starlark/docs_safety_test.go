// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
)

var exampleRE = regexp.MustCompile("(?s)```python\n(.*?)```\n\n```text\n(.*?)```")

// TestSafetyExamples runs every python example of the Safety section and
// compares what it prints with the text block that follows it.
func TestSafetyExamples(t *testing.T) {
	examples := exampleRE.FindAllStringSubmatch(Safety, -1)
	if len(examples) < 2 {
		t.Fatalf("found %d examples", len(examples))
	}
	for i, ex := range examples {
		e := newEnv(t)
		dir := filepath.Join(e.dir, "example-secrets")
		e.ops.Secrets = func(context.Context, contexts.Context, string) (secrets.Store, error) {
			return localsecrets.New(dir), nil
		}
		if _, err := e.run(Options{}, ex[1]); err != nil {
			t.Fatalf("example %d:\n%s\n%v", i, ex[1], err)
		}
		if got := e.stdout.String(); got != ex[2] {
			t.Errorf("example %d printed:\n%s\nthe docs say:\n%s", i, got, ex[2])
		}
	}
}
