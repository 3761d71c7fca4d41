// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"podmin.dev/podmin/agent/staticpod"
)

var errCrash = errors.New("simulated crash")

// The agent is killed at every step of a reconcile in turn: between fetch,
// stage and confirmation, before each rename and each removal, and before
// publishing Services. At every step each visible *.yaml is a complete
// file of the old or the new state, and a restarted agent converges to
// exactly the committed state with no temporary file left.
func TestCrashAtEveryStepConverges(t *testing.T) {
	for crashAt := 1; ; crashAt++ {
		f := newFixture(t)
		f.secrets.values["/demo/default/web/token"] = []byte("t1")
		f.deploy(t, "workers", "web", "hello:v1", true, "token")
		f.deploy(t, "workers", "api", "api:v1", false)
		f.deploy(t, "workers", "db", "db:v1", false)
		mustReconcile(t, f.reconciler(t, nil))
		old := visible(f.files(t))

		f.deploy(t, "workers", "web", "hello:v2", true, "token")
		f.deploy(t, "workers", "cache", "cache:v1", false)
		f.deploy(t, "workers", "db", "db:v2", false)
		f.remove(t, "workers", "api")

		var seen []map[string]string
		var steps []string
		n := 0
		crashed := false
		r := f.reconciler(t, func(s staticpod.Step, file string) error {
			seen = append(seen, visible(f.files(t)))
			steps = append(steps, fmt.Sprintf("%s %s", s, file))
			if n++; n == crashAt {
				crashed = true
				return errCrash
			}
			return nil
		})
		_, err := r.Reconcile(context.Background())
		if crashed != errors.Is(err, errCrash) {
			t.Fatalf("crash at step %d: err %v", crashAt, err)
		}

		// Restart: a new process with empty memory.
		restarted := f.reconciler(t, nil)
		mustReconcile(t, restarted)
		final := f.files(t)
		if got := names(final); !slices.Equal(got, []string{"cache.yaml", "db.yaml", "web.yaml"}) {
			t.Fatalf("crash at %d (%s): converged to %q", crashAt, steps[len(steps)-1], got)
		}
		for i, snap := range seen {
			for name, content := range snap {
				if content != old[name] && content != final[name] {
					t.Fatalf("crash at %d: at step %q %s was neither its old nor its new content", crashAt, steps[i], name)
				}
			}
		}
		if svcs, _ := f.services.Last(); len(svcs) != 1 || svcs[0].Pod != "web" {
			t.Fatalf("crash at %d: services %+v", crashAt, svcs)
		}
		if !crashed {
			if crashAt < 8 {
				t.Fatalf("only %d steps: %q", crashAt-1, steps)
			}
			t.Logf("crashed at each of %d steps: %q", crashAt-1, steps)
			return
		}
	}
}
