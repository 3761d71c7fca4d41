// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/creack/pty"

	"podmin.dev/podmin/internal/secrets/secretstest"
)

// secretValues are every value the tests store; no output may contain one.
var secretValues = []string{"stdin-s3cret-value", "file-s3cret-value", "updated-s3cret-value", "tty-s3cret-value", "aws-s3cret-value"}

// noValues fails when any output contains a secret value.
func noValues(t *testing.T, outputs ...string) {
	t.Helper()
	for _, out := range outputs {
		for _, v := range secretValues {
			if strings.Contains(out, v) {
				t.Errorf("output contains the secret value %q:\n%s", v, out)
			}
		}
	}
}

// secretCLI is a CLI connected to a local cluster "demo".
func secretCLI(t *testing.T) *cli {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	return c
}

// runSecret runs podmin and checks its output for values.
func (c *cli) runSecret(args ...string) (string, string, int) {
	c.t.Helper()
	out, errs, code := c.run(args...)
	noValues(c.t, out, errs)
	return out, errs, code
}

func TestSecretCreateListUpdateDestroy(t *testing.T) {
	c := secretCLI(t)
	c.stdin = "stdin-s3cret-value"
	out, errs, code := c.runSecret("secret", "create", "db-password", "--for", "web", "--stdin")
	if code != 0 || out != "created /demo/default/web/db-password in local\n" {
		t.Fatalf("create --stdin: exit %d\n%s%s", code, out, errs)
	}
	file := filepath.Join(c.root, "value.txt")
	if err := os.WriteFile(file, []byte("file-s3cret-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.stdin = ""
	if out, errs, code := c.runSecret("secret", "create", "api-token", "--for", "api", "-n", "product", "--file", file); code != 0 {
		t.Fatalf("create --file: exit %d\n%s%s", code, out, errs)
	}
	stored := filepath.Join(c.root, "data", "podmin", "secrets", "demo", "product", "api", "api-token")
	if b, err := os.ReadFile(stored); err != nil || string(b) != "file-s3cret-value" {
		t.Fatalf("stored value: %v", err)
	}

	table, _, _ := c.runSecret("secret", "list")
	if !strings.Contains(table, "/demo/default/web/db-password  local") || !strings.Contains(table, "/demo/product/api/api-token") {
		t.Errorf("list table:\n%s", table)
	}
	var list struct {
		Provider string
		Secrets  []struct{ Name, Provider, LastModified string }
	}
	out, _, _ = c.runSecret("secret", "list", "--for", "web", "-o", "json")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Provider != "local" || len(list.Secrets) != 1 || list.Secrets[0].Name != "/demo/default/web/db-password" || list.Secrets[0].LastModified == "" {
		t.Errorf("list --for web -o json = %+v", list)
	}
	if out, _, _ := c.runSecret("secret", "list", "-n", "product", "-o", "yaml"); !strings.Contains(out, "name: /demo/product/api/api-token") || strings.Contains(out, "db-password") {
		t.Errorf("list -n product -o yaml:\n%s", out)
	}

	c.stdin = "updated-s3cret-value"
	if out, errs, code := c.runSecret("secret", "update", "db-password", "--for", "web", "--stdin"); code != 0 || out != "updated /demo/default/web/db-password in local\n" {
		t.Fatalf("update: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := c.runSecret("secret", "update", "absent", "--for", "web", "--stdin"); code != 3 || !strings.Contains(errs, "use create to add it") {
		t.Errorf("update absent: exit %d %s", code, errs)
	}
	if _, errs, code := c.runSecret("secret", "create", "db-password", "--for", "web", "--stdin"); code != 1 || !strings.Contains(errs, "use update to change its value") {
		t.Errorf("create existing: exit %d %s", code, errs)
	}

	// destroy without a terminal needs --yes and never waits for input.
	c.stdin = "demo\n"
	_, errs, code = c.runSecret("secret", "destroy", "db-password", "--for", "web")
	if code != 4 || !strings.Contains(errs, "standard input is not a terminal to confirm it: pass --yes (-y)") {
		t.Errorf("destroy without --yes: exit %d %s", code, errs)
	}
	if out, errs, code := c.runSecret("secret", "destroy", "db-password", "--for", "web", "--yes"); code != 0 || out != "destroyed /demo/default/web/db-password in local\n" {
		t.Fatalf("destroy --yes: exit %d\n%s%s", code, out, errs)
	}
	if out, _, _ := c.runSecret("secret", "list", "--for", "web"); !strings.Contains(out, "no secrets in local for cluster demo") {
		t.Errorf("list after destroy:\n%s", out)
	}
	if _, errs, code := c.runSecret("secret", "destroy", "db-password", "--for", "web", "-y"); code != 3 || !strings.Contains(errs, "secret not found") {
		t.Errorf("destroy again: exit %d %s", code, errs)
	}
}

func TestSecretUsageErrors(t *testing.T) {
	c := secretCLI(t)
	file := filepath.Join(c.root, "value.txt")
	if err := os.WriteFile(file, []byte("file-s3cret-value"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		code    int
		wantErr string
		args    []string
	}{
		{"no value source", 2, "standard input is not a terminal to prompt on: pass --stdin to read the value from standard input, or --file PATH",
			[]string{"secret", "create", "k", "--for", "web"}},
		{"both sources", 2, "--stdin and --file cannot be combined: each gives the value", []string{"secret", "create", "k", "--for", "web", "--stdin", "--file", file}},
		{"bad key before reading", 2, `"a/b" is not a safe key`, []string{"secret", "create", "a/b", "--for", "web"}},
		{"no pod", 2, "no Pod given: pass --for POD", []string{"secret", "create", "k", "--file", file}},
		{"unsupported delete", 1, "local has no delete/restore: use destroy to delete permanently", []string{"secret", "delete", "k", "--for", "web", "-y"}},
		{"unsupported restore", 1, "local has no delete/restore: use destroy to delete permanently", []string{"secret", "restore", "k", "--for", "web"}},
		{"unknown provider", 2, `unknown secrets provider "vault"`, []string{"secret", "list", "--provider", "vault"}},
		{"internal system key", 2, `"cluster-ca" is not a system key you can manage`, []string{"secret", "destroy", "cluster-ca", "--system", "-y"}},
		{"system namespace", 2, `"_system" is not a namespace`, []string{"secret", "create", "workload-ca-key", "--for", "x", "-n", "_system", "--file", file}},
		{"list takes no key", 2, "unknown command", []string{"secret", "list", "k"}},
		{"missing key", 2, "accepts 1 arg(s)", []string{"secret", "create", "--for", "web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			before := c.snapshot()
			out, errs, code := c.runSecret(tc.args...)
			if code != tc.code || !strings.Contains(errs, tc.wantErr) {
				t.Fatalf("exit %d, want %d with %q\nstdout: %s\nstderr: %s", code, tc.code, tc.wantErr, out, errs)
			}
			c.unchanged(before)
		})
	}
}

func TestSecretSystemKey(t *testing.T) {
	c := secretCLI(t)
	c.stdin = `{"Authorization":"Bearer stdin-s3cret-value"}`
	if out, errs, code := c.runSecret("secret", "create", "otel-logs-headers", "--system", "--stdin"); code != 0 || out != "created /demo/_system/otel-logs-headers in local\n" {
		t.Fatalf("create --system: exit %d\n%s%s", code, out, errs)
	}
	out, _, _ := c.runSecret("secret", "list", "--system")
	if !strings.Contains(out, "/demo/_system/otel-logs-headers") {
		t.Errorf("list --system:\n%s", out)
	}
	if _, errs, code := c.runSecret("secret", "update", "otel-logs-headers", "--system", "--for", "web", "--stdin"); code != 2 || !strings.Contains(errs, "omit --for and --namespace") {
		t.Errorf("--system with --for: exit %d %s", code, errs)
	}
}

// TestSecretAWSThroughEnvironment drives the real SDK clients, configured
// only by the standard AWS variables, against the wire-protocol fakes.
func TestSecretAWSThroughEnvironment(t *testing.T) {
	ssmFake, smFake := secretstest.NewFakeSSM(t), secretstest.NewFakeSecretsManager(t)
	t.Setenv("AWS_ENDPOINT_URL_SSM", ssmFake.URL())
	t.Setenv("AWS_ENDPOINT_URL_SECRETS_MANAGER", smFake.URL())
	awsTestEnv(t, "")
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket", "--secrets-provider", "aws-parameter-store")
	c.stdin = "aws-s3cret-value"
	if out, errs, code := c.runSecret("secret", "create", "token", "--for", "web", "--stdin"); code != 0 || out != "created /demo/default/web/token in aws-parameter-store\n" {
		t.Fatalf("create: exit %d\n%s%s", code, out, errs)
	}
	if got := ssmFake.Type("/demo/default/web/token"); got != "SecureString" {
		t.Errorf("parameter type %q, want SecureString", got)
	}
	before := ssmFake.Count()
	_, errs, code := c.runSecret("secret", "delete", "token", "--for", "web", "-y")
	if code != 1 || !strings.Contains(errs, "aws-parameter-store has no delete/restore: use destroy to delete permanently") || ssmFake.Count() != before {
		t.Errorf("delete on Parameter Store: exit %d %s (requests %d → %d)", code, errs, before, ssmFake.Count())
	}
	c.stdin = "\xff\xfe aws-s3cret-value"
	if _, errs, code := c.runSecret("secret", "update", "token", "--for", "web", "--stdin"); code != 1 || !strings.Contains(errs, "not valid UTF-8") || ssmFake.Count() != before {
		t.Errorf("binary update on Parameter Store: exit %d %s", code, errs)
	}
	if out, errs, code := c.runSecret("secret", "create", "blob", "--for", "web", "--stdin", "--provider", "aws-secrets-manager"); code != 0 {
		t.Fatalf("binary create on Secrets Manager: exit %d\n%s%s", code, out, errs)
	}
	if !smFake.IsBinary("/demo/default/web/blob") {
		t.Errorf("Secrets Manager stored the binary value as a string")
	}
	if out, errs, code := c.runSecret("secret", "delete", "blob", "--for", "web", "--provider", "aws-secrets-manager", "--yes"); code != 0 || !strings.Contains(out, "scheduled for deletion") || !strings.Contains(out, "within 30 days") {
		t.Fatalf("delete on Secrets Manager: exit %d\n%s%s", code, out, errs)
	}
	if out, _, _ := c.runSecret("secret", "list", "--provider", "aws-secrets-manager"); !strings.Contains(out, "scheduled for deletion") {
		t.Errorf("list shows no pending deletion:\n%s", out)
	}
	if out, errs, code := c.runSecret("secret", "restore", "blob", "--for", "web", "--provider", "aws-secrets-manager"); code != 0 || out != "restored /demo/default/web/blob in aws-secrets-manager\n" {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errs)
	}
	if out, errs, code := c.runSecret("secret", "destroy", "token", "--for", "web", "-y"); code != 0 || ssmFake.Type("/demo/default/web/token") != "" {
		t.Fatalf("destroy: exit %d\n%s%s", code, out, errs)
	}
}

// TestSecretTerminalPrompts types the value and the confirmation into a
// real pseudo-terminal.
func TestSecretTerminalPrompts(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	defer tty.Close()
	c := secretCLI(t)
	lookup := func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }
	runTTY := func(input string, args ...string) (string, string, int) {
		if _, err := ptmx.Write([]byte(input)); err != nil {
			t.Fatal(err)
		}
		var out, errb bytes.Buffer
		code := run(context.Background(), args, tty, &out, &errb, lookup)
		noValues(t, out.String(), errb.String())
		return out.String(), errb.String(), code
	}
	out, errs, code := runTTY("tty-s3cret-value\n", "secret", "create", "k", "--for", "web")
	if code != 0 || !strings.Contains(errs, "Value for k (input is hidden): ") {
		t.Fatalf("prompted create: exit %d\n%s%s", code, out, errs)
	}
	if b, err := os.ReadFile(filepath.Join(c.root, "data", "podmin", "secrets", "demo", "default", "web", "k")); err != nil || string(b) != "tty-s3cret-value" {
		t.Fatalf("stored value: %q %v", b, err)
	}
	_, errs, code = runTTY("wrong\n", "secret", "destroy", "k", "--for", "web")
	if code != 4 || !strings.Contains(errs, "Type the cluster ID (demo) to confirm") || !strings.Contains(errs, "nothing was changed") {
		t.Fatalf("wrong confirmation: exit %d %s", code, errs)
	}
	if out, errs, code := runTTY("demo\n", "secret", "destroy", "k", "--for", "web"); code != 0 || out != "destroyed /demo/default/web/k in local\n" {
		t.Fatalf("confirmed destroy: exit %d\n%s%s", code, out, errs)
	}
}
