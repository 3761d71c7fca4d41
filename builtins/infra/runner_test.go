// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package infra

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakeTF is a recording fake OpenTofu/Terraform: it logs its working
// directory, arguments and environment, and answers like the real tool.
const fakeTF = `#!/bin/bash
{
  printf 'cwd=%s\n' "$PWD"
  for a in "$@"; do printf 'arg=%s\n' "$a"; done
  env | LC_ALL=C sort | sed 's/^/env=/'
  echo --
} >> "$FAKE_TF_LOG"
if [ -n "$FAKE_TF_WARN" ]; then
  printf '%s\n' "There are some problems with the CLI configuration:" "Warning: Unable to open CLI configuration file" >&2
fi
case "$1" in
version) echo '{"terraform_version":"'"${FAKE_TF_VERSION:-1.11.4}"'","platform":"linux_amd64"}' ;;
init)
  if [ "$FAKE_TF_FAIL" = init ]; then echo "Error: Failed to get existing workspaces" >&2; exit 1; fi
  echo "Terraform has been successfully initialized!" ;;
plan)
  if [ "$FAKE_TF_FAIL" = lock ]; then
    printf '%s\n' "Error: Error acquiring the state lock" "" "Lock Info:" \
      "  ID:        3f1c2a9e-1111-2222-3333-444455556666" "  Path:      demo-state/tfstate/podmin.tfstate" >&2
    exit 1
  fi
  if [ "$FAKE_TF_FAIL" = plan ]; then echo "Error: Unsupported argument" >&2; exit 1; fi
  echo "Plan: 2 to add, 1 to change, 1 to destroy."
  echo plan > podmin.tfplan
  exit "${FAKE_TF_PLAN_CODE:-2}" ;;
output) echo '{"vpc_created":{"value":true,"type":"bool"},"vpc_id":{"value":"vpc-1","type":"string"}}' ;;
show) echo '{"resource_changes":[{"change":{"actions":["create"]}},{"change":{"actions":["delete","create"]}},{"change":{"actions":["update"]}},{"change":{"actions":["no-op"]}}]}' ;;
apply)
  if [ "$FAKE_TF_FAIL" = apply ]; then echo "Error: creating EC2 VPC: UnauthorizedOperation" >&2; exit 1; fi
  echo "Apply complete! Resources: 2 added, 1 changed, 1 destroyed." ;;
*) echo "fake: unexpected $1" >&2; exit 64 ;;
esac
`

// call is one recorded invocation.
type call struct {
	cwd  string
	args []string
	env  map[string]string
}

type fakeTool struct {
	bin, log string
}

