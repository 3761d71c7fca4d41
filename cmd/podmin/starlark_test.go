// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

func (c *cli) script(name, content string) string {
	c.t.Helper()
	p := filepath.Join(c.root, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		c.t.Fatal(err)
	}
	return p
}

func TestRunExitCodes(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	ok := c.script("ok.star", "def main(ctx, n = 1):\n    print(\"n =\", n * 2, ctx.context.cluster)\n")
	if out := c.ok("run", ok, "--", "--n=21"); out != "n = 42 demo\n" {
		t.Fatalf("stdout %q", out)
	}
	c.fails(5, "bad.star:2:9: in main", "run", c.script("bad.star", "def main(ctx):\n    fail(\"boom\")\n"))
	c.fails(5, "Error in fail: fail: boom", "run", filepath.Join(c.root, "bad.star"))
	c.fails(5, "syntax.star:1:", "run", c.script("syntax.star", "def (\n"))
	c.fails(2, "--n: want an integer", "run", ok, "--", "--n=x")
	c.fails(2, "unknown flag: --n", "run", ok, "--n=1")
	c.fails(2, `pass the script's arguments after "--"`, "run", ok, "extra")
	c.fails(3, "no such file or directory", "run", filepath.Join(c.root, "missing.star"))
	if out := c.ok("run", ok, "--", "--help"); !strings.Contains(out, "--n                      int (default 1)") {
		t.Fatalf("help: %s", out)
	}
}

func TestRunDryRunJSON(t *testing.T) {
	c := newCLI(t)
	c.connectLocal()
	script := c.script("d.star", `print("hello from the script")
podmin.deployments.deploy("web", nodegroup = "workers", image = "hello:v1")
`)
	before := c.snapshot()
	out, errs, code := c.run("run", "--dry-run", "-o", "json", script)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errs)
	}
	c.unchanged(before)
	if !strings.Contains(errs, "hello from the script") || strings.Contains(out, "hello from") {
		t.Fatalf("print() must go to stderr under -o json:\nstdout: %s\nstderr: %s", out, errs)
	}
	var plan struct {
		DryRun bool `json:"dryRun"`
		Steps  []struct {
			Call    string
			Changes []struct{ Kind, Target, Action string }
		}
	}
	if err := json.Unmarshal([]byte(out), &plan); err != nil || !plan.DryRun || len(plan.Steps) != 1 || plan.Steps[0].Call != `podmin.deployments.deploy("web")` {
		t.Fatalf("plan %v: %s", err, out)
	}
	var targets []string
	for _, ch := range plan.Steps[0].Changes {
		targets = append(targets, ch.Action+" "+ch.Target)
	}
	// The payload, the index, and the NodeGroup's view derived from it.
	if len(targets) != 3 || !strings.HasPrefix(targets[0], "created nodegroups/workers/pods/sha512/") || targets[1] != "created deployments/index.json" ||
		targets[2] != "created deployments/nodegroups/workers.json" {
		t.Fatalf("changes %q", targets)
	}
}

