// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"strings"
	"testing"
	"time"
)

// Under --dry-run a wait is planned, not performed: it returns at once,
// marked planned, and the plan names it; deploy's wait is dropped with
// the recorded commit.
func TestWaitIsPlannedUnderDryRun(t *testing.T) {
	e := newEnv(t)
	e.ops.Sleep = func(context.Context, time.Duration) error {
		t.Error("a dry run waited")
		return nil
	}
	h, err := e.run(Options{DryRun: true}, `
d = podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1", wait = "ready")
w = podmin.deployments.wait("web", nodegroup = "workers", until = "applied", timeout = "2m")
print(d.action, w.planned, w.until, w.summary)
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.stdout.String(); got != "created True applied planned: wait up to 2m0s until applied\n" {
		t.Fatalf("stdout %q", got)
	}
	var plan strings.Builder
	if err := h.Plan().Write(&plan, "table"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plan.String(), `podmin.deployments.wait("web")`) {
		t.Fatalf("the plan lacks the wait:\n%s", plan.String())
	}
	if _, err := e.run(Options{DryRun: true}, `podmin.deployments.wait("web", nodegroup = "workers", until = "soon")`); err == nil || !strings.Contains(err.Error(), `until = "soon": wait until "ready" or "applied"`) {
		t.Fatalf("a bad until under --dry-run: %v", err)
	}
}

// In podmin test, waits run on the virtual clock against t.fake_nodes:
// ready at once, and a timeout of minutes fails without taking minutes.
func TestStatusAndWaitAgainstFakeNodes(t *testing.T) {
	e := newEnv(t)
	for ng, g := range map[string]fakeGroup{"workers": {nodes: 2, state: "ready"}, "edge": {nodes: 1, state: "not-ready"}} {
		if err := e.sb.nodes.declare(t.Context(), ng, g); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	_, err := e.run(Options{}, `
d = podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1", wait = "ready")
s = podmin.deployments.status("web", nodegroup = "workers")
st = s.nodegroups[0].deployments[0]
print(d.revision == st.revision, st.state, st.ready, st.total, s.leader.live)
w = podmin.deployments.wait("web", nodegroup = "workers")
print(w.state, w.until, w.planned)
podmin.deployments.deploy("api", nodegroup = "edge", image = "hello:v1")
podmin.deployments.wait("api", nodegroup = "edge", timeout = "2m")
`)
	if err == nil || !strings.Contains(err.Error(), "timed out after 2m0s waiting for edge/api revision") || !strings.Contains(err.Error(), "1/1 applied, 0/1 ready") {
		t.Fatalf("wait for a NodeGroup that is not ready: %v", err)
	}
	if got := e.stdout.String(); got != "True ready 2 2 True\nready ready False\n" {
		t.Fatalf("stdout %q", got)
	}
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the virtual 2 minutes took %s", took)
	}
}