func newFakeTool(t *testing.T) *fakeTool {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	dir := t.TempDir()
	f := &fakeTool{bin: filepath.Join(dir, "fake-tf"), log: filepath.Join(dir, "calls.log")}
	if err := os.WriteFile(f.bin, []byte(fakeTF), 0o755); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fakeTool) calls(t *testing.T) []call {
	t.Helper()
	data, err := os.ReadFile(f.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []call
	for _, block := range strings.Split(string(data), "--\n") {
		if strings.TrimSpace(block) == "" {
			continue
		}
		c := call{env: map[string]string{}}
		for _, line := range strings.Split(strings.TrimSuffix(block, "\n"), "\n") {
			k, v, _ := strings.Cut(line, "=")
			switch k {
			case "cwd":
				c.cwd = v
			case "arg":
				c.args = append(c.args, v)
			case "env":
				ek, ev, _ := strings.Cut(v, "=")
				c.env[ek] = ev
			}
		}
		out = append(out, c)
	}
	return out
}

func (f *fakeTool) runner(t *testing.T, env map[string]string) (*Runner, *bytes.Buffer) {
	t.Helper()
	var out bytes.Buffer
	r := &Runner{Dir: t.TempDir(), Bucket: "demo-state", Region: "us-west-2", CacheDir: t.TempDir(),
		LookupEnv: func(k string) (string, bool) {
			if k == "PODMIN_TF_CMD" {
				return f.bin, true
			}
			v, ok := env[k]
			return v, ok
		},
		Environ: []string{"PATH=" + os.Getenv("PATH"), "FAKE_TF_LOG=" + f.log, "HOME=/home/op"},
		Output:  &out,
	}
	for k, v := range env {
		if strings.HasPrefix(k, "FAKE_") {
			r.Environ = append(r.Environ, k+"="+v)
		}
	}
	return r, &out
}

func TestRunnerSequence(t *testing.T) {
	f := newFakeTool(t)
	r, out := f.runner(t, nil)
	r.Profile = "ops"
	ctx := context.Background()
	if err := r.CheckVersion(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.Init(ctx); err != nil {
		t.Fatal(err)
	}
	p, err := r.Plan(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if p.Add != 2 || p.Change != 1 || p.Destroy != 1 || !strings.Contains(p.Text, "Plan: 2 to add") {
		t.Fatalf("plan %+v", p)
	}
	if err := r.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	want := [][]string{
		{"version", "-json"},
		{"init", "-input=false", "-reconfigure", "-backend-config=bucket=demo-state", "-backend-config=key=tfstate/podmin.tfstate",
			"-backend-config=region=us-west-2", "-backend-config=use_lockfile=true", "-backend-config=encrypt=true", "-backend-config=profile=ops"},
		{"plan", "-input=false", "-lock-timeout=60s", "-detailed-exitcode", "-out=podmin.tfplan"},
		{"show", "-json", "podmin.tfplan"},
		{"apply", "-input=false", "-lock-timeout=60s", "podmin.tfplan"},
	}
	calls := f.calls(t)
	if len(calls) != len(want) {
		t.Fatalf("%d calls, want %d", len(calls), len(want))
	}
	for i, c := range calls {
		if !reflect.DeepEqual(c.args, want[i]) {
			t.Errorf("call %d: %q, want %q", i, c.args, want[i])
		}
		if c.cwd != r.Dir {
			t.Errorf("call %d ran in %s, not the module directory %s", i, c.cwd, r.Dir)
		}
		if c.env["TF_PLUGIN_CACHE_DIR"] != filepath.Join(r.CacheDir, "tf-plugins") || c.env["TF_IN_AUTOMATION"] != "1" || c.env["TF_INPUT"] != "0" {
			t.Errorf("call %d environment: %v", i, c.env)
		}
	}
	// The tool refuses a plugin cache directory that does not exist.
	if st, err := os.Stat(filepath.Join(r.CacheDir, "tf-plugins")); err != nil || !st.IsDir() {
		t.Errorf("the plugin cache directory was not created: %v", err)
	}
	if !strings.Contains(out.String(), "Apply complete!") {
		t.Errorf("the tool's output was not streamed: %q", out.String())
	}
}

func TestRunnerHonoursPluginCacheAndDestroy(t *testing.T) {
	f := newFakeTool(t)
	shared := filepath.Join(t.TempDir(), "shared", "plugins")
	r, _ := f.runner(t, map[string]string{"TF_PLUGIN_CACHE_DIR": shared, "FAKE_TF_PLAN_CODE": "0"})
	p, err := r.Plan(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if p.Add+p.Change+p.Destroy != 0 {
		t.Fatalf("no-change plan counted %+v", p)
	}
	calls := f.calls(t)
	if len(calls) != 1 || calls[0].args[len(calls[0].args)-1] != "-destroy" || calls[0].env["TF_PLUGIN_CACHE_DIR"] != shared {
		t.Fatalf("calls %+v", calls)
	}
	if _, err := os.Stat(shared); err != nil {
		t.Fatalf("TF_PLUGIN_CACHE_DIR was not created: %v", err)
	}
}

// Warnings on standard error (a CLI configuration the tool cannot read)
// reach the operator but never the JSON Podmin reads from standard
// output.
func TestRunnerReadsJSONFromStdoutOnly(t *testing.T) {
	f := newFakeTool(t)
	r, out := f.runner(t, map[string]string{"FAKE_TF_WARN": "1"})
	ctx := context.Background()
	if err := r.CheckVersion(ctx); err != nil {
		t.Fatalf("version with a warning: %v", err)
	}
	p, err := r.Plan(ctx, false)
	if err != nil || p.Add != 2 || strings.Contains(p.Text, "Warning") {
		t.Fatalf("plan with a warning: %+v, %v", p, err)
	}
	outs, err := r.Outputs(ctx)
	if err != nil || string(outs["vpc_created"]) != "true" || string(outs["vpc_id"]) != `"vpc-1"` {
		t.Fatalf("outputs with a warning: %v, %v", outs, err)
	}
	if strings.Count(out.String(), "Unable to open CLI configuration file") != 4 {
		t.Fatalf("the warnings were not shown:\n%s", out)
	}
}

func TestRunnerFailures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		fail string
		step func(r *Runner) error
		is   error
		want string
	}{
		{"init", func(r *Runner) error { return r.Init(ctx) }, ErrTool, "OpenTofu/Terraform failed: init exited with status 1"},
		{"plan", func(r *Runner) error { _, err := r.Plan(ctx, false); return err }, ErrTool, "OpenTofu/Terraform failed: plan exited with status 1"},
		{"apply", func(r *Runner) error { return r.Apply(ctx) }, ErrTool, "OpenTofu/Terraform failed: apply exited with status 1"},
		{"lock", func(r *Runner) error { _, err := r.Plan(ctx, false); return err }, ErrStateLocked,
			`the OpenTofu/Terraform state is locked: another setup, teardown or destroy of this cluster is running, or one was interrupted: wait for it, or if none is running, run "force-unlock 3f1c2a9e-1111-2222-3333-444455556666" with OpenTofu/Terraform in `},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			f := newFakeTool(t)
			r, _ := f.runner(t, map[string]string{"FAKE_TF_FAIL": tc.fail})
			err := tc.step(r)
			if !errors.Is(err, tc.is) || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRunnerVersionAndExecutable(t *testing.T) {
	f := newFakeTool(t)
	r, _ := f.runner(t, map[string]string{"FAKE_TF_VERSION": "1.10.5"})
	if err := r.CheckVersion(context.Background()); err == nil || err.Error() != "OpenTofu/Terraform 1.10.5 is too old: install 1.11 or newer" {
		t.Fatalf("old version: %v", err)
	}
	found := map[string]bool{}
	r = &Runner{LookPath: func(n string) (string, error) {
		if found[n] {
			return "/usr/bin/" + n, nil
		}
		return "", exec.ErrNotFound
	}}
	if _, err := r.Executable(); err == nil || !strings.Contains(err.Error(), "OpenTofu/Terraform is not installed") {
		t.Fatalf("none installed: %v", err)
	}
	found["terraform"] = true
	if p, _ := r.Executable(); p != "/usr/bin/terraform" {
		t.Fatalf("terraform only: %s", p)
	}
	found["tofu"] = true
	if p, _ := r.Executable(); p != "/usr/bin/tofu" {
		t.Fatalf("tofu is preferred: %s", p)
	}
	r.LookupEnv = func(k string) (string, bool) { return "/opt/tf", k == "PODMIN_TF_CMD" }
	if p, _ := r.Executable(); p != "/opt/tf" {
		t.Fatalf("PODMIN_TF_CMD wins: %s", p)
	}
}

// TestRunnerVersionRule checks the version rule on the versions OpenTofu and
// Terraform print: releases and pre-releases of 1.11 and later pass, older
// ones are too old, and anything that is not a version is not guessed at.
func TestRunnerVersionRule(t *testing.T) {
	for _, tc := range []struct{ version, want string }{
		{"1.11.0", ""},
		{"1.11.0-rc1", ""},
		{"1.12.2", ""},
		{"1.100.0", ""},
		{"2.0.0", ""},
		{"1.10.9", "OpenTofu/Terraform 1.10.9 is too old: install 1.11 or newer"},
		{"0.15.5", "OpenTofu/Terraform 0.15.5 is too old: install 1.11 or newer"},
		{"1.11-dev", `OpenTofu/Terraform version "1.11-dev" is not understood: install 1.11 or newer`},
		{"1.11.0.1", `OpenTofu/Terraform version "1.11.0.1" is not understood: install 1.11 or newer`},
		{"latest", `OpenTofu/Terraform version "latest" is not understood: install 1.11 or newer`},
	} {
		t.Run(tc.version, func(t *testing.T) {
			f := newFakeTool(t)
			r, _ := f.runner(t, map[string]string{"FAKE_TF_VERSION": tc.version})
			err := r.CheckVersion(context.Background())
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("version %s: error %q, want %q", tc.version, got, tc.want)
			}
		})
	}
}
