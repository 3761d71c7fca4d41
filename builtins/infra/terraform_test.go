// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins/infra/tftest"
)

// TestTerraformModule runs the real Terraform on the module exactly as
// setup generates it: fmt -check (module and tests), init -backend=false
// with the AWS provider from the mirror, validate, and terraform test, which
// applies each golden fixture of testdata/ against a mocked provider and
// asserts the plan (tests/<fixture>.tftest.hcl).
func TestTerraformModule(t *testing.T) {
	tf := tftest.Find(t)
	fixtures, err := filepath.Glob(filepath.Join("testdata", "*.tfvars.json"))
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no golden fixtures: %v", err)
	}
	dir := t.TempDir()
	v := readFixture(t, fixtures[0])
	if _, err := Write(dir, v); err != nil {
		t.Fatal(err)
	}
	copyTree(t, filepath.Join("aws", "tests"), filepath.Join(dir, "tests"))
	run := func(t *testing.T, args ...string) string {
		t.Helper()
		cmd := exec.Command(tf.Bin, args...)
		cmd.Dir, cmd.Env = dir, tf.Env()
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("terraform %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	steps := []struct {
		name string
		args []string
		want string
	}{
		// The source tree, tests included: what fmt -check sees is what is
		// committed.
		{"fmt", []string{"fmt", "-check", "-recursive", "-diff", mustAbs(t, "aws")}, ""},
		{"init", []string{"init", "-backend=false", "-input=false", "-no-color"}, "Terraform has been successfully initialized!"},
		{"validate", []string{"validate", "-no-color"}, "Success! The configuration is valid."},
	}
	for _, s := range steps {
		if !t.Run(s.name, func(t *testing.T) {
			out := run(t, s.args...)
			if !strings.Contains(out, s.want) {
				t.Fatalf("terraform %s printed no %q:\n%s", s.name, s.want, out)
			}
			t.Logf("terraform %s: ok", s.name)
		}) {
			t.FailNow()
		}
	}
	tests, err := filepath.Glob(filepath.Join("aws", "tests", "*.tftest.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range fixtures {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".tfvars.json"))
	}
	for _, f := range tests {
		if n := strings.TrimSuffix(filepath.Base(f), ".tftest.hcl"); !slices.Contains(names, n) {
			t.Errorf("%s has no fixture testdata/%s.tfvars.json", f, n)
		}
	}
	for _, name := range names {
		t.Run("test/"+name, func(t *testing.T) {
			test := filepath.Join("tests", name+".tftest.hcl")
			if _, err := os.Stat(filepath.Join(dir, test)); err != nil {
				t.Fatalf("fixture testdata/%s.tfvars.json has no aws/%s asserting its plan", name, test)
			}
			data, err := os.ReadFile(filepath.Join("testdata", name+".tfvars.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, VarsFile), data, 0o600); err != nil {
				t.Fatal(err)
			}
			out := run(t, "test", "-no-color", "-filter="+test)
			if !strings.Contains(out, "1 passed, 0 failed") {
				t.Fatalf("terraform test %s:\n%s", test, out)
			}
			t.Logf("terraform test %s: 1 passed, 0 failed", test)
		})
	}
}

func readFixture(t *testing.T, path string) Vars {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v Vars
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// copyTree copies the regular files below src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}
