// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dirSnapshot maps every file and directory below dir to its bytes.
func dirSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			out[p+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestRecipeTestIsHermetic runs, through podmin test, a recipe test that
// connects to a real local bucket by its absolute path, deploys into it,
// and reads a private key of the home directory by every spelling. The
// host bucket stays byte-identical, no byte of the key is printed, every
// read is refused with a reason, and a fixture next to the test is still
// readable.
func TestRecipeTestIsHermetic(t *testing.T) {
	c := newCLI(t)
	bucket := c.connectLocal()
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	home := filepath.Join(c.root, "home")
	key := filepath.Join(home, ".ssh", "id_rsa")
	const keyContent = "-----BEGIN OPENSSH PRIVATE KEY----- hermetic-test-key-material"
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(keyContent), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env["HOME"] = home
	tests := filepath.Join(c.root, "recipes")
	if err := os.MkdirAll(tests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, tests, "ds.yaml", "")
	c.ok("init", "web", "-g", "workers", "--image", "hello:v1", "-f", filepath.Join(tests, "ds.yaml"), "--force")
	// A link next to the test that leads out of it is not a way out.
	if err := os.Symlink(key, filepath.Join(tests, "key.yaml")); err != nil {
		t.Fatal(err)
	}
	hostBefore := dirSnapshot(t, bucket)
	keyDir := filepath.Dir(key)
	writeFile(t, tests, "hermetic_test.star", fmt.Sprintf(`
def test_bucket_is_the_sandbox(t):
    c = podmin.contexts.connect("demo", provider = "local", bucket = %[1]q)
    d = podmin.deployments.deploy("evil", nodegroup = "workers", image = "hello:v2")
    t.assert.eq(d.action, "created")
    t.assert.eq([e.name for e in podmin.deployments.list()], ["evil"])
    podmin.deployments.delete("evil", nodegroup = "workers", confirm = True)

def test_reads_are_jailed(t):
    for f in ["~/.ssh/id_rsa", %[2]q, "../home/.ssh/id_rsa", "key.yaml"]:
        t.fails(lambda: podmin.manifests.validate(file = f), "reads as absent|does not expand ~|no such file")
    t.fails(lambda: podmin.secrets.create("k", for_ = "web", file = %[2]q), "reads as absent")
    t.fails(lambda: podmin.images.build(%[3]q, tag = "x:v1"), "reads as absent")
    t.assert.eq(podmin.manifests.validate(file = "ds.yaml").name, "web")

def test_prints_the_refusal(t):
    podmin.manifests.validate(file = %[2]q)
`, bucket, key, keyDir))
	out, errs, code := c.run("test", "-v", tests)
	if code != exitScript {
		t.Errorf("exit %d, want 5 (one test fails by design):\n%s%s", code, out, errs)
	}
	for _, want := range []string{
		"--- PASS: " + filepath.Join(tests, "hermetic_test.star") + ": test_bucket_is_the_sandbox",
		"--- PASS: " + filepath.Join(tests, "hermetic_test.star") + ": test_reads_are_jailed",
		"open " + key + ": outside the test's directory " + tests + " and its sandbox: podmin test reads only files below them, so this reads as absent",
		"2 passed, 1 failed",
	} {
		if !strings.Contains(out+errs, want) {
			t.Errorf("output lacks %q:\n%s%s", want, out, errs)
		}
	}
	if strings.Contains(out+errs, "hermetic-test-key-material") || strings.Contains(out+errs, "PRIVATE KEY") {
		t.Errorf("the key's content was printed:\n%s%s", out, errs)
	}
	if after := dirSnapshot(t, bucket); !maps.Equal(hostBefore, after) {
		for p := range after {
			if hostBefore[p] != after[p] {
				t.Errorf("host bucket changed: %s", p)
			}
		}
		t.Fatal("the recipe test wrote into the host bucket")
	}
	if list := c.ok("list"); !strings.Contains(list, "web") || strings.Contains(list, "evil") {
		t.Errorf("host cluster after the test:\n%s", list)
	}
}

// TestRecipeTestLoadsStayInItsProject: a recipe test loads files below its
// recipe root (and pinned repositories) only, so load() is no way to read
// a file elsewhere either.
func TestRecipeTestLoadsStayInItsProject(t *testing.T) {
	c := newCLI(t)
	outside := c.script("outside.star", "x = 1\n")
	tests := filepath.Join(c.root, "project", "tests")
	if err := os.MkdirAll(tests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(c.root, "project"), "podmin.star.lock", `{"recipes": {}}`)
	writeFile(t, filepath.Join(c.root, "project"), "lib.star", "y = 2\n")
	writeFile(t, tests, "inside_test.star", "load(\"//lib.star\", \"y\")\ndef test_inside(t):\n    t.assert.eq(y, 2)\n")
	writeFile(t, tests, "outside_test.star", "load(\"../../outside.star\", \"x\")\ndef test_outside(t):\n    pass\n")
	out, errs, code := c.run("test", tests)
	if code != exitScript || !strings.Contains(out, "--- PASS: "+filepath.Join(tests, "inside_test.star")) ||
		!strings.Contains(out, outside+" is outside the test's recipe root "+filepath.Join(c.root, "project")) {
		t.Errorf("exit %d:\n%s%s", code, out, errs)
	}
}
