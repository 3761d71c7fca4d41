// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	star "go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// Param documents one parameter of a builtin. Its Name is also the name
// UnpackArgs matches, so the documentation cannot drift from the code.
type Param struct {
	// Name equals the CLI flag name with "-" replaced by "_".
	Name string
	// Type is the accepted Starlark type, for humans ("str", "list[str]").
	Type string
	// Positional marks the subject (CLUSTER, NAME): the only parameter that
	// may be passed by position.
	Positional bool
	// Required parameters must be given; they come first.
	Required bool
	// Default is the default as shown in docs; empty means None/not given.
	Default string
	// Doc is one line.
	Doc string
}

// Builtin documents one function of the podmin module and the CLI command
// it mirrors.
type Builtin struct {
	// Name is the dotted name below podmin, e.g. "deployments.deploy".
	Name string
	// Command is the CLI command path below "podmin" that calls the same
	// builtins function ("deploy", "use"); empty when it has none.
	Command string
	// Params in unpacking order: required first.
	Params []Param
	// Returns names the result, e.g. "deployment".
	Returns string
	// Doc is the docstring: a summary line, a blank line, details.
	Doc string
	// Mutates marks operations a dry run records instead of performing.
	Mutates bool
	// Destructive marks operations that delete or destroy something. Each
	// gets the confirm parameter and the one guard (see guard): without
	// confirm = True, confirm = "<cluster>" or podmin run --yes it fails
	// with ErrNotConfirmed before anything else happens. Its CLI command
	// carries the matching --yes/-y flag and prompt.
	Destructive bool

	// confirmTarget returns the cluster a destructive call acts on when it
	// is not the current context's (disconnect names it); "" means the
	// current one.
	confirmTarget func(c *call) string

	impl func(c *call) (star.Value, error)
}

// FullName is the name a script calls, e.g. "podmin.deployments.deploy".
func (b *Builtin) FullName() string { return "podmin." + b.Name }

// Signature renders the call form, e.g.
// podmin.deployments.delete(name, *, nodegroup, ignore_not_found=False).
func (b *Builtin) Signature() string {
	var parts []string
	star := false
	for _, p := range b.Params {
		if !p.Positional && !star {
			parts, star = append(parts, "*"), true
		}
		s := p.Name
		switch {
		case p.Required:
		case p.Default != "":
			s += "=" + p.Default
		default:
			s += "=None"
		}
		parts = append(parts, s)
	}
	return b.FullName() + "(" + strings.Join(parts, ", ") + ")"
}

// Keywords returns the names of the keyword-only parameters.
func (b *Builtin) Keywords() []string {
	var out []string
	for _, p := range b.Params {
		if !p.Positional {
			out = append(out, p.Name)
		}
	}
	return out
}

// Positional returns the name of the subject parameter, or "".
func (b *Builtin) Positional() string {
	for _, p := range b.Params {
		if p.Positional {
			return p.Name
		}
	}
	return ""
}

// family registers the builtins of one command group.
type family func() []*Builtin

// families lists the plugins, one per mod_*.go file.
var families = []family{versionFamily, secretValueFamily, contextsFamily, manifestsFamily, deploymentsFamily, statusFamily, previewFamily, secretsFamily, imagesFamily, clusterFamily, installFamily, depsFamily, indexFamily, revisionsFamily}

