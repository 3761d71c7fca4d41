// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package contexts

import (
	"errors"
	"strings"
	"testing"
)

func TestSelectPrecedence(t *testing.T) {
	for _, tc := range []struct {
		flag, env string
		want      Selection
	}{
		{"a", "b", Selection{Name: "a", Source: SourceFlag}},
		{"", "b", Selection{Name: "b", Source: SourceEnv}},
		{"", "", Selection{}},
	} {
		if got := Select(tc.flag, tc.env); got != tc.want {
			t.Errorf("Select(%q, %q) = %+v, want %+v", tc.flag, tc.env, got, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	f := &File{Current: "a", Contexts: map[string]Context{"a": {Cluster: "a"}, "b": {Cluster: "b"}}}
	if c, err := f.Resolve(Selection{}); err != nil || c.Cluster != "a" {
		t.Fatalf("no selection: %+v, %v; want the current context a", c, err)
	}
	if c, err := f.Resolve(Selection{Name: "b", Source: SourceEnv}); err != nil || c.Cluster != "b" {
		t.Fatalf("PODMIN_CONTEXT=b: %+v, %v; want b", c, err)
	}
	_, err := f.Resolve(Selection{Name: "zz", Source: SourceEnv})
	if !errors.Is(err, ErrUnknown) || !strings.Contains(err.Error(), EnvVar) {
		t.Fatalf("unknown selected context: %v; want ErrUnknown naming %s", err, EnvVar)
	}
	if got := f.InEffect(Selection{}); got != (Selection{Name: "a", Source: SourceCurrent}) {
		t.Fatalf("in effect without a selection: %+v", got)
	}
	if got := f.InEffect(Selection{Name: "b", Source: SourceFlag}); got.Name != "b" || got.Source != SourceFlag {
		t.Fatalf("in effect with --context b: %+v", got)
	}
}
