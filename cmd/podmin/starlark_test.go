// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"podmin.dev/podmin/builtins"
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
	c.fails(5, "error in fail: fail: boom", "run", filepath.Join(c.root, "bad.star"))
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
	r := startREPL(t, dir, "dumb", nil)
	r.out.waitFor(t, ">>> ")
	r.send(t, "def f(n):\r")
	r.out.waitFor(t, "... ")
	r.send(t, "    return n + 40\r\r")
	r.send(t, "f(2)\r")
	r.out.waitFor(t, "42")
	// Ctrl-D ends the session only at a fresh prompt: wait for the one
	// after the result, or the byte can reach the terminal mid-redraw.
	r.out.waitForAfter(t, "42", ">>> ")
	r.quit(t)
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

// TestREPLConfirmsWithTheClusterID: on a terminal the REPL asks for the
// cluster ID like the CLI does; "y" is not an answer, the ID is, and a
// confirm = naming another cluster refuses without asking.
func TestREPLConfirmsWithTheClusterID(t *testing.T) {
	dir := t.TempDir()
	c := newCLI(t)
	c.root = dir
	for k, v := range map[string]string{"config": "XDG_CONFIG_HOME", "data": "XDG_DATA_HOME", "cache": "XDG_CACHE_HOME", "run": "XDG_RUNTIME_DIR"} {
		c.env[v] = filepath.Join(dir, k)
	}
	c.ok("connect", "demo", "--provider", "local", "--bucket", "demo-bucket")
	c.ok("deploy", "web", "-g", "workers", "--image", "hello:v1")
	c.ok("deploy", "api", "-g", "workers", "--image", "hello:v1")
	r := startREPL(t, dir, "dumb", nil)
	send := func(s string) { t.Helper(); r.send(t, s+"\r") }
	out := r.out
	out.waitFor(t, ">>> ")
	send(`podmin.deployments.delete("web", nodegroup = "workers")`)
	out.waitFor(t, `podmin.deployments.delete("web") is destructive. Type the cluster ID (demo) to confirm: `)
	send("y")
	out.waitFor(t, `you typed "y", not the cluster ID "demo"; nothing was changed`)
	out.waitForAfter(t, "nothing was changed", ">>> ")
	send(`podmin.deployments.delete("api", nodegroup = "workers", confirm = "prod")`)
	out.waitFor(t, `confirm = "prod" does not match the cluster "demo"`)
	out.waitForAfter(t, `does not match the cluster "demo"`, ">>> ")
	send(`podmin.deployments.delete("web", nodegroup = "workers").action`)
	out.waitForAfter(t, "nothing was changed", "Type the cluster ID (demo) to confirm: ")
	send("demo")
	out.waitFor(t, `"deleted"`)
	out.waitForAfter(t, `"deleted"`, ">>> ")
	r.quit(t)
	if list := c.ok("list"); strings.Contains(list, "web") || !strings.Contains(list, "api") {
		t.Errorf("after the session:\n%s", list)
	}
	got := r.output()
	start := strings.Index(got, `confirm = "prod")`)
	end := strings.Index(got, `does not match the cluster "demo"`)
	if start < 0 || end < start || strings.Contains(got[start:end], "Type the cluster ID") {
		t.Errorf("the mismatched confirm = asked for the cluster ID:\n%s", got)
	}
}

// dryRunDeploy3 is the recipe of BenchmarkRunDryRunVsVersion: three
// deployments, two with a Service, and a list.
const dryRunDeploy3 = `def main(ctx, image = "hello:v1"):
    for app in ["web", "api", "worker"]:
        podmin.deployments.deploy(app, nodegroup = "workers", image = image, service = app != "worker")
    print(len(podmin.deployments.list()))
`

