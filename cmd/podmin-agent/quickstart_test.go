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
	cmd := exec.Command("bash", script, filepath.Join(bin, "podmin"))
	cmd.Env = append(os.Environ(), "PODMIN_QUICKSTART_DIR="+work)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("quickstart: %v\n%s", err, out)
	}
	for _, want := range []string{"PODMIN_AGENT_ONCE=1 podmin-agent", "one reconcile pass done", "etc/podmin/manifests/web.yaml",
		"kind: Pod", "podmin.dev/revision:", "quick start finished"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("quick start output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "node", "etc", "podmin", "manifests", "web.yaml")); err != nil {
		t.Fatalf("static Pod file: %v", err)
	}
}
