// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package contexts

import (
	"fmt"

	"podmin.dev/podmin/internal/scrub"
)

// EnvVar names the environment variable that selects a context for one
// shell, overriding the current context of the contexts file.
const EnvVar = "PODMIN_CONTEXT"

// Where a selection came from, in precedence order: a command's --context
// beats PODMIN_CONTEXT, which beats the contexts file's current context.
// A recipe's contexts.use() replaces the selection of its run.
const (
	SourceFlag    = "--context"
	SourceEnv     = EnvVar
	SourceRecipe  = "the recipe"
	SourceCurrent = "current"
)

// Selection names the context one invocation uses instead of the file's
// current one. The zero Selection defers to the file, so two shells (or
// two runs in one process) each keep their own without racing on the
// machine-wide file.
type Selection struct {
	Name   string `json:"name"`
	Source string `json:"source"`
}

// Select returns the selection of an invocation: flag when given, else
// env (the value of PODMIN_CONTEXT) when set, else the zero Selection.
func Select(flag, env string) Selection {
	switch {
	case flag != "":
		return Selection{Name: flag, Source: SourceFlag}
	case env != "":
		return Selection{Name: env, Source: SourceEnv}
	}
	return Selection{}
}

// InEffect says which context sel selects in f and why: sel when it names
// one, else the file's current context ("" when none is selected).
func (f *File) InEffect(sel Selection) Selection {
	if sel.Name != "" {
		return sel
	}
	if f.Current == "" {
		return Selection{}
	}
	return Selection{Name: f.Current, Source: SourceCurrent}
}

// Resolve returns the context sel selects, else the current context. A
// name that is not saved is ErrUnknown, saying where the name came from.
func (f *File) Resolve(sel Selection) (Context, error) {
	if sel.Name == "" {
		return f.CurrentContext()
	}
	if c, ok := f.Contexts[sel.Name]; ok {
		return c, nil
	}
	how := map[string]string{
		SourceFlag:   "pass --context with a saved context",
		SourceEnv:    "set " + EnvVar + " to a saved context, or unset it to use the current context",
		SourceRecipe: "pass contexts.use or contexts.connect a saved context",
	}[sel.Source]
	if how == "" {
		how = "select a saved context"
	}
	return Context{}, fmt.Errorf("%w %s (selected by %s): saved contexts are %q: %s; \"podmin use\" lists them",
		ErrUnknown, scrub.Quote(sel.Name), sel.Source, f.Names(), how)
}
