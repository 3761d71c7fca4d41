// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package contexts

import (
	"context"
	"errors"
	"testing"

	"podmin.dev/podmin/builtins/openv/openvtest"
	"podmin.dev/podmin/internal/contexts"
)

// A use without persist selects for its Env only; the contexts file's
// current context stays what it was. With persist it moves.
func TestUseLastsForTheEnvUnlessPersisted(t *testing.T) {
	ctx := context.Background()
	env := openvtest.NewEnv(t)
	for _, name := range []string{"one", "two"} {
		if _, err := Connect(ctx, env, ConnectOptions{Cluster: name, Provider: "local", Bucket: name}); err != nil {
			t.Fatal(err)
		}
	}
	// "two" is current now (connect selects).
	if _, err := Use(env, UseOptions{Cluster: "one"}); err != nil {
		t.Fatal(err)
	}
	if c, err := env.CurrentContext(); err != nil || c.Cluster != "one" {
		t.Fatalf("after use(one): in effect %+v, %v; want one", c, err)
	}
	f, err := env.SavedContexts().Load()
	if err != nil || f.Current != "two" {
		t.Fatalf("a use without persist changed the machine-wide current context to %q (%v); want two", f.Current, err)
	}
	list, err := ListContexts(env)
	if err != nil || len(list) != 2 {
		t.Fatal(list, err)
	}
	if !list[0].InEffect || list[0].SelectedBy != contexts.SourceRecipe || list[0].Current || !list[1].Current || list[1].InEffect {
		t.Fatalf("listing %+v: want one in effect (by the recipe), two current", list)
	}
	if _, err := Use(env, UseOptions{Cluster: "nope"}); !errors.Is(err, contexts.ErrUnknown) {
		t.Fatalf("use of an unknown context: %v; want ErrUnknown", err)
	}
	if _, err := Use(env, UseOptions{Cluster: "one", Persist: true}); err != nil {
		t.Fatal(err)
	}
	if f, err := env.SavedContexts().Load(); err != nil || f.Current != "one" {
		t.Fatalf("use with persist: current %q (%v); want one", f.Current, err)
	}
}

// The selection of one Env (a shell's PODMIN_CONTEXT) never leaks into
// another Env on the same contexts file.
func TestSelectionIsPerEnv(t *testing.T) {
	ctx := context.Background()
	a := openvtest.NewEnv(t)
	for _, name := range []string{"one", "two"} {
		if _, err := Connect(ctx, a, ConnectOptions{Cluster: name, Provider: "local", Bucket: name}); err != nil {
			t.Fatal(err)
		}
	}
	b := *a
	a.Selection = contexts.Select("", "one")
	b.Selection = contexts.Select("two", "one")
	ca, err := a.CurrentContext()
	if err != nil {
		t.Fatal(err)
	}
	cb, err := b.CurrentContext()
	if err != nil {
		t.Fatal(err)
	}
	if ca.Cluster != "one" || cb.Cluster != "two" {
		t.Fatalf("PODMIN_CONTEXT=one uses %s, --context two uses %s", ca.Cluster, cb.Cluster)
	}
}
