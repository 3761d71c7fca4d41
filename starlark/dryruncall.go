// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"fmt"

	star "go.starlark.net/starlark"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/builtins/dryrun"
	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/objstore"
)

// CommandDryRun is what a command's --dry-run recorded: the plan, shaped
// exactly as a recipe's dry run shows a call of the built-in that mirrors
// the command, and the net changes it is made of (with their contents).
type CommandDryRun struct {
	Plan    *Plan
	Changes []dryrun.Change
}

// DryRunCommand runs op, one operation of command (as the CLI names it:
// "deploy", "index rebuild"), over the same recording boundaries a
// recipe's dry run uses (package builtins/dryrun): reads are real, writes
// land in an overlay, and nothing real changes. subject is the command's
// argument, "" without one. The operation itself is the real code: op
// receives the recording environment and calls the same method of it the
// command calls.
func DryRunCommand(ctx context.Context, env *builtins.Env, command, subject string, op func(ctx context.Context, ops *builtins.Env) error) (CommandDryRun, error) {
	var b *Builtin
	for _, x := range Builtins() {
		if x.Command == command {
			b = x
			break
		}
	}
	if b == nil {
		return CommandDryRun{}, fmt.Errorf("%s has no built-in to plan as (a Podmin bug)", command)
	}
	rec, denv, err := dryrun.New((*openv.Env)(env))
	if err != nil {
		return CommandDryRun{}, fmt.Errorf("prepare the dry run: %w", err)
	}
	defer rec.Close()
	from := rec.Mark()
	if err := op(ctx, (*builtins.Env)(denv)); err != nil {
		return CommandDryRun{}, err
	}
	changes := rec.Changes(from, rec.Mark())
	read := func(where, key string) ([]byte, bool) {
		bucket, ok := rec.Buckets()[where]
		if !ok {
			return nil, false
		}
		obj, err := bucket.Get(ctx, key, objstore.GetOptions{})
		if err != nil {
			return nil, false
		}
		return obj.Data, true
	}
	var subj star.Value
	if subject != "" {
		subj = star.String(subject)
	}
	plan := &Plan{}
	plan.add(planStep(b, subj, changes, read))
	return CommandDryRun{Plan: plan, Changes: changes}, nil
}
