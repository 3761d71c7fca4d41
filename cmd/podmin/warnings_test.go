// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

type warningsDoc struct {
	Warnings []struct{ Check, Subject, Message string }
}

// TestDeployWarnings deploys what can never run: a NodeGroup setup never
// configured, an image never pushed, a secret never created. Each is a
// warning on standard error naming its fix and in -o json; --strict (and
// strict = True in a recipe) refuses before anything is written, exit 4.
func TestDeployWarnings(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	args := []string{"deploy", "web", "-g", "wrokers", "--image", "hello:v1", "--secret", "db-url"}
	wants := []string{
		`warning: cluster demo has no configuration (tfstate/podmin.auto.tfvars.json) in its bucket: setup never ran, so no node runs NodeGroup wrokers: run "podmin setup" with --nodegroup wrokers`,
		`warning: image registry.podmin.internal/apps/hello:v1 is not in the cluster registry (the bucket has no apps/hello/index.json), so nodes cannot pull it: run "podmin push hello:v1"`,
		`warning: secret db-url of Pod default/web is not in the secrets provider local, so the node cannot mount it and the Pod never starts: run "podmin secret create db-url --for web"`,
	}

	before := c.snapshot()
	out, errs, code := c.run(append(args, "--strict")...)
	if code != exitRefused || !strings.Contains(errs, "strict deploy refused wrokers/web: nothing was written: 3 checks failed") || out != "" {
		t.Fatalf("deploy --strict: exit %d\n%s%s", code, out, errs)
	}
	c.unchanged(before)

	out, errs, code = c.run(append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("deploy: exit %d\n%s", code, errs)
	}
	for _, w := range wants {
		if !strings.Contains(errs, w) {
			t.Errorf("deploy stderr lacks %q:\n%s", w, errs)
		}
	}
	var doc warningsDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Warnings) != 3 || doc.Warnings[0].Check != "nodegroup" || doc.Warnings[1].Check != "image" || doc.Warnings[2].Check != "secret" {
		t.Fatalf("deploy -o json warnings: %v\n%s", err, out)
	}

	// The same in a recipe, and under --dry-run.
	recipe := c.script("deploy.star", "d = podmin.deployments.deploy(\"api\", nodegroup = \"wrokers\", image = \"hello:v1\")\nprint(len(d.warnings), d.warnings[0].startswith(\"cluster demo has no configuration\"))\n")
	out, errs, code = c.run("run", recipe)
	if code != 0 || out != "2 True\n" || !strings.Contains(errs, wants[1]) {
		t.Fatalf("recipe: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = c.run("run", "--dry-run", recipe)
	if code != 0 || !strings.Contains(out, "2 True") || !strings.Contains(errs, "dry run: "+wants[0]) {
		t.Fatalf("recipe dry run: exit %d\n%s%s", code, out, errs)
	}
	strict := c.script("strict.star", "podmin.deployments.deploy(\"api\", nodegroup = \"wrokers\", image = \"hello:v1\", strict = True)\n")
	if _, errs, code := c.run("run", strict); code != exitRefused || !strings.Contains(errs, "the deployment may not run as committed: strict deploy refused wrokers/api: nothing was written") {
		t.Fatalf("strict recipe: exit %d\n%s", code, errs)
	}
}

// TestValidateWarnsAndRefuses validates a manifest with host access (warned
// on standard error and in -o json) and one that needs an API server
// (refused, exit 1).
func TestValidateWarnsAndRefuses(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	manifest := `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  template:
    spec:
      nodeSelector: {podmin.dev/nodegroup: workers}
      hostNetwork: true
      containers:
        - name: agent
          image: hello:v1
          securityContext: {privileged: true}
`
	file := c.script("agent.yaml", manifest)
	out, errs, code := c.run("validate", "-f", file, "-o", "json")
	want := []string{
		"warning: DaemonSet spec.template.spec.hostNetwork: the Pod shares the node's network",
		"warning: DaemonSet spec.template.spec.containers[0].securityContext.privileged: the container runs privileged",
	}
	if code != 0 || !strings.Contains(errs, want[0]) || !strings.Contains(errs, want[1]) {
		t.Fatalf("validate: exit %d\n%s", code, errs)
	}
	var doc warningsDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Warnings) != 2 || doc.Warnings[0].Subject != "spec.template.spec.hostNetwork" || doc.Warnings[1].Check != "manifest" {
		t.Fatalf("validate -o json warnings: %v\n%s", err, out)
	}
	recipe := c.script("validate.star", "v = podmin.manifests.validate(file = "+jsonString(file)+")\nprint(len(v.warnings))\n")
	if out, errs, code := c.run("run", recipe); code != 0 || out != "2\n" || !strings.Contains(errs, want[0]) {
		t.Fatalf("validate in a recipe: exit %d\n%s%s", code, out, errs)
	}

	bad := c.script("bad.yaml", strings.Replace(manifest, "      hostNetwork: true\n", "      volumes: [{name: cfg, configMap: {name: app}}]\n", 1))
	c.fails(exitFailed, "DaemonSet spec.template.spec.volumes[0].configMap: not supported: a ConfigMap is read from the Kubernetes API", "validate", "-f", bad)
	root := c.script("root.yaml", strings.Replace(manifest, "      hostNetwork: true\n", "      volumes: [{name: root, hostPath: {path: /}}]\n", 1))
	c.fails(exitFailed, `DaemonSet spec.template.spec.volumes[0].hostPath.path: "/" is the whole node`, "validate", "-f", root)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
