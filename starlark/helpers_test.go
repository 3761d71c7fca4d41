// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"podmin.dev/podmin/builtins"
)

// env is a fresh local Podmin connected to cluster "test", with a Host
// writing to buffers.
type env struct {
	t      *testing.T
	dir    string
	sb     *sandbox
	ops    *builtins.Env
	stdout bytes.Buffer
	stderr bytes.Buffer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t}
	sb, err := newSandbox(context.Background(), TestOptions{TempDir: func() (string, error) { return t.TempDir(), nil }}, "", &e.stdout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.done)
	e.dir, e.sb = sb.dir, sb
	e.ops = sb.host.opts.Ops.(*builtins.Env)
	return e
}

func (e *env) host(opts Options) *Host {
	opts.Ops = e.ops
	opts.Stdout, opts.Stderr = &e.stdout, &e.stderr
	opts.WorkDir = e.ops.WorkDir
	opts.CacheDir = filepath.Join(e.dir, "cache")
	opts.Now = func() time.Time { return TestClock }
	h := New(opts)
	e.t.Cleanup(func() { _ = h.Close() })
	return h
}

// write creates a file below the env's directory and returns its path.
func (e *env) write(name, content string) string {
	e.t.Helper()
	p := filepath.Join(e.dir, "src", name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// run writes a script and runs it.
func (e *env) run(opts Options, script string, args ...string) (*Host, error) {
	h := e.host(opts)
	return h, h.Run(context.Background(), e.write("main.star", script), args)
}
