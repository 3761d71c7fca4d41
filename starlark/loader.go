// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	star "go.starlark.net/starlark"
)

// loader implements load() for one Host: relative paths (relative to the
// loading file), //path from the recipe root, and @name//path from a
// shared recipe repository pinned in podmin.star.lock. Every file is
// executed once; its frozen globals are cached. A file that loads itself,
// directly or not, is a cycle error that lists each step with file:line.
// It is used by one goroutine at a time.
type loader struct {
	h     *Host
	cache map[string]*loadEntry // absolute path → module
	stack []loadStep            // files being executed, outermost first
	names map[string]string     // display name → absolute path
	repos map[string]string     // fetched repository directory → @name
	pins  map[string]pinned     // repository directory → its lock entry
	// proven holds the git copies proven to be their commit in this
	// loader, with the digests of their .star files.
	proven map[string]map[string]string
	// confine, when set (podmin test), is the only directory files may be
	// loaded from besides the pinned repositories: the test's recipe root.
	confine string
}

type loadEntry struct {
	globals star.StringDict
	err     error
	done    bool
}

// loadStep is one file being executed and the load statement that asked
// for it ("" for the entry file).
type loadStep struct {
	abs  string
	from string // "file:line" of the load statement
}

func newLoader(h *Host) *loader {
	return &loader{h: h, cache: map[string]*loadEntry{}, names: map[string]string{}, repos: map[string]string{}, pins: map[string]pinned{}, proven: map[string]map[string]string{}}
}

// display is how a file appears in backtraces: relative to the working
// directory when it is below it.
func (l *loader) display(abs string) string {
	name := abs
	if wd, err := os.Getwd(); err == nil {
		name = displayName(wd, abs)
	}
	l.names[name] = abs
	return name
}

// displayName is abs relative to wd when it is below wd, else abs. Below
// a working directory that is the root of the file system every path
// is, and its relative form would read as an absolute path without its
// leading separator: there abs stays absolute.
func displayName(wd, abs string) string {
	if filepath.Dir(wd) == wd {
		return abs
	}
	rel, err := filepath.Rel(wd, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return abs
	}
	return rel
}

// absOf maps a position's file name back to the absolute path.
func (l *loader) absOf(name string) string {
	if abs, ok := l.names[name]; ok {
		return abs
	}
	if strings.HasPrefix(name, "<") { // <stdin>, <expr>: the working directory
		wd, _ := os.Getwd()
		return filepath.Join(wd, name)
	}
	abs, _ := filepath.Abs(name)
	return abs
}

// ExecFile executes a file as an entry point (podmin run, podmin test,
// podmin repl FILE) and returns its frozen globals.
func (h *Host) ExecFile(thread *star.Thread, file string) (star.StringDict, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	return h.loader.exec(thread, abs, "")
}

// load is the thread's Load function.
func (l *loader) load(thread *star.Thread, module string) (star.StringDict, error) {
	pos := thread.CallFrame(0).Pos
	from := fmt.Sprintf("%s:%d", pos.Filename(), pos.Line)
	abs, err := l.resolve(l.absOf(pos.Filename()), module)
	if err != nil {
		return nil, err
	}
	if err := l.confined(abs, module); err != nil {
		return nil, err
	}
	return l.exec(thread, abs, from)
}

// exec runs abs once and caches the result. A Host's threads run one at a
// time, so the load graph is walked by one goroutine.
func (l *loader) exec(parent *star.Thread, abs, from string) (star.StringDict, error) {
	if e, ok := l.cache[abs]; ok {
		if !e.done {
			return nil, l.cycle(abs, from)
		}
		return e.globals, e.err
	}
	e := &loadEntry{}
	l.cache[abs] = e
	l.stack = append(l.stack, loadStep{abs: abs, from: from})
	defer func() { l.stack = l.stack[:len(l.stack)-1] }()

	src, err := os.ReadFile(abs)
	if err != nil {
		e.err, e.done = fmt.Errorf("read %s: %w", abs, err), true
		return nil, e.err
	}
	// The bytes that run are the bytes verified: no second read.
	for dir, p := range l.pins {
		if abs == dir || strings.HasPrefix(abs, dir+string(filepath.Separator)) {
			if err := p.verify(dir, abs, src); err != nil {
				e.err, e.done = err, true
				return nil, err
			}
		}
	}
	thread := parent
	if from != "" {
		var release func()
		thread, release = l.h.NewThread(threadContext(parent), "load "+abs)
		defer release()
	}
	name := l.display(abs)
	if f, perr := FileOptions().Parse(name, src, 0); perr == nil {
		l.h.registerLiterals(f)
	}
	globals, err := star.ExecFileOptions(FileOptions(), thread, name, src, l.h.Predeclared())
	var ev *star.EvalError
	if from != "" && errors.As(err, &ev) {
		// Keep the inner backtrace: the interpreter reports only the
		// message. The cause stays reachable for the exit status.
		err = &loadError{msg: backtrace(ev), err: err}
	}
	e.globals, e.err, e.done = globals, err, true
	return globals, err
}

