// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/internal/contexts"
)

// destructiveName matches the verbs of operations that delete or destroy
// something. A builtin named like this must be marked Destructive.
var destructiveName = regexp.MustCompile(`(^|\.)(delete|destroy|disconnect|teardown|uninstall|remove|purge|prune|empty)$`)

// trapOps answers CurrentContext and panics on every other operation: the
// guard must decide before the builtin touches anything.
type trapOps struct {
	Ops
}

func (trapOps) CurrentContext() (contexts.Context, error) {
	return contexts.Context{Cluster: "prod", Provider: "local", Bucket: "b"}, nil
}

// callGuarded calls b with kwargs on a host over trapOps and reports
// whether the call got past the guard (it reached the Ops) and its error.
func callGuarded(t *testing.T, b *Builtin, opts Options, kwargs ...star.Tuple) (reached bool, err error) {
	t.Helper()
	opts.Ops = trapOps{}
	h := New(opts)
	defer h.Close()
	thread, release := h.NewThread(context.Background(), "guard")
	defer release()
	defer func() {
		if r := recover(); r != nil {
			reached = true
		}
	}()
	// Every required argument is "prod", the current cluster: for
	// disconnect that is also the cluster it acts on.
	var args []star.Tuple
	for _, p := range b.Params {
		if p.Required {
			args = append(args, star.Tuple{star.String(p.Name), star.String("prod")})
		}
	}
	_, err = b.call(thread, nil, nil, append(args, kwargs...))
	return false, err
}

// TestEveryDestructiveBuiltinIsGuarded walks the registry: every builtin
// named like a destructive operation is marked Destructive, has the
// confirm parameter, fails without confirmation before calling anything,
// and proceeds with confirm = True, confirm = "<cluster>" or --yes.
func TestEveryDestructiveBuiltinIsGuarded(t *testing.T) {
	n := 0
	for _, b := range Builtins() {
		if destructiveName.MatchString(b.Name) && !b.Destructive {
			t.Errorf("%s deletes or destroys but is not marked Destructive: it has no confirmation guard", b.FullName())
		}
		if !b.Destructive {
			continue
		}
		n++
		t.Run(b.Name, func(t *testing.T) {
			if !strings.Contains(b.Signature(), "confirm=None") {
				t.Errorf("signature lacks confirm: %s", b.Signature())
			}
			reached, err := callGuarded(t, b, Options{})
			if reached || !errors.Is(err, ErrNotConfirmed) {
				t.Fatalf("without confirmation: reached=%v err=%v", reached, err)
			}
			if !strings.Contains(err.Error(), `pass confirm = "prod" (the cluster) or confirm = True, or run the script with podmin run --yes (-y)`) {
				t.Errorf("the error does not say how to confirm: %v", err)
			}
			for _, tc := range []struct {
				opts Options
				kw   []star.Tuple
			}{
				{Options{Yes: true}, nil},
				{Options{}, []star.Tuple{{star.String("confirm"), star.True}}},
				{Options{}, []star.Tuple{{star.String("confirm"), star.String("prod")}}},
				{Options{Confirm: func(string) (string, error) { return "prod", nil }}, nil},
				{Options{Confirm: func(string) (string, error) { return " prod\n", nil }}, nil},
			} {
				if reached, err := callGuarded(t, b, tc.opts, tc.kw...); !reached {
					t.Errorf("confirmed by %v %v: stopped by %v", tc.opts.Yes, tc.kw, err)
				}
			}
			for _, kw := range []star.Value{star.False, star.String("staging"), star.MakeInt(1)} {
				if reached, err := callGuarded(t, b, Options{}, star.Tuple{star.String("confirm"), kw}); reached || err == nil {
					t.Errorf("confirm = %v passed the guard", kw)
				}
			}
			// A named cluster is a check: --yes and a prompt answered with
			// the right ID do not override a mismatch, and nothing is asked.
			asked := ""
			ask := func(q string) (string, error) { asked = q; return "prod", nil }
			for _, opts := range []Options{{Yes: true}, {Confirm: ask}, {Yes: true, Confirm: ask}} {
				reached, err := callGuarded(t, b, opts, star.Tuple{star.String("confirm"), star.String("staging")})
				if reached || !errors.Is(err, ErrNotConfirmed) || !strings.Contains(err.Error(), `confirm = "staging" does not match the cluster "prod"`) {
					t.Errorf("confirm = \"staging\" with yes=%v: reached=%v err=%v", opts.Yes, reached, err)
				}
			}
			if asked != "" {
				t.Errorf("a mismatched confirm = asked %q", asked)
			}
			// --yes answers a question only: an explicit confirm = False
			// is the script's "no", which neither --yes, a dry run nor a
			// prompt overrides; None is no answer at all.
			for _, opts := range []Options{{Yes: true}, {DryRun: true}, {Confirm: ask}} {
				reached, err := callGuarded(t, b, opts, star.Tuple{star.String("confirm"), star.False})
				if reached || !errors.Is(err, ErrNotConfirmed) || !strings.Contains(err.Error(), "the script says confirm = False") {
					t.Errorf("confirm = False with %+v: reached=%v err=%v", opts, reached, err)
				}
			}
			if reached, err := callGuarded(t, b, Options{Yes: true}, star.Tuple{star.String("confirm"), star.None}); !reached {
				t.Errorf("--yes did not answer confirm = None: %v", err)
			}
			for _, typed := range []string{"y", "yes", "", "PROD", "staging"} {
				ask := func(q string) (string, error) { asked = q; return typed, nil }
				if reached, err := callGuarded(t, b, Options{Confirm: ask}); reached || !errors.Is(err, ErrNotConfirmed) {
					t.Errorf("typing %q passed: %v", typed, err)
				}
			}
			if !strings.Contains(asked, " is destructive. Type the cluster ID (prod) to confirm: ") || !strings.HasPrefix(asked, b.FullName()+"(") {
				t.Errorf("prompt %q", asked)
			}
		})
	}
	if n < 4 {
		t.Errorf("only %d destructive builtins: deployments.delete, secrets.delete, secrets.destroy and contexts.disconnect are", n)
	}
}

func TestDisconnectConfirmsItsOwnCluster(t *testing.T) {
	b, _ := Lookup("contexts.disconnect")
	h := New(Options{Ops: trapOps{}})
	thread, release := h.NewThread(context.Background(), "t")
	defer release()
	_, err := b.call(thread, nil, star.Tuple{star.String("staging")}, []star.Tuple{{star.String("confirm"), star.String("prod")}})
	if !errors.Is(err, ErrNotConfirmed) || !strings.Contains(err.Error(), `does not match the cluster "staging"`) {
		t.Errorf("disconnect staging with confirm = \"prod\": %v", err)
	}
}
