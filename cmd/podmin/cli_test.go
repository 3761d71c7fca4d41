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
	"runtime"
	"strings"
	"testing"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/version"
)

// cli runs podmin in-process with its own state directories.
type cli struct {
	t     *testing.T
	root  string
	env   map[string]string
	stdin string
	// adjust, when set, changes the Env of every command run.
	adjust func(*builtins.Env)
}

func newCLI(t *testing.T) *cli {
	// An error withholds input that shares four bytes with a secret value
	// of any live registry of the process (scrub.Quote); registries are
	// held weakly, so collect those of earlier tests, whose random keys
	// and tokens would otherwise hide this test's input now and then.
	runtime.GC()
	root := t.TempDir()
	return &cli{t: t, root: root, env: map[string]string{
		"XDG_CONFIG_HOME": filepath.Join(root, "config"),
		"XDG_CACHE_HOME":  filepath.Join(root, "cache"),
		"XDG_DATA_HOME":   filepath.Join(root, "data"),
		"XDG_RUNTIME_DIR": filepath.Join(root, "run"),
	}}
}

func (c *cli) run(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = runWith(context.Background(), args, strings.NewReader(c.stdin), &out, &errb, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok }, c.adjust)
	return out.String(), errb.String(), code
}

func (c *cli) ok(args ...string) string {
	c.t.Helper()
	out, errs, code := c.run(args...)
	if code != 0 {
		c.t.Fatalf("podmin %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

func (c *cli) fails(wantCode int, wantErr string, args ...string) {
	c.t.Helper()
	out, errs, code := c.run(args...)
	if code != wantCode || !strings.Contains(errs, wantErr) {
		c.t.Fatalf("podmin %s: exit %d, want %d with %q\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, wantCode, wantErr, out, errs)
	}
}

// snapshot lists every file below the test root with its content, so a
// failed command can be shown to have changed nothing.
func (c *cli) snapshot() map[string]string {
	c.t.Helper()
	return dirSnapshot(c.t, c.root)
}

func (c *cli) unchanged(before map[string]string) {
	c.t.Helper()
	after := c.snapshot()
	for p := range after {
		if _, ok := before[p]; !ok {
			c.t.Errorf("created %s", p)
		}
	}
	for p, v := range before {
		if after[p] != v {
			c.t.Errorf("changed or removed %s", p)
		}
	}
}

func TestConnectUseDisconnect(t *testing.T) {
	c := newCLI(t)
	out := c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	if !strings.Contains(out, "bucket demo-bucket: created, Podmin's own (destroy may delete it)") {
		t.Fatalf("connect output:\n%s", out)
	}
	tags, err := os.ReadFile(filepath.Join(c.root, "data", "podmin", "buckets", "demo-bucket", ".podmin", "tags.json"))
	if err != nil || !strings.Contains(string(tags), `"podmin:cluster": "demo"`) || !strings.Contains(string(tags), `"podmin:create-nonce": "`) {
		t.Fatalf("bucket tag: %s %v", tags, err)
	}
	if st, err := os.Stat(filepath.Join(c.root, "config", "podmin", "contexts.json")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("contexts file: %v %v", st, err)
	}
	// Reconnecting to our own bucket is fine; a second cluster gets its own.
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	c.ok("connect", "other", "--provider", "local", "--bucket", "other-bucket", "--secrets-provider", "aws-secrets-manager")

	var list []struct {
		Cluster, SecretsProvider string
		Current                  bool
	}
	if err := json.Unmarshal([]byte(c.ok("use", "-o", "json")), &list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Cluster != "demo" || list[0].Current || !list[1].Current || list[1].SecretsProvider != "aws-secrets-manager" {
		t.Fatalf("use -o json = %+v", list)
	}
	c.ok("use", "demo")
	table := c.ok("use")
	if !strings.Contains(table, "*        demo") {
		t.Fatalf("use table does not mark demo current:\n%s", table)
	}
	c.ok("disconnect", "demo", "-y")
	// The bucket stays: disconnect is local only.
	if _, err := os.Stat(filepath.Join(c.root, "data", "podmin", "buckets", "demo-bucket", ".podmin")); err != nil {
		t.Fatalf("disconnect touched the bucket: %v", err)
	}
	c.fails(1, "needs a current context", "disconnect", "other")
	c.ok("use", "other")
	c.ok("disconnect", "other", "--yes")
}

func TestBadInputChangesNothing(t *testing.T) {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	// A bucket that another cluster's connect created and tagged.
	foreign := filepath.Join(c.root, "foreign")
	other := newCLI(t)
	other.ok("connect", "theirs", "--provider", "local", "--bucket", foreign)

	tests := []struct {
		name    string
		code    int
		wantErr string
		args    []string
	}{
		{"invalid cluster ID", 2, `invalid cluster ID "Bad_ID": it must start with a lowercase letter`,
			[]string{"connect", "Bad_ID", "--provider", "local", "--bucket", "x-bucket"}},
		{"reserved cluster ID", 2, `invalid cluster ID "_system": the name is reserved`,
			[]string{"connect", "_system", "--provider", "local", "--bucket", "x-bucket"}},
		{"unknown provider", 2, `unknown provider "gcp": use one of ["aws" "local"]`,
			[]string{"connect", "new", "--provider", "gcp", "--bucket", "x-bucket"}},
		{"missing provider", 2, `required flag(s) "provider" not set`,
			[]string{"connect", "new", "--bucket", "x-bucket"}},
		{"missing bucket", 2, `required flag(s) "bucket" not set`,
			[]string{"connect", "new", "--provider", "local"}},
		{"invalid bucket", 1, `invalid bucket name "X": 1 characters`,
			[]string{"connect", "new", "--provider", "local", "--bucket", "X"}},
		{"bad secrets provider", 1, `secrets provider "local" cannot be used with provider "aws"`,
			[]string{"connect", "new", "--provider", "aws", "--bucket", "x-bucket", "--secrets-provider", "local"}},
		{"local region", 1, `the local provider has one region, "local", not "eu-west-1"`,
			[]string{"connect", "new", "--provider", "local", "--bucket", "x-bucket", "--region", "eu-west-1"}},
		{"bucket of another context", 1, `bucket "demo-bucket" is already the bucket of context "demo"`,
			[]string{"connect", "new", "--provider", "local", "--bucket", "demo-bucket"}},
		{"bucket tagged for another cluster", 4, "is tagged podmin:cluster=theirs, not new",
			[]string{"connect", "new", "--provider", "local", "--bucket", foreign}},
		{"another bucket for a saved context", 4, `context demo already connects bucket demo-bucket (provider local, region local): connecting it to bucket demo-bukket (provider local) would replace that: nothing was created or saved; check the bucket's name, pass --replace`,
			[]string{"connect", "demo", "--provider", "local", "--bucket", "demo-bukket"}},
		{"use unknown context", 3, `unknown context "nope": saved contexts are ["demo"]`,
			[]string{"use", "nope"}},
		{"disconnect unknown context", 3, `unknown context "nope"`,
			[]string{"disconnect", "nope"}},
		{"unknown flag", 2, "unknown flag: --bukket",
			[]string{"connect", "new", "--bukket", "x"}},
		{"unknown output", 2, `unknown output format "xml"`,
			[]string{"use", "-o", "xml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.t = t
			before := c.snapshot()
			c.fails(tc.code, tc.wantErr, tc.args...)
			c.unchanged(before)
		})
	}
}

// TestConnectReplace replaces a context's bucket with --replace: stderr
// and -o json say what was replaced, and connecting back keeps the first
// bucket Podmin's.
func TestConnectReplace(t *testing.T) {
	c := newCLI(t)
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	out, errs, code := c.run("connect", "demo", "--provider", "local", "--bucket", "demo-bukket", "--replace", "-o", "json")
	if code != 0 || errs != "creating bucket demo-bukket in local\nreplaced context demo: it connected bucket demo-bucket (provider local, region local); it now connects bucket demo-bukket (provider local, region local); it keeps the proof that Podmin created demo-bucket (provider local): connect back to one with --replace to use it again, or to destroy it\n" {
		t.Fatalf("connect --replace: exit %d\n%s", code, errs)
	}
	var res struct {
		Context  struct{ Bucket string }
		Previous *struct{ Bucket string }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Previous == nil || res.Previous.Bucket != "demo-bucket" || res.Context.Bucket != "demo-bukket" {
		t.Fatalf("connect --replace -o json: %v\n%s", err, out)
	}
	out = c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket", "--replace")
	if !strings.Contains(out, "bucket demo-bucket: existing, Podmin's own (destroy may delete it)") {
		t.Fatalf("back to the first bucket:\n%s", out)
	}
}

func TestUnwritableConfigDirectory(t *testing.T) {
	c := newCLI(t)
	// A regular file where the config directory's parent should be: not
	// even root can create the directory.
	blocker := filepath.Join(c.root, "blocked")
	if err := os.WriteFile(blocker, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env["XDG_CONFIG_HOME"] = blocker
	before := c.snapshot()
	c.fails(1, "cannot create directory "+filepath.Join(blocker, "podmin"), "connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	c.unchanged(before) // in particular: no bucket was created
}

func TestCommandsNeedAContext(t *testing.T) {
	c := newCLI(t)
	c.fails(1, `"podmin disconnect" needs a current context: no current context: run "podmin connect CLUSTER`, "disconnect", "x")
	// connect, use, version and help do not.
	c.ok("use")
	c.ok("version")
	c.ok("help")
	if out := c.ok("--version"); out != "podmin version "+version.Current().String()+"\n" {
		t.Fatalf("--version printed %q", out)
	}
}
