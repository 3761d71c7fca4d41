// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"podmin.dev/podmin/internal/state"
)

func (c *cli) connectLocal() string {
	c.t.Helper()
	bucket := filepath.Join(c.root, "bucket")
	c.ok("connect", "demo", "--provider", "local", "--bucket", bucket)
	return bucket
}

func (c *cli) index(bucket string) *state.Index {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(bucket, "deployments", "index.json"))
	if os.IsNotExist(err) {
		return state.NewIndex()
	}
	if err != nil {
		c.t.Fatal(err)
	}
	ix, err := state.DecodeIndex(b)
	if err != nil {
		c.t.Fatal(err)
	}
	return ix
}

func TestInitValidateDeployListDelete(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	file := filepath.Join(c.root, "web.yaml")

	c.ok("init", "web", "--image", "hello:v1", "-g", "workers", "--service", "--secret", "db-url", "--cpu", "250m", "-f", file)
	written, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"podmin.dev/nodegroup: workers", "registry.podmin.internal/apps/hello:v1", "podmin.dev/local: db-url", "cpu: 250m", "port: 443", "targetPort: 8443"} {
		if !strings.Contains(string(written), want) {
			t.Errorf("init output lacks %q:\n%s", want, written)
		}
	}
	for _, noise := range []string{"resources: {}", "updateStrategy: {}", "creationTimestamp"} {
		if strings.Contains(string(written), noise) {
			t.Errorf("init output holds the noise %q:\n%s", noise, written)
		}
	}
	// init is idempotent: the same manifest again is reported unchanged.
	initArgs := []string{"init", "web", "--image", "hello:v1", "-g", "workers", "--service", "--secret", "db-url", "--cpu", "250m", "-f", file}
	if out := c.ok(initArgs...); !strings.HasPrefix(out, "unchanged, already holds this manifest: "+file) {
		t.Fatalf("init again:\n%s", out)
	}
	// A different manifest is refused and the file left alone.
	c.fails(1, "already exists and holds a different manifest: init left it as it is", "init", "web", "--image", "other:v1", "-g", "workers", "-f", file)
	if again, _ := os.ReadFile(file); string(again) != string(written) {
		t.Fatal("init changed an existing file")
	}
	// --force replaces it; replacing it back restores the same bytes.
	if out := c.ok("init", "web", "--image", "other:v1", "-g", "workers", "-f", file, "--force"); !strings.HasPrefix(out, "replaced "+file) {
		t.Fatalf("init --force:\n%s", out)
	}
	if again, _ := os.ReadFile(file); !strings.Contains(string(again), "registry.podmin.internal/apps/other:v1") {
		t.Fatalf("init --force did not replace the file:\n%s", again)
	}
	c.ok(append(initArgs, "--force")...)
	if again, _ := os.ReadFile(file); string(again) != string(written) {
		t.Fatal("init --force with the first options wrote different bytes")
	}

	out := c.ok("validate", "-f", file, "--service")
	if !strings.Contains(out, "valid: DaemonSet web in namespace default for NodeGroup workers") || !strings.Contains(out, "443/TCP→8443") {
		t.Fatalf("validate output:\n%s", out)
	}
	podYAML := c.ok("validate", "-f", file, "-o", "yaml", "--image", "hello:v2")
	if !strings.Contains(podYAML, "kind: Pod") || !strings.Contains(podYAML, "hello:v2") || !strings.Contains(podYAML, "kind: Service") {
		t.Fatalf("validate -o yaml:\n%s", podYAML)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal([]byte(c.ok("validate", "-f", file, "-o", "json")), &doc); err != nil || doc["pod"] == nil || doc["service"] == nil {
		t.Fatalf("validate -o json: %v %v", doc, err)
	}
	c.fails(2, `required flag(s) "file" not set`, "validate")

	out = c.ok("deploy", "web", "-g", "workers", "-f", file)
	if !strings.Contains(out, "workers/web created: desired state committed") || !strings.Contains(out, "this does not mean the Pod is running") {
		t.Fatalf("deploy output:\n%s", out)
	}
	before := c.snapshot()
	out = c.ok("deploy", "web", "-g", "workers", "-f", file)
	if !strings.Contains(out, "workers/web unchanged") {
		t.Fatalf("re-deploy output:\n%s", out)
	}
	c.unchanged(before)

	var res struct{ Action, Pod, ServicePath string }
	if err := json.Unmarshal([]byte(c.ok("deploy", "web", "-g", "workers", "-f", file, "--image", "hello:v2", "-o", "json")), &res); err != nil || res.Action != "updated" {
		t.Fatalf("update: %+v %v", res, err)
	}
	ix := c.index(bucket)
	k, _ := state.NewKey("workers", "web")
	if e, ok := ix.Lookup(k); !ok || e.Pod != res.Pod || e.Service != res.ServicePath || e.Service == "" {
		t.Fatalf("index entry %+v, deploy said %+v", e, res)
	}
	pod, err := os.ReadFile(filepath.Join(bucket, res.Pod))
	if err != nil || state.VerifyPayload(res.Pod, pod) != nil || !strings.Contains(string(pod), "hello:v2") {
		t.Fatalf("pod payload: %v", err)
	}

	c.ok("deploy", "api", "-g", "workers", "--image", "api:v1", "--namespace", "product")
	var list []struct{ Name, Namespace, NodeGroup, Service, Origin, Error string }
	if err := json.Unmarshal([]byte(c.ok("list", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "api" || list[0].Namespace != "product" || list[1].Service != "default/web" || list[1].Error != "" {
		t.Fatalf("list = %+v", list)
	}
	if table := c.ok("list"); !strings.Contains(table, "workers    web   default    default/web  -") {
		t.Fatalf("list table:\n%s", table)
	}

	c.ok("delete", "api", "-g", "workers", "-y")
	before = c.snapshot()
	c.fails(3, "deployment workers/api does not exist: nothing was changed", "delete", "api", "-g", "workers", "-y")
	c.ok("delete", "api", "-g", "workers", "--ignore-not-found", "-y")
	c.unchanged(before)
	if ix := c.index(bucket); ix.Len() != 1 {
		t.Fatalf("index has %d entries after delete", ix.Len())
	}
}

func TestDeployRejectsBadInputBeforeWriting(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	file := filepath.Join(c.root, "web.yaml")
	c.ok("init", "web", "--image", "hello:v1", "-g", "workers", "-f", file)
	tests := []struct {
		name, wantErr string
		code          int
		args          []string
	}{
		// Missing and conflicting flags are bad usage (exit 2).
		{"no image", "deploy needs --image for the built-in manifest", 2, []string{"deploy", "web", "-g", "workers"}},
		{"port with file", "--port shapes the built-in manifest and cannot be combined with --file", 2, []string{"deploy", "web", "-g", "workers", "-f", file, "--port", "80:8080"}},
		{"cpu with file", "--cpu shapes the built-in manifest", 2, []string{"deploy", "web", "-g", "workers", "-f", file, "--cpu", "1"}},
		{"memory with file", "--memory shapes the built-in manifest", 2, []string{"deploy", "web", "-g", "workers", "-f", file, "--memory", "1Gi"}},
		{"env with file", "--env shapes the built-in manifest", 2, []string{"deploy", "web", "-g", "workers", "-f", file, "--env", "A=b"}},
		{"secret with file", "--secret shapes the built-in manifest", 2, []string{"deploy", "web", "-g", "workers", "-f", file, "--secret", "k"}},
		{"name mismatch", `does not match the deployment name "api"`, 1, []string{"deploy", "api", "-g", "workers", "-f", file}},
		{"nodegroup mismatch", "spec.template.spec.nodeSelector", 1, []string{"deploy", "web", "-g", "other", "-f", file}},
		{"service required", "Service", 1, []string{"deploy", "web", "-g", "workers", "-f", file, "--service"}},
		{"missing file", "read manifest", 1, []string{"deploy", "web", "-g", "workers", "-f", filepath.Join(c.root, "nope.yaml")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			before := c.snapshot()
			c.fails(tc.code, tc.wantErr, tc.args...)
			c.unchanged(before)
		})
	}
	// A bad flag value is bad usage, found while the flags are parsed.
	c.t = t
	before := c.snapshot()
	c.fails(2, `"-g, --nodegroup" flag: invalid NodeGroup ID "Workers"`, "deploy", "web", "-g", "Workers", "--image", "x:v1")
	c.unchanged(before)
}

// TestMain lets a test re-run this binary as the podmin command, so
// several real podmin processes can race on one bucket.
func TestMain(m *testing.M) {
	if os.Getenv("PODMIN_TEST_RUN_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestConcurrentDeployProcesses(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	const procs = 8
	var wg sync.WaitGroup
	errs := make([]error, procs)
	for i := 0; i < procs; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "deploy", fmt.Sprintf("app-%d", i), "-g", "workers", "--image", fmt.Sprintf("app:v%d", i))
			cmd.Env = append(os.Environ(), "PODMIN_TEST_RUN_MAIN=1")
			for k, v := range c.env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("process %d: %v\n%s", i, err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	ix := c.index(bucket)
	if ix.Len() != procs {
		t.Fatalf("index holds %d entries after %d concurrent deploy processes: a lost update", ix.Len(), procs)
	}
	for i := 0; i < procs; i++ {
		k, _ := state.NewKey("workers", fmt.Sprintf("app-%d", i))
		if _, ok := ix.Lookup(k); !ok {
			t.Errorf("%s missing from the index", k)
		}
	}
}

// TestProgressOnlyForCommits: deploy says it committed only when it did;
// an unchanged re-deploy, which writes nothing, says nothing of the kind.
func TestProgressOnlyForCommits(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	_, errs, code := c.run("deploy", "web", "-g", "workers", "--image", "hello:v1")
	if code != 0 || !strings.Contains(errs, "committed workers/web to bucket") || !strings.Contains(errs, "(created)") {
		t.Fatalf("first deploy: exit %d, stderr:\n%s", code, errs)
	}
	out, errs, code := c.run("deploy", "web", "-g", "workers", "--image", "hello:v1")
	if code != 0 || strings.Contains(errs, "commit") || !strings.Contains(out, "unchanged") {
		t.Fatalf("unchanged deploy: exit %d\nstdout: %s\nstderr: %s", code, out, errs)
	}
	script := c.script("again.star", "podmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = \"hello:v1\")\n")
	for _, args := range [][]string{{"run", script}, {"run", "--dry-run", script}} {
		if _, errs, code := c.run(args...); code != 0 || strings.Contains(errs, "commit") {
			t.Errorf("podmin %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, errs)
		}
	}
}
