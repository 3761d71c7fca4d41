// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/state"
)

// recorder is the Ops of a dry run. Reads (list, validate, the contexts)
// are performed for real; writes are recorded in the plan and applied to
// an in-memory overlay, so later reads in the same script see them and
// the script can branch on real results. Nothing is written anywhere
// except the recorder's own scratch directory.
type recorder struct {
	real    Ops
	plan    *Plan
	workDir string
	scratch string

	ctxs    *contexts.File                               // nil until a context change is recorded
	realCur *contexts.Context                            // the real current context, read once
	deploys map[string]map[state.Key]*builtins.ListEntry // per bucket; nil entry = deleted
	bucket  string                                       // the current bucket's key in deploys
	files   map[string]string                            // file planned by init → scratch copy
}

func newRecorder(real Ops, plan *Plan, workDir string) *recorder {
	return &recorder{real: real, plan: plan, workDir: workDir,
		deploys: map[string]map[state.Key]*builtins.ListEntry{}, files: map[string]string{}}
}

// close removes the scratch directory.
func (r *recorder) close() error {
	if r.scratch == "" {
		return nil
	}
	return os.RemoveAll(r.scratch)
}

func (r *recorder) scratchFile(name string) (string, error) {
	if r.scratch == "" {
		dir, err := os.MkdirTemp("", "podmin-dry-run-")
		if err != nil {
			return "", fmt.Errorf("dry run scratch directory: %w", err)
		}
		r.scratch = dir
	}
	return filepath.Join(r.scratch, fmt.Sprintf("%d-%s", len(r.files), filepath.Base(name))), nil
}

func (r *recorder) path(p string) string {
	if filepath.IsAbs(p) || r.workDir == "" {
		return p
	}
	return filepath.Join(r.workDir, p)
}

// overlay returns the planned contexts file, copied from the real one on
// first use.
func (r *recorder) overlay() (*contexts.File, error) {
	if r.ctxs != nil {
		return r.ctxs, nil
	}
	list, err := r.real.ListContexts()
	if err != nil {
		return nil, err
	}
	f := &contexts.File{Contexts: map[string]contexts.Context{}}
	for _, e := range list {
		f.Contexts[e.Cluster] = e.Context
		if e.Current {
			f.Current = e.Cluster
		}
	}
	r.ctxs = f
	return f, nil
}

func (r *recorder) CurrentContext() (contexts.Context, error) {
	if r.ctxs == nil {
		return r.real.CurrentContext()
	}
	return r.ctxs.CurrentContext()
}

func (r *recorder) ListContexts() ([]builtins.ContextEntry, error) {
	if r.ctxs == nil {
		return r.real.ListContexts()
	}
	out := make([]builtins.ContextEntry, 0, len(r.ctxs.Contexts))
	for _, n := range r.ctxs.Names() {
		out = append(out, builtins.ContextEntry{Context: r.ctxs.Contexts[n], Current: n == r.ctxs.Current})
	}
	return out, nil
}

const contextsWhere = "the contexts file on this machine"

func (r *recorder) Connect(_ context.Context, o builtins.ConnectOptions) (builtins.ConnectResult, error) {
	if err := ids.ValidateCluster(o.Cluster); err != nil {
		return builtins.ConnectResult{}, err
	}
	if o.Provider == "" || o.Bucket == "" {
		return builtins.ConnectResult{}, errors.New("connect needs provider and bucket")
	}
	f, err := r.overlay()
	if err != nil {
		return builtins.ConnectResult{}, err
	}
	c := contexts.Context{Cluster: o.Cluster, Provider: o.Provider, Region: o.Region, Bucket: o.Bucket, Profile: o.Profile, SecretsProvider: o.SecretsProvider}
	if o.Provider == "local" {
		c.Region = "local"
		if c.SecretsProvider == "" {
			c.SecretsProvider = "local"
		}
	} else if c.SecretsProvider == "" {
		c.SecretsProvider = "aws-parameter-store"
	}
	_, replaced := f.Contexts[o.Cluster]
	f.Contexts[o.Cluster], f.Current = c, o.Cluster
	r.plan.add(Change{Op: "connect", Target: o.Cluster, Where: contextsWhere + "; bucket " + o.Bucket,
		Detail: fmt.Sprintf("verify bucket %s of provider %s (creating and tagging it when absent), save context %s and select it", o.Bucket, o.Provider, o.Cluster)})
	return builtins.ConnectResult{Context: c, Replaced: replaced}, nil
}

func (r *recorder) Use(o builtins.UseOptions) (contexts.Context, error) {
	f, err := r.overlay()
	if err != nil {
		return contexts.Context{}, err
	}
	c, err := f.Lookup(o.Cluster)
	if err != nil {
		return contexts.Context{}, err
	}
	f.Current = o.Cluster
	r.plan.add(Change{Op: "use", Target: o.Cluster, Where: contextsWhere, Detail: "select context " + o.Cluster})
	return c, nil
}

func (r *recorder) Disconnect(o builtins.DisconnectOptions) (builtins.DisconnectResult, error) {
	f, err := r.overlay()
	if err != nil {
		return builtins.DisconnectResult{}, err
	}
	c, err := f.Lookup(o.Cluster)
	if err != nil {
		return builtins.DisconnectResult{}, err
	}
	res := builtins.DisconnectResult{Context: c, WasCurrent: f.Current == o.Cluster}
	delete(f.Contexts, o.Cluster)
	if res.WasCurrent {
		f.Current = ""
	}
	r.plan.add(Change{Op: "disconnect", Target: o.Cluster, Where: contextsWhere, Detail: "forget context " + o.Cluster + " (its bucket stays)"})
	return res, nil
}

func (r *recorder) Init(o builtins.InitOptions) (builtins.InitResult, error) {
	file := o.File
	if file == "" {
		file = builtins.DefaultManifestFile
	}
	target := r.path(file)
	if _, planned := r.files[file]; planned {
		return builtins.InitResult{}, fmt.Errorf("%s already exists (planned earlier in this dry run): init never overwrites; pass file= with another path", target)
	}
	if _, err := os.Lstat(target); err == nil {
		return builtins.InitResult{}, fmt.Errorf("%s already exists: init never overwrites; remove it or pass --file with another path", target)
	}
	scratch, err := r.scratchFile(file)
	if err != nil {
		return builtins.InitResult{}, err
	}
	o.File = scratch
	res, err := r.real.Init(o)
	if err != nil {
		return builtins.InitResult{}, err
	}
	r.files[file] = scratch
	res.File = file
	r.plan.add(Change{Op: "init", Target: file, Where: "file " + target, Detail: fmt.Sprintf("write DaemonSet %s for NodeGroup %s", res.Name, res.NodeGroup)})
	return res, nil
}

func (r *recorder) Validate(o builtins.ValidateOptions) (*builtins.Extracted, error) {
	if s, ok := r.files[o.File]; ok {
		o.File = s
	}
	return r.real.Validate(o)
}