// BenchmarkRunDryRunVsVersion measures whole podmin processes: "podmin
// run --dry-run" of a three-deployment recipe against "podmin version",
// interleaved so both see the same machine load, at least 30 pairs per
// op. It reports the medians of wall time and of CPU time (user +
// system) of each, and their ratio:
//
//	go test ./cmd/podmin -run '^$' -bench RunDryRunVsVersion -benchtime 1x
func BenchmarkRunDryRunVsVersion(b *testing.B) {
	bin, err := buildPodmin()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	env := xdgEnv(dir)
	connect := exec.Command(bin, "connect", "demo", "--provider", "local", "--bucket", "demo")
	connect.Env, connect.Dir = env, dir
	if out, err := connect.CombinedOutput(); err != nil {
		b.Fatalf("%v\n%s", err, out)
	}
	recipe := filepath.Join(dir, "deploy3.star")
	if err := os.WriteFile(recipe, []byte(dryRunDeploy3), 0o644); err != nil {
		b.Fatal(err)
	}
	type sample struct{ wall, cpu time.Duration }
	run := func(args ...string) sample {
		cmd := exec.Command(bin, args...)
		cmd.Env, cmd.Dir = env, dir
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("podmin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return sample{time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	}
	median := func(s []sample, f func(sample) time.Duration) time.Duration {
		v := make([]time.Duration, len(s))
		for i, x := range s {
			v[i] = f(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	var version, dryRun []sample
	run("run", "--dry-run", recipe) // warm the page cache
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for range 30 {
			version = append(version, run("version"))
			dryRun = append(dryRun, run("run", "--dry-run", recipe))
		}
	}
	b.StopTimer()
	wall := func(s sample) time.Duration { return s.wall }
	cpu := func(s sample) time.Duration { return s.cpu }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(median(dryRun, wall)), "dryrun-wall-ms")
	b.ReportMetric(ms(median(version, wall)), "version-wall-ms")
	b.ReportMetric(ms(median(dryRun, cpu)), "dryrun-cpu-ms")
	b.ReportMetric(ms(median(version, cpu)), "version-cpu-ms")
	b.ReportMetric(float64(median(dryRun, wall))/float64(median(version, wall)), "wall-ratio")
	b.ReportMetric(float64(median(dryRun, cpu))/float64(median(version, cpu)), "cpu-ratio")
}

// TestDocumentedTestRunExamplesMatch runs the "podmin test -run" examples
// of the README and of "podmin test --help" on the repository's recipes:
// each must select and pass at least one test (a pattern matching nothing
// is an error, exit 3).
func TestDocumentedTestRunExamplesMatch(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	help := newTestCmd(&builtins.Env{}).Example
	exampleRE := regexp.MustCompile(`podmin test -run (\S+) -v (recipes/\S*)`)
	var found [][]string
	for _, src := range []string{string(readme), help} {
		found = append(found, exampleRE.FindAllStringSubmatch(src, -1)...)
	}
	if len(found) < 2 {
		t.Fatalf("found %d -run examples, want the README's and the help's", len(found))
	}
	c := newCLI(t)
	for _, m := range found {
		pattern := strings.Trim(m[1], `'"`)
		out, errs, code := c.run("test", "-run", pattern, "-v", filepath.Join("../..", m[2]))
		if code != 0 || strings.Contains(out, "0 passed") || !strings.Contains(out, "--- PASS") {
			t.Errorf("podmin test -run %s -v %s: exit %d\n%s%s", m[1], m[2], code, out, errs)
		}
	}
	out, errs, code := c.run("test", "-run", "no_such_test", "../../recipes/")
	if code != exitNotFound || !strings.Contains(errs, "the tests are test_find_and_report, ") {
		t.Errorf("-run matching nothing: exit %d\n%s%s", code, out, errs)
	}
}

// TestREPLTabListsCandidatesOnce: Tab completes what the candidates share;
// the next Tab lists them once above the prompt, however the terminal
// handles cursor movement.
func TestREPLTabListsCandidatesOnce(t *testing.T) {
	dir := t.TempDir()
	r := startREPL(t, dir, "xterm", &pty.Winsize{Rows: 24, Cols: 100})
	r.out.waitFor(t, ">>> ")
	r.send(t, "podmin.de\t")
	r.out.waitFor(t, ">>> podmin.dep")
	r.send(t, "\t")
	r.out.waitFor(t, "deployments  deps")
	r.send(t, "loyments.del\t")
	r.out.waitFor(t, ">>> podmin.deployments.delete")
	r.send(t, "\r")
	r.out.waitForAfter(t, "<built-in function podmin.deployments.delete>", ">>> ")
	r.quit(t)
	if n := strings.Count(r.output(), "deployments  deps"); n != 1 {
		t.Errorf("the candidates were printed %d times, want once:\n%q", n, r.output())
	}
}

// ptyREPL is "podmin repl" running on a pseudo-terminal of the given size
// with its state below dir.
type ptyREPL struct {
	cmd *exec.Cmd
	tty *os.File
	out *syncBuffer
	// lineMode: TERM names a terminal the editor does not drive (dumb),
	// so it reads plain lines in the terminal's own mode.
	lineMode bool
}

// startREPL starts the REPL on a pseudo-terminal; the test is skipped
// where there is none.
func startREPL(t *testing.T, dir, term string, size *pty.Winsize) *ptyREPL {
	t.Helper()
	cmd := exec.Command(os.Args[0], "repl")
	cmd.Env = append(xdgEnv(dir), "PODMIN_TEST_RUN_MAIN=1", "TERM="+term)
	cmd.Dir = dir
	tty, err := pty.StartWithSize(cmd, size)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { _ = tty.Close() })
	r := &ptyREPL{cmd: cmd, tty: tty, out: &syncBuffer{more: make(chan struct{}, 1)}, lineMode: term == "dumb"}
	go func() { _, _ = io.Copy(r.out, tty) }()
	return r
}

// send types s on the terminal once the line editor reads it. The editor
// prints its prompt before it takes the terminal's signal keys for itself,
// so a Ctrl-C typed within that moment would reach the process as SIGINT
// and discard what was typed before it: a person cannot type that fast, a
// test can, so it waits for the editor's terminal mode (ISIG off) unless
// the editor reads plain lines.
func (r *ptyREPL) send(t *testing.T, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !r.lineMode && !r.editing(t) {
		if time.Now().After(deadline) {
			t.Fatalf("the line editor did not take the terminal within 20s:\n%s", r.output())
		}
		time.Sleep(time.Millisecond)
	}
	r.interrupt(t, s)
}

// interrupt types s at once, whoever reads the terminal: Ctrl-C while a
// call runs is the terminal's SIGINT.
func (r *ptyREPL) interrupt(t *testing.T, s string) {
	t.Helper()
	if _, err := r.tty.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// editing reports whether the terminal is in the line editor's mode, which
// reads Ctrl-C as a key. On Linux the pseudo-terminal's master answers
// with its slave's settings.
func (r *ptyREPL) editing(t *testing.T) bool {
	t.Helper()
	raw, err := r.tty.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var tio *unix.Termios
	var terr error
	if err := raw.Control(func(fd uintptr) { tio, terr = unix.IoctlGetTermios(int(fd), unix.TCGETS) }); err != nil {
		t.Fatal(err)
	}
	if terr != nil {
		t.Fatalf("read the terminal's settings: %v", terr)
	}
	return tio.Lflag&unix.ISIG == 0
}

// quit types Ctrl-D, which must end the session with status 0. Call it
// at a fresh prompt: a byte that reaches the terminal mid-redraw is lost.
func (r *ptyREPL) quit(t *testing.T) {
	t.Helper()
	r.send(t, "\x04")
	if err := waitExit(r.cmd, 20*time.Second); err != nil {
		t.Fatalf("repl after Ctrl-D: %v", err)
	}
}

// output is everything the terminal showed.
func (r *ptyREPL) output() string {
	r.out.mu.Lock()
	defer r.out.mu.Unlock()
	return r.out.buf.String()
}

// waitExit waits for cmd to exit, at most d, and kills it after that.
func waitExit(cmd *exec.Cmd, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		return fmt.Errorf("%s did not exit within %s", strings.Join(cmd.Args, " "), d)
	}
}
