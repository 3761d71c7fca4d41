// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// lostAfterOther fails the first index write as a lost reply would, after
// another writer committed a deployment of its own: nothing can prove
// whether the failed write landed.
type lostAfterOther struct {
	objstore.Store
	once  *sync.Once
	other string // the other writer's deployment
}

func (l *lostAfterOther) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	if key == state.IndexPath {
		var err error
		hit := false
		l.once.Do(func() {
			hit = true
			other := state.Deployment{Key: state.Key{NodeGroup: "workers", Name: l.other}, Namespace: "default",
				Pod: []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + l.other + "\n  namespace: default\n")}
			_, err = state.NewCommitter(l.Store, state.CommitOptions{}).Deploy(ctx, other)
		})
		if err != nil {
			return "", err
		}
		if hit {
			return "", errors.New("read tcp: connection reset by peer")
		}
	}
	return objstore.WriteObject(ctx, l.Store, key, body, size, opts)
}

func (l *lostAfterOther) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	return objstore.OpenObject(ctx, l.Store, key, opts)
}

// An index write whose outcome cannot be proven exits 6, from the command
// and from a recipe calling the same built-in, and says what to run next;
// the deployment is not written a second time.
func TestOutcomeUnknownExitsSix(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	manifest := writeFile(t, c.root, "ds.yaml", "")
	c.ok("init", "web", "-g", "workers", "--image", "hello:v1", "-f", manifest, "--force")
	recipe := c.script("deploy.star", "def main(ctx):\n    podmin.deployments.deploy(\"api\", nodegroup = \"workers\", image = \"hello:v1\")\n")
	for i, args := range [][]string{{"deploy", "web", "-g", "workers", "-f", manifest}, {"run", recipe}} {
		once, other := &sync.Once{}, []string{"one", "two"}[i]
		c.adjust = func(e *builtins.Env) {
			e.WrapStore = func(s objstore.Store) objstore.Store { return &lostAfterOther{Store: s, once: once, other: other} }
		}
		_, errs, code := c.run(args...)
		if code != exitUnknown || !strings.Contains(errs, "outcome of the index write is unknown") || !strings.Contains(errs, `run "podmin list"`) {
			t.Errorf("podmin %s: exit %d, want 6 naming the unknown outcome and podmin list:\n%s", strings.Join(args, " "), code, errs)
		}
	}
	c.adjust = nil
	ix := c.index(bucket)
	if ix.Len() != 2 {
		t.Errorf("index %s: want only the other writers' deployments", ix.Encode())
	}
	for _, name := range []string{"one", "two"} {
		if _, ok := ix.Lookup(state.Key{NodeGroup: "workers", Name: name}); !ok {
			t.Errorf("index %s lacks %s", ix.Encode(), name)
		}
	}
}
