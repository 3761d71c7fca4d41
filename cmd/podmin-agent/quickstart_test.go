// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The quick start script runs end to end on the local provider: the
// recipe deploys, then one agent pass publishes the static Pod file, which
// the script shows.
func TestQuickstartScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds podmin and podmin-agent")
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	for _, pkg := range []string{"podmin", "podmin-agent"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, pkg), "podmin.dev/podmin/cmd/"+pkg).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", pkg, err, out)
		}
	}
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	script, _ := filepath.Abs(filepath.Join("..", "..", "scripts", "quickstart.sh"))
	// Twice in the same directory: the second run reuses what the first
	// left and still shows a reconciled file and an update.
	for run := 1; run <= 2; run++ {
		cmd := exec.Command("bash", script, filepath.Join(bin, "podmin"))
		cmd.Env = append(os.Environ(), "PODMIN_QUICKSTART_DIR="+work)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("quickstart run %d: %v\n%s", run, err, out)
		}
		for _, want := range []string{"PODMIN_AGENT_ONCE=1 podmin-agent", "one reconcile pass done", "etc/podmin/manifests/web.yaml",
			"kind: Pod", "podmin.dev/revision:", "podmin.dev/identity-revision:", "tls.crt",
			"-  - image: registry.podmin.internal/apps/hello:v1", "+  - image: registry.podmin.internal/apps/hello:v2",
			"quick start finished"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("quick start run %d output lacks %q:\n%s", run, want, out)
			}
		}
		if run == 2 && !strings.Contains(string(out), "unchanged web.yaml") {
			t.Errorf("the second run did not reuse the manifest:\n%s", out)
		}
	}
	pod, err := os.ReadFile(filepath.Join(work, "node", "etc", "podmin", "manifests", "web.yaml"))
	if err != nil || !strings.Contains(string(pod), "registry.podmin.internal/apps/hello:v2") {
		t.Fatalf("static Pod file after the update: %v\n%s", err, pod)
	}
}
