// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"podmin.dev/podmin/internal/scrub"
)

// leakCase is one attempt to get a secret value out of Podmin. Scripts
// and inputs spell the value as VALUE and its base64 as B64VALUE; each
// case gets a fresh random value, so the process's scrubber cannot know
// it from an earlier case.
type leakCase struct {
	name string
	// mode is "run" (podmin run FILE), "dry-run", "test" (podmin test
	// DIR with FILE as x_test.star), "repl" (FILE's lines on the REPL's
	// standard input) or "cli" (args only).
	mode   string
	script string
	// args are extra CLI invocations run before the script, VALUE
	// substituted; stdin is the standard input of each.
	pre   [][]string
	stdin string
	// wantErr is text the script's stderr must hold (the failure is
	// reported, only without the value); "" means the run succeeds.
	wantErr string
	// fileOnly cases rely on a file's literals being registered before it
	// runs; the REPL runs one input at a time, so a plain str printed
	// before the input that makes it a secret cannot be known (documented).
	fileOnly bool
}

// The value's prefix has a quote and HTML characters, so its JSON and
// Go-quoted forms differ from the raw value.
const leakPrefix = `Lk"<&>-`

var leakCases = []leakCase{
	{name: "fail concatenation", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nfail(\"boom \" + s)\n", wantErr: "a secret is opaque"},
	{name: "fail with the secret", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nfail(\"boom\", s)\n", wantErr: "boom <secret pw>"},
	{name: "fail with a str copy", mode: "run", script: "raw = \"VALUE\"\ns = podmin.secret(raw, key = \"pw\")\nfail(raw)\n", wantErr: "error in fail: fail: <secret pw>"},
	{name: "KeyError on the secret", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\n{}[s]\n", wantErr: "unhashable type: secret"},
	{name: "KeyError on a str copy", mode: "run", script: "raw = \"VALUE\"\npodmin.secret(raw, key = \"pw\")\n{\"a\": 1}[raw]\n", wantErr: "key \"<secret pw>\" not in dict"},
	{name: "string method", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nprint(s.upper())\n", wantErr: "secret has no .upper field or method"},
	{name: "slicing", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nprint(s[0:8])\n", wantErr: "invalid slice operand secret"},
	{name: "elems join", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nprint(\" \".join(s.elems()))\n", wantErr: "secret has no .elems field or method"},
	{name: "iteration", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nprint([c for c in s])\n", wantErr: "secret value is not iterable"},
	{name: "percent formatting", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nprint(\"v=%s %r\" % (s, s))\n"},
	{name: "str.format", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nprint(\"v={}\".format(s), str(s), repr(s))\n"},
	{name: "json.encode of the secret", mode: "run", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nprint(json.encode({\"v\": s}))\n", wantErr: "cannot encode secret as JSON"},
	{name: "json.encode of a str copy", mode: "run", script: "raw = \"VALUE\"\npodmin.secret(raw, key = \"pw\")\nprint(json.encode({\"v\": raw}))\n"},
	{name: "repr of a str copy", mode: "run", script: "raw = \"VALUE\"\npodmin.secret(raw, key = \"pw\")\nprint(repr(raw))\n"},
	{name: "base64 in output", mode: "run", script: "podmin.secret(\"VALUE\", key = \"pw\")\nprint(\"encoded: B64VALUE\")\n"},
	{name: "print before podmin.secret", mode: "run", script: "raw = \"VALUE\"\nprint(\"early\", raw)\ns = podmin.secret(raw, key = \"pw\")\n", fileOnly: true},
	{name: "print before secrets.create", mode: "run", script: "v = \"VALUE\"\nprint(v)\npodmin.secrets.create(\"api\", for_ = \"web\", value = v)\n", fileOnly: true},
	{name: "secrets.read then fail", mode: "run", pre: [][]string{{"secret", "create", "tok", "--for", "web", "--stdin"}}, stdin: "VALUE",
		script: "v = podmin.secrets.read(\"tok\", for_ = \"web\")\nprint(v)\nfail(\"got\", v, v == v)\n", wantErr: "got <secret tok> True"},
	{name: "secrets.read copies a secret", mode: "run", pre: [][]string{{"secret", "create", "tok", "--for", "web", "--stdin"}}, stdin: "VALUE",
		script: "v = podmin.secrets.read(\"tok\", for_ = \"web\")\nprint(podmin.secrets.create(\"tok\", for_ = \"api\", value = v))\n"},
	{name: "builtin error with the value", mode: "run", script: "raw = \"VALUE\"\npodmin.secret(raw, key = \"pw\")\npodmin.deployments.deploy(\"web\", nodegroup = \"workers\", image = raw)\n", wantErr: "error in podmin.deployments.deploy"},
	{name: "builtin file error with the value", mode: "run", script: "raw = \"VALUE\"\npodmin.secret(raw, key = \"pw\")\npodmin.manifests.validate(file = raw)\n", wantErr: "error in podmin.manifests.validate"},
	{name: "error in a loaded file", mode: "run", script: "load(\"./leaklib.star\", \"f\")\npodmin.secret(\"VALUE\", key = \"pw\")\nf(\"VALUE\")\n", wantErr: "leaklib.star:2"},
	{name: "main argument error", mode: "run", script: "def main(ctx, n = 1):\n    podmin.secret(\"VALUE\", key = \"pw\")\n    fail(\"VALUE\")\n", wantErr: "<secret pw>"},
	{name: "dry-run plan", mode: "dry-run", script: "v = \"VALUE\"\nprint(v)\npodmin.secrets.create(\"api\", for_ = \"web\", value = v)\n"},
	{name: "repl print and fail", mode: "repl", script: "s = podmin.secret(\"VALUE\", key = \"pw\")\nprint(s)\nfail(\"VALUE\")\ns + \"x\"\n{}[s]\n"},
	{name: "repl str copy then secret", mode: "repl", script: "raw = \"VALUE\"\ns = podmin.secret(raw, key = \"pw\")\nprint(raw)\nraw\n"},
	{name: "podmin test report", mode: "test", script: "def test_leak(t):\n    s = podmin.secret(\"VALUE\", key = \"pw\")\n    print(\"VALUE\")\n    fail(\"boom\", s, \"VALUE\")\n", wantErr: "boom <secret pw> <secret pw>"},
	{name: "secret create already exists", mode: "cli", pre: [][]string{{"secret", "create", "k", "--for", "web", "--stdin"}, {"secret", "create", "k", "--for", "web", "--stdin"}}, stdin: "VALUE"},
}

// randomValue is a fresh secret value for one case.
func randomValue(t *testing.T) string {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return leakPrefix + hex.EncodeToString(b)
}

// asTest turns a top-level script into a *_test.star file: load
// statements stay at the top, the rest becomes the body of test_leak(t).
func asTest(script string) string {
	var loads, body []string
	for _, l := range strings.Split(strings.TrimRight(script, "\n"), "\n") {
		if strings.HasPrefix(l, "load(") {
			loads = append(loads, l)
		} else {
			body = append(body, "    "+l)
		}
	}
	return strings.Join(append(loads, "def test_leak(t):"), "\n") + "\n" + strings.Join(body, "\n") + "\n"
}

// allModes runs every top-level "run" case also through podmin test and
// the REPL; those variants assert only that nothing leaks, since how each
// reports an error differs.
func allModes(cases []leakCase) []leakCase {
	var out []leakCase
	for _, tc := range cases {
		out = append(out, tc)
		if tc.mode != "run" || strings.Contains(tc.script, "def main") {
			continue
		}
		test, repl := tc, tc
		test.name, test.mode, test.script, test.wantErr = tc.name+" (podmin test)", "test-any", asTest(tc.script), ""
		repl.name, repl.mode, repl.wantErr = tc.name+" (repl)", "repl", ""
		out = append(out, test)
		if !tc.fileOnly {
			out = append(out, repl)
		}
	}
	return out
}

func TestLeaks(t *testing.T) {
	if len(leakCases) < 20 {
		t.Fatalf("%d leak cases, want at least 20", len(leakCases))
	}
	all := allModes(leakCases)
	t.Logf("%d leak attempts (TestFragmentLeaks adds the fragment cases)", len(all))
	for _, tc := range all {
		t.Run(tc.name, func(t *testing.T) {
			value := randomValue(t)
			subst := func(s string) string {
				s = strings.ReplaceAll(s, "B64VALUE", base64.StdEncoding.EncodeToString([]byte("x"+value+"yz")))
				return strings.ReplaceAll(s, "VALUE", strings.ReplaceAll(value, `"`, `\"`))
			}
			rawSubst := func(s string) string { return strings.ReplaceAll(s, "VALUE", value) }
			c := secretCLI(t)
			scripts := filepath.Join(c.root, "scripts")
			if err := os.MkdirAll(scripts, 0o755); err != nil {
				t.Fatal(err)
			}
			var outs []string
			for _, args := range tc.pre {
				c.stdin = rawSubst(tc.stdin)
				out, errs, _ := c.run(args...)
				outs = append(outs, out, errs)
			}
			c.stdin = ""
			write := func(name, content string) string {
				p := filepath.Join(scripts, name)
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			write("leaklib.star", "def f(v):\n    fail(\"in lib: \" + v)\n")
			var out, errs string
			var code int
			switch tc.mode {
			case "run":
				out, errs, code = c.run("run", write("leak.star", subst(tc.script)))
			case "dry-run":
				out, errs, code = c.run("run", "--dry-run", write("leak.star", subst(tc.script)))
			case "test", "test-any":
				write("leak_test.star", subst(tc.script))
				out, errs, code = c.run("test", scripts)
			case "repl":
				c.stdin = subst(tc.script)
				out, errs, code = c.run("repl")
			case "cli":
			}
			outs = append(outs, out, errs)
			if tc.wantErr != "" && !strings.Contains(out+errs, tc.wantErr) {
				t.Errorf("exit %d: output lacks %q:\nstdout: %s\nstderr: %s", code, tc.wantErr, out, errs)
			}
			if tc.wantErr == "" && (tc.mode == "run" || tc.mode == "dry-run") && code != 0 {
				t.Errorf("exit %d\nstdout: %s\nstderr: %s", code, out, errs)
			}
			files := writtenFiles(t, c.root, scripts, filepath.Join(c.root, "data", "podmin", "secrets"))
			for _, p := range leaks(value, outs, files) {
				t.Error(p)
			}
		})
	}
}

// writtenFiles reads every file below root that Podmin wrote: all but the
// test's own scripts and the local secrets store, whose files are the
// values by design.
func writtenFiles(t *testing.T, root string, skip ...string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		for _, s := range skip {
			if p == s {
				return filepath.SkipDir
			}
		}
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			files[p] = string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// leaks lists where the value or any encoding of it appears in an output
// or a file.
func leaks(value string, outs []string, files map[string]string) []string {
	var found []string
	forms := scrub.Encodings([]byte(value))
	for i, o := range outs {
		for _, f := range forms {
			if strings.Contains(o, f) {
				found = append(found, fmt.Sprintf("output %d holds the value (as %q):\n%s", i, f, o))
			}
		}
	}
	for p, content := range files {
		for _, f := range forms {
			if strings.Contains(content, f) {
				found = append(found, fmt.Sprintf("file %s holds the value (as %q)", p, f))
			}
		}
	}
	return found
}

// TestLeakCheckerSeesLeaks proves the checker is not vacuous: a value
// Podmin was never told is secret appears in the output and is reported,
// as are its base64 and JSON forms in a file.
func TestLeakCheckerSeesLeaks(t *testing.T) {
	c := newCLI(t)
	value := randomValue(t)
	out, _, _ := c.run("run", c.script("plain.star", fmt.Sprintf("print(%q)\n", value)))
	if len(leaks(value, []string{out}, nil)) == 0 {
		t.Fatalf("an unregistered value in the output went unnoticed: %q", out)
	}
	b64 := base64.StdEncoding.EncodeToString([]byte("ab" + value))
	if len(leaks(value, nil, map[string]string{"f": "x" + b64})) == 0 {
		t.Fatalf("a base64 form in a file went unnoticed")
	}
}

// TestREPLHistoryFile checks the history file's mode, including a file an
// older Podmin left world-readable, and that inputs without secrets stay.
func TestREPLHistoryFile(t *testing.T) {
	c := newCLI(t)
	hist := filepath.Join(c.root, "data", "podmin", replHistoryFile)
	if err := os.MkdirAll(filepath.Dir(hist), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hist, []byte("old = 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	value := randomValue(t)
	c.stdin = fmt.Sprintf("x = 1 + 2\nkept = %q\ns = podmin.secret(%q, key = \"pw\")\nprint(s)\n", "ordinary text", value)
	if out, errs, code := c.run("repl"); code != 0 || out != "<secret pw>\n" {
		t.Fatalf("repl: exit %d\n%s%s", code, out, errs)
	}
	st, err := os.Stat(hist)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("history mode %v, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(hist)
	if got, want := string(b), "old = 1\nx = 1 + 2\nkept = \"ordinary text\"\nprint(s)\n"; got != want {
		t.Errorf("history:\n%s\nwant:\n%s", got, want)
	}
}
