// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/cloud"
	"podmin.dev/podmin/internal/cloud/local"
	"podmin.dev/podmin/internal/contexts"
	localstore "podmin.dev/podmin/internal/objstore/local"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/scrub"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
)

// TestClock is time.now() when a recipe test begins; it moves on only
// with the test's virtual clock (the pauses of waits).
var TestClock = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// TestCluster is the cluster every recipe test starts connected to.
const TestCluster = "test"

// TestOptions configure RunTests.
type TestOptions struct {
	// Paths are files or directories; directories are searched for
	// *_test.star. Empty means ".".
	Paths []string
	// Stdout receives one line per test, test output and the summary.
	Stdout io.Writer
	// CacheDir is where @name repositories are fetched.
	CacheDir string
	// TempDir makes each test's state directory; nil uses os.MkdirTemp
	// and removes it afterwards.
	TempDir func() (string, error)
	// Run, when set, runs only the test functions whose name matches.
	Run *regexp.Regexp
	// Verbose prints the output of passing tests too; a failing test's
	// output is always printed.
	Verbose bool
}

// TestSummary counts the tests RunTests ran.
type TestSummary struct {
	Passed, Failed int
}

// FindTests returns the *_test.star files below paths, sorted.
func FindTests(paths []string) ([]string, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var files []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%s does not exist: pass a *_test.star file or a directory holding some: %w", p, err)
			}
			return nil, err
		}
		if !st.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != p && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if !d.IsDir() && strings.HasSuffix(d.Name(), "_test.star") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}

// RunTests runs every test_*(t) function of the test files, each in a
// sandbox of its own (see newSandbox) with a fixed clock, and reports like
// go test: one line per test, then "N passed, N failed".
func RunTests(ctx context.Context, opts TestOptions) (TestSummary, error) {
	var sum TestSummary
	files, err := FindTests(opts.Paths)
	if err != nil {
		return sum, err
	}
	if len(files) == 0 {
		return sum, fmt.Errorf("%w: no *_test.star files in %s", ErrNoTests, strings.Join(orDot(opts.Paths), ", "))
	}
	out := opts.Stdout
	if out == nil {
		out = io.Discard
	}
	var names []string
	for _, file := range files {
		if err := runTestFile(ctx, opts, out, file, &sum, &names); err != nil {
			return sum, err
		}
	}
	fmt.Fprintf(out, "%d passed, %d failed\n", sum.Passed, sum.Failed)
	if sum.Passed+sum.Failed == 0 && opts.Run != nil {
		sort.Strings(names)
		return sum, fmt.Errorf("%w: no test matches -run %s in %d file(s); the tests are %s", ErrNoTests, scrub.Quote(opts.Run.String()), len(files), strings.Join(names, ", "))
	}
	return sum, nil
}

// ErrNoTests reports that podmin test found no test to run: no test file,
// or no test function matching -run. The CLI exits 3 on it.
var ErrNoTests = errors.New("no tests to run")

func orDot(paths []string) []string {
	if len(paths) == 0 {
		return []string{"."}
	}
	return paths
}

// sandbox is one test's own Podmin: a local bucket connected as cluster
// "test", its own contexts, local secrets store and scratch directory
// (every file the test writes lands below it), and no network except the
// fakes the test starts.
type sandbox struct {
	host     *Host
	dir      string
	net      *netGuard
	nodes    *fakeNodes
	cleanups []func()
	done     func()
}

// testDir is the directory of the test file, which the test may read; ""
// allows no reads outside the sandbox.
func newSandbox(ctx context.Context, opts TestOptions, testDir string, out io.Writer) (*sandbox, error) {
	mk := opts.TempDir
	cleanup := func(string) {}
	if mk == nil {
		mk = func() (string, error) { return os.MkdirTemp("", "podmin-test-") }
		cleanup = func(d string) { _ = os.RemoveAll(d) }
	}
	dir, err := mk()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, err
	}
	dirs := paths.Dirs{Config: filepath.Join(dir, "config"), Cache: filepath.Join(dir, "cache"),
		Data: filepath.Join(dir, "data"), Runtime: filepath.Join(dir, "run")}
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, err
	}
	sb := &sandbox{dir: dir, net: &netGuard{}, nodes: newFakeNodes(localstore.Open(filepath.Join(dir, "bucket")), TestClock)}
	jail := newJailFiles(dir, work, testDir)
	env := &builtins.Env{
		Now: sb.nodes.Now, Sleep: sb.nodes.Sleep,
		Dirs: dirs, Providers: map[string]cloud.Provider{"local": jailProvider{Provider: local.New(dirs.Data), jail: jail}}, WorkDir: work,
		Secrets:   sandboxSecrets(filepath.Join(dirs.Data, "secrets")),
		Files:     jail,
		Transport: sb.net,
	}
	if _, err := env.Connect(ctx, builtins.ConnectOptions{Cluster: TestCluster, Provider: "local", Bucket: filepath.Join(dir, "bucket")}); err != nil {
		cleanup(dir)
		return nil, fmt.Errorf("connect the test cluster: %w", err)
	}
	cache := opts.CacheDir
	if cache == "" {
		cache = dirs.Cache
	}
	// time.now() is the test's virtual clock: it starts at TestClock and
	// moves only with the pauses of waits.
	sb.host = New(Options{Ops: env, Stdout: out, Stderr: out, Now: sb.nodes.Now, CacheDir: cache, WorkDir: work})
	if testDir != "" {
		// Loads, like reads, stay in the test's project: its recipe root.
		root, err := sb.host.loader.root(testDir)
		if err != nil {
			root = testDir
		}
		sb.host.loader.confine = root
	}
	sb.done = func() {
		for i := len(sb.cleanups) - 1; i >= 0; i-- {
			sb.cleanups[i]()
		}
		_ = sb.host.Close()
		cleanup(dir)
	}
	return sb, nil
}

