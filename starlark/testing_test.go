// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runSuite writes a test file and runs it like podmin test.
func runSuite(t *testing.T, src string, opts TestOptions) (TestSummary, string) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "suite_test.star")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	opts.Paths, opts.Stdout, opts.CacheDir = []string{file}, &out, t.TempDir()
	sum, err := RunTests(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return sum, out.String()
}

// TestTestsAreIsolated proves that what one test writes (deployments, a
// secret, a file, a context) is invisible to the next, and that writes to
// absolute paths outside the sandbox land inside it.
func TestTestsAreIsolated(t *testing.T) {
	outside := t.TempDir()
	src := strings.NewReplacer("OUTSIDE", outside).Replace(`
def test_1_writes(t):
    podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1")
    podmin.secrets.create("token", for_ = "web", value = "s3cr3t-value")
    m = podmin.manifests.init("api", nodegroup = "workers", image = "api:v1", file = "OUTSIDE/api.yaml")
    t.assert.eq(podmin.manifests.validate(file = m.file).name, "api")
    podmin.deployments.preview(nodegroup = "workers", out = "OUTSIDE/pods")
    podmin.contexts.connect("other", provider = "local", bucket = "other")
    print("written by test 1")

def test_2_sees_nothing(t):
    t.assert.eq(podmin.deployments.list(), [])
    t.assert.eq(podmin.secrets.list().secrets, [])
    t.assert.eq([c.cluster for c in podmin.contexts.list()], ["test"])
    t.assert.eq(podmin.manifests.init("api", nodegroup = "workers", image = "api:v1", file = "OUTSIDE/api.yaml").name, "api")
`)
	sum, out := runSuite(t, src, TestOptions{})
	if sum.Passed != 2 || sum.Failed != 0 {
		t.Fatalf("%+v\n%s", sum, out)
	}
	if strings.Contains(out, "written by test 1") {
		t.Errorf("a passing test's output was printed without -v:\n%s", out)
	}
	entries, err := os.ReadDir(outside)
	if err != nil || len(entries) != 0 {
		t.Fatalf("a test wrote outside its sandbox: %v %v", entries, err)
	}
	_, out = runSuite(t, src, TestOptions{Verbose: true})
	if !strings.Contains(out, "--- PASS: ") || !strings.Contains(out, "    written by test 1\n") {
		t.Errorf("-v did not print the output:\n%s", out)
	}
}

func TestTestsHaveNoNetwork(t *testing.T) {
	sum, out := runSuite(t, `
def test_pull_from_the_internet(t):
    podmin.images.pull("docker.io/library/alpine:3.20")
`, TestOptions{})
	if sum.Failed != 1 || !strings.Contains(out, "network access is disabled in podmin test: GET https://index.docker.io/v2/") ||
		!strings.Contains(out, "t.fake_registry()") {
		t.Fatalf("%+v\n%s", sum, out)
	}
}

func TestFakeRegistry(t *testing.T) {
	sum, out := runSuite(t, `
def test_pull_and_push(t):
    reg = t.fake_registry()
    ref = reg.image("apps/hello:v1", platforms = ["linux/amd64", "linux/arm64"])
    t.assert.eq(ref, reg.host + "/apps/hello:v1")
    img = podmin.images.pull(ref)
    t.assert.eq(img.platforms, ["linux/amd64", "linux/arm64"])
    p = podmin.images.push(ref, destination = "hello:v1")
    t.assert.eq(p.references, ["registry.podmin.internal/apps/hello:v1"])
    t.fails(lambda: podmin.images.pull("127.0.0.2:5000/hello:v1"), "network access is disabled")
`, TestOptions{})
	if sum.Passed != 1 {
		t.Fatalf("%+v\n%s", sum, out)
	}
}

func TestTestRunFilter(t *testing.T) {
	sum, out := runSuite(t, `
def test_alpha(t):
    pass

def test_beta(t):
    fail("not selected, must not run")
`, TestOptions{Run: regexp.MustCompile("alp")})
	if sum.Passed != 1 || sum.Failed != 0 || strings.Contains(out, "test_beta") {
		t.Fatalf("%+v\n%s", sum, out)
	}
}

// TestDocumentedTestExample runs the example test of the reference, so the
// documentation cannot drift from the behaviour.
func TestDocumentedTestExample(t *testing.T) {
	var lines []string
	in := false
	for _, l := range strings.Split(Overview, "\n") {
		switch {
		case strings.HasPrefix(l, "    def test_pull(t):"):
			in = true
		case in && !strings.HasPrefix(l, "    "):
			in = false
		}
		if in {
			lines = append(lines, strings.TrimPrefix(l, "    "))
		}
	}
	if len(lines) < 2 {
		t.Fatal("the reference has no test_pull example")
	}
	sum, out := runSuite(t, strings.Join(lines, "\n")+"\n", TestOptions{})
	if sum.Passed != 1 || sum.Failed != 0 {
		t.Fatalf("%+v\n%s", sum, out)
	}
}

// TestTestRunChecksArguments calls main through t.run with the same typed
// argument checks as podmin run.
func TestTestRunChecksArguments(t *testing.T) {
	sum, out := runSuite(t, `
def main(ctx, n = 1, names = ["a"], verbose = False, label = "x"):
    return ctx.args

def test_args(t):
    t.assert.eq(t.run(main, n = "3")["n"], 3)
    t.assert.eq(t.run(main, n = 4, names = ["b", "c"], verbose = True)["names"], ["b", "c"])
    t.fails(lambda: t.run(main, n = "three"), 'n: want an integer, got "three"')
    t.fails(lambda: t.run(main, n = True), "n: want int, got bool")
    t.fails(lambda: t.run(main, names = [1]), "names: want a list of strings")
    t.fails(lambda: t.run(main, colour = "red"), "unknown parameter colour: main takes n, names, verbose, label")

def required(ctx, image):
    return image

def test_required(t):
    t.fails(lambda: t.run(required), "missing required parameter.s. image")
    t.assert.eq(t.run(required, image = "hello:v1"), "hello:v1")
`, TestOptions{})
	if sum.Passed != 2 || sum.Failed != 0 {
		t.Fatalf("%+v\n%s", sum, out)
	}
}
