// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"go.starlark.net/lib/json"
	"go.starlark.net/lib/math"
	starlarktime "go.starlark.net/lib/time"
	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/dryrun"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/scrub"
)

// Ops is everything the podmin module calls: the same functions the CLI
// calls. *builtins.Env satisfies it; a dry run runs the same *builtins.Env
// code over recording boundaries (package builtins/dryrun).
// Each command group declares the part it needs next to its wrappers.
type Ops interface {
	contextOps
	manifestOps
	deploymentOps
	statusOps
	secretOps
	imageOps
	previewOps
	clusterOps
	installOps
	indexOps
	revisionOps
}

// DefaultMaxSteps bounds a run's computation so a runaway loop ends with a
// clear error instead of hanging. Real recipes use a tiny fraction of it.
const DefaultMaxSteps = 100_000_000

// FileOptions are the language settings of every Podmin file: recipes read
// like Python.
func FileOptions() *syntax.FileOptions {
	return &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, GlobalReassign: true, Recursion: true}
}

// Options configure a Host.
type Options struct {
	// Ops performs the operations (normally a *builtins.Env).
	Ops Ops
	// Stdout receives print() output; everything passes the scrubber. (The
	// caller writes a dry run's plan, through Scrub.)
	Stdout io.Writer
	// Stderr receives diagnostics; it is scrubbed too.
	Stderr io.Writer
	// DryRun runs the operations over recording boundaries: reads are
	// real, writes land in an overlay and become the plan. Ops must be a
	// *builtins.Env.
	DryRun bool
	// Yes confirms destructive operations for the whole run (--yes).
	Yes bool
	// Confirm, when set, asks the operator to confirm a destructive call
	// that has no confirm = (the REPL on a terminal) and returns what they
	// typed: the call proceeds only when it is the cluster ID. Nil never
	// asks: a script never prompts.
	Confirm func(question string) (string, error)
	// Now is the clock of time.now(); nil means time.Now.
	Now func() time.Time
	// MaxSteps bounds computation; zero means DefaultMaxSteps.
	MaxSteps uint64
	// CacheDir is the Podmin cache directory; @name loads of git
	// repositories are fetched into <CacheDir>/recipes.
	CacheDir string
	// WorkDir resolves relative manifest paths as the Ops do; empty means
	// the process's working directory.
	WorkDir string
	// Scrub is the registry of secret values scrubbed from everything the
	// host prints and every error it returns; nil means scrub.Process().
	Scrub *scrub.Registry
}

// podminModule is the podmin module, assembled once: it is frozen and
// finds each call's Host through the thread, so every Host shares it.
var podminModule = sync.OnceValue(func() *starlarkstruct.Module { return newModule(Builtins()) })

// Host runs Starlark for one invocation: a run, a REPL session, one test.
type Host struct {
	opts   Options
	ops    Ops
	plan   *Plan
	rec    *dryrun.Recorder
	err    error // a dry run that could not be set up
	scrub  *scrub.Registry
	stdout *scrub.Writer
	stderr *scrub.Writer
	module *starlarkstruct.Module
	loader *loader
}

// New returns a Host. Under DryRun its Ops run over recording boundaries;
// Close removes their scratch state.
func New(opts Options) *Host {
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxSteps == 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.Scrub == nil {
		opts.Scrub = scrub.Process()
	}
	h := &Host{opts: opts, ops: opts.Ops, scrub: opts.Scrub, module: podminModule()}
	h.stdout = scrub.NewWriter(h.scrub, opts.Stdout)
	h.stderr = scrub.NewWriter(h.scrub, opts.Stderr)
	if opts.DryRun {
		h.plan = &Plan{}
		env, ok := opts.Ops.(*builtins.Env)
		if !ok {
			h.err = fmt.Errorf("a dry run needs the builtins environment, not %T (a Podmin bug)", opts.Ops)
		} else {
			var denv *openv.Env
			if h.rec, denv, h.err = dryrun.New((*openv.Env)(env)); h.err != nil {
				h.err = fmt.Errorf("prepare the dry run: %w", h.err)
			} else {
				h.ops = (*builtins.Env)(denv)
			}
		}
	}
	h.loader = newLoader(h)
	return h
}