// sandboxSecrets opens the sandbox's own local secrets store; the cloud
// secrets providers need the network and are refused.
func sandboxSecrets(dir string) func(context.Context, contexts.Context, string) (secrets.Store, error) {
	return func(_ context.Context, _ contexts.Context, provider string) (secrets.Store, error) {
		if provider != secrets.Local {
			return nil, fmt.Errorf("%w: podmin test has no network, so the %s secrets provider is not available: use the test cluster's default (local) provider", errNetworkDenied, provider)
		}
		return localsecrets.New(dir), nil
	}
}

// runTestFile runs the tests of file and adds every test function's name
// to all, matching or not.
func runTestFile(ctx context.Context, opts TestOptions, out io.Writer, file string, sum *TestSummary, all *[]string) error {
	// The file and its loads run once, in a sandbox of their own; each test
	// function then runs on a fresh sandbox's thread.
	var loadOut bytes.Buffer
	testDir, err := filepath.Abs(filepath.Dir(file))
	if err != nil {
		return err
	}
	sb, err := newSandbox(ctx, opts, testDir, &loadOut)
	if err != nil {
		return err
	}
	defer sb.done()
	thread, release := sb.host.NewThread(ctx, "load "+file)
	globals, err := sb.host.ExecFile(thread, file)
	release()
	if err != nil {
		sum.Failed++
		fmt.Fprintf(out, "--- FAIL: %s (load)\n%s%s\n", file, indentOutput(loadOut.String()), indent((&ScriptError{err}).Error()))
		return nil
	}
	if opts.Verbose {
		_, _ = io.WriteString(out, loadOut.String())
	}
	var names []string
	for n, v := range globals {
		if _, ok := v.(star.Callable); ok && strings.HasPrefix(n, "test_") {
			*all = append(*all, n)
			if opts.Run == nil || opts.Run.MatchString(n) {
				names = append(names, n)
			}
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if err := runOneTest(ctx, opts, out, file, testDir, n, globals[n].(star.Callable), sum); err != nil {
			return err
		}
	}
	return nil
}

func runOneTest(ctx context.Context, opts TestOptions, out io.Writer, file, testDir, name string, fn star.Callable, sum *TestSummary) error {
	var output bytes.Buffer
	sb, err := newSandbox(ctx, opts, testDir, &output)
	if err != nil {
		return err
	}
	defer sb.done()
	start := time.Now()
	thread, release := sb.host.NewThread(ctx, name)
	defer release()
	_, err = star.Call(thread, fn, star.Tuple{newTestT(name, sb)}, nil)
	elapsed := time.Since(start).Seconds()
	if err != nil {
		sum.Failed++
		fmt.Fprintf(out, "--- FAIL: %s: %s (%.2fs)\n%s%s\n", file, name, elapsed, indentOutput(output.String()), indent((&ScriptError{err}).Error()))
		return nil
	}
	sum.Passed++
	fmt.Fprintf(out, "--- PASS: %s: %s (%.2fs)\n", file, name, elapsed)
	if opts.Verbose {
		_, _ = io.WriteString(out, indentOutput(output.String()))
	}
	return nil
}

// indentOutput indents a test's output under its result line.
func indentOutput(s string) string {
	if s == "" {
		return ""
	}
	return indent(s) + "\n"
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ")
}

// errTestsFailed is returned (wrapped in ScriptError) when tests failed.
var errTestsFailed = errors.New("tests failed")

// TestsFailed returns the error the CLI reports when sum has failures.
func TestsFailed(sum TestSummary) error {
	if sum.Failed == 0 {
		return nil
	}
	return &ScriptError{fmt.Errorf("%w: %d of %d", errTestsFailed, sum.Failed, sum.Failed+sum.Passed)}
}