// Builtins returns every builtin of the podmin module, sorted by name: the
// documentation registry.
func Builtins() []*Builtin {
	var all []*Builtin
	for _, f := range families {
		for _, b := range f() {
			if b.Destructive {
				b.Params = append(b.Params, confirmParam)
			}
			all = append(all, b)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return all
}

// Lookup returns the registry entry of a builtin by its full or dotted name.
func Lookup(name string) (*Builtin, bool) {
	name = strings.TrimPrefix(name, "podmin.")
	for _, b := range Builtins() {
		if b.Name == name {
			return b, true
		}
	}
	return nil, false
}

// newModule assembles the podmin module from the registry. The module is a
// plain frozen value: each call finds its Host through the thread, so one
// module serves every run and test.
func newModule(all []*Builtin) *starlarkstruct.Module {
	root := &starlarkstruct.Module{Name: "podmin", Members: star.StringDict{}}
	for _, b := range all {
		m := root
		parts := strings.Split(b.Name, ".")
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m.Members[p].(*starlarkstruct.Module)
			if !ok {
				sub = &starlarkstruct.Module{Name: m.Name + "." + p, Members: star.StringDict{}}
				m.Members[p] = sub
			}
			m = sub
		}
		m.Members[parts[len(parts)-1]] = star.NewBuiltin(b.FullName(), b.call)
	}
	root.Freeze()
	return root
}

// call is one invocation of a builtin.
type call struct {
	thread *star.Thread
	host   *Host
	ctx    context.Context
	b      *Builtin
	args   star.Tuple
	kwargs []star.Tuple
	// unanswered marks a destructive call of a dry run that nothing
	// confirmed: a real run would need confirm = or --yes.
	unanswered bool
}

func (b *Builtin) call(thread *star.Thread, _ *star.Builtin, args star.Tuple, kwargs []star.Tuple) (star.Value, error) {
	h := hostOf(thread)
	if h == nil {
		return nil, fmt.Errorf("%s: not available on this thread (a Podmin bug)", b.FullName())
	}
	npos := 0
	for _, p := range b.Params {
		if p.Positional {
			npos++
		}
	}
	if len(args) > npos {
		if npos == 0 {
			return nil, fmt.Errorf("got %d positional arguments, want none: pass %s by keyword", len(args), strings.Join(b.Keywords(), ", "))
		}
		return nil, fmt.Errorf("got %d positional arguments, want at most %d (%s): pass the others by keyword", len(args), npos, b.Positional())
	}
	c := &call{thread: thread, host: h, ctx: threadContext(thread), b: b, args: args, kwargs: kwargs}
	if b.Destructive {
		var confirm star.Value
		c.kwargs, confirm = takeKwarg(kwargs, confirmParam.Name)
		if err := c.guard(confirm); err != nil {
			return nil, err
		}
	}
	if h.rec == nil {
		v, err := b.impl(c)
		if err != nil {
			return nil, c.builtinError(err)
		}
		return v, nil
	}
	from := h.rec.Mark()
	v, err := b.impl(c)
	changes := h.rec.Changes(from, h.rec.Mark())
	if err == nil && (b.Mutates || len(changes) > 0) {
		s := newStep(thread, b, args, changes, h.readPlanned)
		s.Destructive, s.NeedsConfirmation = b.Destructive, c.unanswered
		h.plan.add(s)
	}
	if err != nil {
		return nil, c.builtinError(err)
	}
	return v, nil
}

// builtinError is the error a call returns: an argument the call could not
// unpack stays a plain error (the script's own mistake); anything the
// operation reported is a BuiltinError, so the CLI gives it the exit status
// of the built-in's command.
func (c *call) builtinError(err error) error {
	var ae *argError
	if errors.As(err, &ae) {
		return err
	}
	return &BuiltinError{Command: c.b.Command, Err: c.kwargErrors(err)}
}

// BuiltinError is what a built-in's operation reported to a script: a
// missing bucket, a deployment that does not exist, a refusal. Command is
// the CLI command the built-in mirrors ("delete", "secret destroy"), empty
// for a Starlark-only built-in; the CLI exits with the status that command
// would have for the same error.
type BuiltinError struct {
	Command string
	Err     error
}

func (e *BuiltinError) Error() string { return e.Err.Error() }
func (e *BuiltinError) Unwrap() error { return e.Err }

// argError is an argument a call could not unpack: a wrong type, an
// unknown or missing keyword.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

// ErrNotFound reports that the one thing a built-in was asked for does not
// exist (deployments.delete and .get of an absent deployment); the CLI
// exits 3 on it, as "podmin delete" does.
var ErrNotFound = errors.New("not found")

// notFoundError is an error that matches ErrNotFound without saying so.
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string        { return e.msg }
func (e *notFoundError) Is(target error) bool { return target == ErrNotFound }

func notFoundf(format string, args ...any) error {
	return &notFoundError{msg: fmt.Sprintf(format, args...)}
}

// notFound marks err as ErrNotFound, keeping its message and its chain.
func notFound(err error) error { return &notFoundWrap{err} }

type notFoundWrap struct{ err error }

func (e *notFoundWrap) Error() string   { return e.err.Error() }
func (e *notFoundWrap) Unwrap() []error { return []error{e.err, ErrNotFound} }

// unpack binds the arguments to ptrs, one per Param in order. Optional
// parameters accept None as "not given".
func (c *call) unpack(ptrs ...any) error {
	params := c.b.Params
	if c.b.Destructive { // the guard consumed confirm
		params = params[:len(params)-1]
	}
	if len(ptrs) != len(params) {
		panic(fmt.Sprintf("%s: %d pointers for %d params", c.b.Name, len(ptrs), len(params)))
	}
	pairs := make([]any, 0, 2*len(ptrs))
	for i, p := range params {
		name := p.Name
		switch {
		case p.Required:
		case p.Type == "any":
			name += "?" // None is a value here (default=None)
		default:
			name += "??" // None means not given
		}
		pairs = append(pairs, name, ptrs[i])
	}
	if err := star.UnpackArgs(c.b.FullName(), c.args, c.kwargs, pairs...); err != nil {
		// The backtrace already says "error in podmin.x.y:".
		return &argError{msg: strings.TrimPrefix(err.Error(), c.b.FullName()+": ")}
	}
	return nil
}

// fail reports a builtins error as it is: the interpreter prefixes it
// with "error in podmin.x.y:" and adds the backtrace with file:line.
func (c *call) fail(err error) error { return err }