// Close releases what the Host holds (a dry run's scratch directory) and
// writes out what its scrubbing writers held back.
func (h *Host) Close() error {
	h.Flush()
	if h.rec != nil {
		return h.rec.Close()
	}
	return nil
}

// SetConfirm sets how a destructive call without confirm = asks the
// operator (the REPL on a terminal, once its line editor exists).
func (h *Host) SetConfirm(ask func(question string) (string, error)) { h.opts.Confirm = ask }

// Plan is the recorded plan of a dry run, nil otherwise.
func (h *Host) Plan() *Plan { return h.plan }

// readPlanned reads an object as the dry run sees it (for the plan's
// diffs of replaced payloads).
func (h *Host) readPlanned(where, key string) ([]byte, bool) {
	b, ok := h.rec.Buckets()[where]
	if !ok {
		return nil, false
	}
	obj, err := b.Get(context.Background(), key, objstore.GetOptions{})
	if err != nil {
		return nil, false
	}
	return obj.Data, true
}

// DryRunChanges are the net changes of the whole dry run so far (nil
// outside a dry run): what the plan's calls add up to.
func (h *Host) DryRunChanges() []dryrun.Change {
	if h.rec == nil {
		return nil
	}
	return h.rec.Changes(0, 0)
}

// Stdout is the scrubbed standard output.
func (h *Host) Stdout() io.Writer { return h.stdout }

// Stderr is the scrubbed diagnostics stream.
func (h *Host) Stderr() io.Writer { return h.stderr }

// Scrub replaces every registered secret value in s.
func (h *Host) Scrub(s string) string { return h.scrub.String(s) }

// Scrubber is the registry of secret values this host scrubs.
func (h *Host) Scrubber() *scrub.Registry { return h.scrub }

// Flush writes out what the scrubbing writers held back (the start of
// what might have become a secret value).
func (h *Host) Flush() {
	_ = h.stdout.Flush()
	_ = h.stderr.Flush()
}

// Predeclared are the names every file sees besides Starlark's universe.
func (h *Host) Predeclared() star.StringDict {
	return star.StringDict{
		"podmin": h.module,
		"json":   json.Module,
		"time":   starlarktime.Module,
		"math":   math.Module,
	}
}

type threadKey string

const (
	hostKey    threadKey = "podmin.host"
	contextKey threadKey = "podmin.context"
)

// hostOf returns the Host a thread belongs to.
func hostOf(t *star.Thread) *Host {
	h, _ := t.Local(string(hostKey)).(*Host)
	return h
}

// threadContext is the context a builtin passes to I/O; cancelling it (Ctrl-C)
// also cancels the thread.
func threadContext(t *star.Thread) context.Context {
	if ctx, ok := t.Local(string(contextKey)).(context.Context); ok {
		return ctx
	}
	return context.Background()
}

// NewThread returns a thread bound to this Host and to ctx: cancelling ctx
// cancels both the running builtin (through its context) and the Starlark
// computation. Call release when the thread is done.
func (h *Host) NewThread(ctx context.Context, name string) (thread *star.Thread, release func()) {
	t := &star.Thread{
		Name:  name,
		Print: func(_ *star.Thread, msg string) { fmt.Fprintln(h.stdout, msg) },
		Load:  h.loader.load,
	}
	t.SetLocal(string(hostKey), h)
	t.SetLocal(string(contextKey), ctx)
	starlarktime.SetNow(t, func() (time.Time, error) { return h.opts.Now(), nil })
	max := h.opts.MaxSteps
	t.SetMaxExecutionSteps(max)
	t.OnMaxSteps = func(t *star.Thread) {
		t.Cancel(fmt.Sprintf("the script exceeded its step limit of %d (a runaway loop?): fix the loop, or raise the limit with --max-steps", max))
	}
	stop := context.AfterFunc(ctx, func() {
		t.Cancel("interrupted: " + context.Cause(ctx).Error())
	})
	// When a thread is done its output is complete: what the scrubbing
	// writers held back (a possible start of a secret) is written out.
	return t, func() { stop(); h.Flush() }
}

// planned reports whether mutating operations are recorded, not performed.
func (h *Host) planned() bool { return h.plan != nil }
