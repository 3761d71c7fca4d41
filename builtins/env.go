// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package builtins

import (
	"fmt"
	"sort"

	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/paths"
)

// Env is what every operation needs from its surroundings. The CLI builds
// one from the process; tests build one around temporary directories.
type Env struct {
	// Dirs are the per-user state directories.
	Dirs paths.Dirs
	// Providers are the available providers by --provider name.
	Providers map[string]cloud.Provider
	// Progress receives human-readable progress lines (stderr in the CLI);
	// nil discards them.
	Progress func(msg string)
}

func (e *Env) progress(format string, args ...any) {
	if e.Progress != nil {
		e.Progress(fmt.Sprintf(format, args...))
	}
}

// providerNames lists the configured providers in sorted order.
func (e *Env) providerNames() []string {
	names := make([]string, 0, len(e.Providers))
	for n := range e.Providers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (e *Env) provider(name string) (cloud.Provider, error) {
	if name == "" {
		return nil, fmt.Errorf("no provider given: pass --provider with one of %q", e.providerNames())
	}
	p, ok := e.Providers[name]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q: use one of %q", name, e.providerNames())
	}
	return p, nil
}

// CurrentContext returns the selected context, or an error telling the
// operator how to connect. Every operation except connect and use calls it.
func (e *Env) CurrentContext() (contexts.Context, error) {
	f, err := contexts.Load(e.Dirs.Config)
	if err != nil {
		return contexts.Context{}, err
	}
	return f.CurrentContext()
}