// confined refuses a load from outside the confining directory and the
// pinned repositories.
func (l *loader) confined(abs, module string) error {
	if l.confine == "" || within(abs, l.confine) {
		return nil
	}
	for dir := range l.pins {
		if within(abs, dir) {
			return nil
		}
	}
	for dir := range l.repos {
		if within(abs, dir) {
			return nil
		}
	}
	return fmt.Errorf("load(%q): %s is outside the test's recipe root %s: podmin test loads only files below it and the repositories pinned in %s", module, abs, l.confine, LockFile)
}

// cycle describes a load cycle, one step per line of the chain.
func (l *loader) cycle(abs, from string) error {
	start := 0
	for i, s := range l.stack {
		if s.abs == abs {
			start = i
		}
	}
	var steps []string
	for _, s := range l.stack[start+1:] {
		steps = append(steps, s.from+" loads "+l.display(s.abs))
	}
	steps = append(steps, from+" loads "+l.display(abs))
	return fmt.Errorf("load cycle: %s: remove one of these loads", strings.Join(steps, ", "))
}

// resolve turns a load() string into an absolute .star path.
func (l *loader) resolve(fromAbs, module string) (string, error) {
	if !strings.HasSuffix(module, ".star") {
		return "", fmt.Errorf("load(%q): a recipe module is a .star file", module)
	}
	switch {
	case strings.HasPrefix(module, "@"):
		name, rest, ok := strings.Cut(module[1:], "//")
		if !ok || name == "" {
			return "", fmt.Errorf("load(%q): write shared recipes as @name//path.star", module)
		}
		dir, err := l.repository(fromAbs, name)
		if err != nil {
			return "", fmt.Errorf("load(%q): %w", module, err)
		}
		return inside(dir, rest, module)
	case strings.HasPrefix(module, "//"):
		root, err := l.root(filepath.Dir(fromAbs))
		if err != nil {
			return "", fmt.Errorf("load(%q): %w", module, err)
		}
		return inside(root, module[2:], module)
	case filepath.IsAbs(module):
		return "", fmt.Errorf("load(%q): use a path relative to this file, //path from the recipe root, or @name//path", module)
	}
	return filepath.Join(filepath.Dir(fromAbs), filepath.FromSlash(module)), nil
}

// inside joins rel to root and refuses paths that climb out of it.
func inside(root, rel, module string) (string, error) {
	p := filepath.Join(root, filepath.FromSlash(rel))
	if r, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(r, "..") {
		return "", fmt.Errorf("load(%q): the path leaves its root %s", module, root)
	}
	return p, nil
}

// LockFile is the name of the file that marks a recipe root and pins
// shared recipe repositories.
const LockFile = "podmin.star.lock"

// root is the recipe root of dir: the repository directory of a fetched
// @name, else the nearest directory upward holding podmin.star.lock, else
// the git repository root.
func (l *loader) root(dir string) (string, error) {
	for repo := range l.repos {
		if dir == repo || strings.HasPrefix(dir, repo+string(filepath.Separator)) {
			return repo, nil
		}
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, LockFile)); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no recipe root above %s: add a %s file to the recipe root", dir, LockFile)
		}
	}
}

// loadError is the error of a loaded file: its own backtrace as the
// message, the interpreter's error as the cause.
type loadError struct {
	msg string
	err error
}

func (e *loadError) Error() string { return e.msg }
func (e *loadError) Unwrap() error { return e.err }