// TestRunDryRunQuickstartFreshMachine runs the quick start recipe with no
// context at all: the connect happens in the overlay and the whole plan is
// printed, and the machine is left as it was.
func TestRunDryRunQuickstartFreshMachine(t *testing.T) {
	c := newCLI(t)
	recipe, err := filepath.Abs(filepath.Join("..", "..", "recipes", "quickstart.star"))
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(c.root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(work)
	before := c.snapshot()
	out := c.ok("run", "--dry-run", recipe)
	c.unchanged(before)
	for _, want := range []string{
		"connected to cluster demo", "workers/web created in bucket demo",
		`podmin.contexts.connect("demo")`, "created   bucket demo",
		`podmin.manifests.init("web")`, "created   file " + filepath.Join(work, "web.yaml"),
		`podmin.deployments.deploy("web")`, "created   object deployments/index.json",
		"+ workers/web.service: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestTestCommand(t *testing.T) {
	c := newCLI(t)
	dir := filepath.Join(c.root, "suite")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "a_test.star"), []byte(`
def test_ok(t):
    t.assert.eq(podmin.contexts.current().cluster, "test")
    t.assert.eq(time.now().year, 2026)
    print("checked")

def test_bad(t):
    t.assert.eq(1, 2)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := c.run("test", dir)
	if code != 5 || !strings.Contains(out, "--- PASS: "+filepath.Join(dir, "a_test.star")+": test_ok") ||
		!strings.Contains(out, "a_test.star:8:16: in test_bad") || !strings.Contains(out, "t.assert.eq: got 1, want 2") ||
		!strings.HasSuffix(out, "\n1 passed, 1 failed\n") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
	// Go's spelling of the flags: -run selects, -v shows a passing test's output.
	for _, args := range [][]string{{"test", "-run", "_ok$", "-v", dir}, {"test", "--run=_ok$", "--verbose", dir}} {
		out, errs, code = c.run(args...)
		if code != 0 || !strings.Contains(out, "test_ok") || strings.Contains(out, "test_bad") || !strings.Contains(out, "    checked\n") {
			t.Fatalf("%q: exit %d\nstdout:\n%s\nstderr:\n%s", args, code, out, errs)
		}
	}
	if out, _, _ := c.run("test", "-run", "_ok$", dir); strings.Contains(out, "checked") {
		t.Fatalf("output of a passing test printed without -v:\n%s", out)
	}
	c.fails(2, "-run: error parsing regexp", "test", "-run", "(", dir)
}

// buildPodmin builds the podmin binary once per test binary run.
var buildPodmin = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "podmin-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "podmin")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", &exec.Error{Name: string(out), Err: err}
	}
	return bin, nil
})

// xdgEnv is a process environment with fresh Podmin directories below dir.
func xdgEnv(dir string) []string {
	return append(os.Environ(), "XDG_CONFIG_HOME="+dir+"/config", "XDG_DATA_HOME="+dir+"/data",
		"XDG_CACHE_HOME="+dir+"/cache", "XDG_RUNTIME_DIR="+dir+"/run")
}

func TestQuickstartRecipeProcess(t *testing.T) {
	dir := t.TempDir()
	recipe, _ := filepath.Abs("../../recipes/quickstart.star")
	cmd := exec.Command(os.Args[0], "run", recipe)
	cmd.Env = append(xdgEnv(dir), "PODMIN_TEST_RUN_MAIN=1")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, w := range []string{"connected to cluster demo", "workers/web created", "workers    web   default    default/web"} {
		if !strings.Contains(string(out), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// syncBuffer collects a pty's output and signals each write.
type syncBuffer struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	more chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(p)
	select {
	case s.more <- struct{}{}:
	default:
	}
	return len(p), nil
}

// waitFor blocks until the output contains want or the deadline passes.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		got := s.buf.String()
		s.mu.Unlock()
		if strings.Contains(got, want) {
			return
		}
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("no %q in the terminal output:\n%s", want, got)
		}
	}
}

// waitForAfter waits until want appears after the first anchor.
func (s *syncBuffer) waitForAfter(t *testing.T, anchor, want string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		s.mu.Lock()
		got := s.buf.String()
		s.mu.Unlock()
		if i := strings.Index(got, anchor); i >= 0 && strings.Contains(got[i+len(anchor):], want) {
			return
		}
		select {
		case <-s.more:
		case <-deadline:
			t.Fatalf("no %q after %q in the terminal output:\n%s", want, anchor, got)
		}
	}
}

func TestREPLInPseudoTerminal(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "repl")
	cmd.Env = append(xdgEnv(dir), "PODMIN_TEST_RUN_MAIN=1", "TERM=dumb")
	cmd.Dir = dir
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer tty.Close()
	out := &syncBuffer{more: make(chan struct{}, 1)}
	go func() { _, _ = io.Copy(out, tty) }()

	out.waitFor(t, ">>> ")
	if _, err := tty.Write([]byte("def f(n):\r")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "... ")
	if _, err := tty.Write([]byte("    return n + 40\r\r")); err != nil {
		t.Fatal(err)
	}
	if _, err := tty.Write([]byte("f(2)\r")); err != nil {
		t.Fatal(err)
	}
	out.waitFor(t, "42")
	// Ctrl-D ends the session only at a fresh prompt: wait for the one
	// after the result, or the byte can reach the terminal mid-redraw.
	out.waitForAfter(t, "42", ">>> ")
	if _, err := tty.Write([]byte{4}); err != nil { // Ctrl-D
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("repl exited with %v", err)
		}
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("repl did not exit on Ctrl-D")
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "podmin", "repl_history")); err != nil {
		t.Errorf("no history file: %v", err)
	}
}

func benchmarkRun(b *testing.B, script string, fresh bool) {
	bin, err := buildPodmin()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		work := dir
		if fresh {
			b.StopTimer()
			work = b.TempDir()
			b.StartTimer()
		}
		cmd := exec.Command(bin, "run", script)
		cmd.Env, cmd.Dir = xdgEnv(work), work
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
	}
}

// BenchmarkRunPrintOnly measures a whole podmin run process of a recipe
// that only prints: process start, host setup, one file.
func BenchmarkRunPrintOnly(b *testing.B) {
	p := filepath.Join(b.TempDir(), "print.star")
	if err := os.WriteFile(p, []byte("print(\"hello\")\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	benchmarkRun(b, p, false)
}

// BenchmarkRunQuickstart measures podmin run recipes/quickstart.star on a
// fresh local provider: connect, init, validate, deploy, list.
func BenchmarkRunQuickstart(b *testing.B) {
	recipe, _ := filepath.Abs("../../recipes/quickstart.star")
	benchmarkRun(b, recipe, true)
}
