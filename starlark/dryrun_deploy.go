// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package starlark

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	"podmin.dev/podmin/builtins"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/state"
)

// onRealCluster reports whether the effective current context is the real
// current one, whose bucket can be read. A cluster that is only planned
// (connected in this dry run) is read as empty.
func (r *recorder) onRealCluster() (bool, string, error) {
	cur, err := r.CurrentContext()
	if err != nil {
		return false, "", err
	}
	bucket := cur.Provider + ":" + cur.Bucket
	if r.deploys[bucket] == nil {
		r.deploys[bucket] = map[state.Key]*builtins.ListEntry{}
	}
	r.bucket = bucket
	if r.realCur == nil {
		real, err := r.real.CurrentContext()
		if err != nil {
			real.Cluster = "" // none selected for real
		}
		r.realCur = &real
	}
	return *r.realCur == cur, cur.Bucket, nil
}

// planned are the planned entries of the current cluster's bucket (set by
// onRealCluster).
func (r *recorder) planned() map[state.Key]*builtins.ListEntry {
	return r.deploys[r.bucket]
}

// List reads the real index (when the cluster is real) and applies the
// planned deploys and deletes.
func (r *recorder) List(ctx context.Context) ([]builtins.ListEntry, error) {
	real, _, err := r.onRealCluster()
	if err != nil {
		return nil, err
	}
	var base []builtins.ListEntry
	if real {
		if base, err = r.real.List(ctx); err != nil {
			return nil, err
		}
	}
	seen := map[state.Key]bool{}
	var out []builtins.ListEntry
	for _, e := range base {
		k := state.Key{NodeGroup: e.NodeGroup, Name: e.Name}
		seen[k] = true
		if p, ok := r.planned()[k]; ok {
			if p != nil {
				out = append(out, *p)
			}
			continue
		}
		out = append(out, e)
	}
	for k, p := range r.planned() {
		if !seen[k] && p != nil {
			out = append(out, *p)
		}
	}
	sortEntries(out)
	return out, nil
}

func sortEntries(es []builtins.ListEntry) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].NodeGroup != es[j].NodeGroup {
			return es[i].NodeGroup < es[j].NodeGroup
		}
		return es[i].Name < es[j].Name
	})
}

func (r *recorder) find(ctx context.Context, k state.Key) (*builtins.ListEntry, error) {
	list, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	for _, e := range list {
		if e.NodeGroup == k.NodeGroup && e.Name == k.Name {
			return &e, nil
		}
	}
	return nil, nil
}

// manifestBytes renders what deploy would validate: the built-in manifest
// (through init into the scratch directory) or the given file.
func (r *recorder) manifestBytes(o builtins.DeployOptions) ([]byte, []string, error) {
	if o.File == "" {
		if len(o.Images) == 0 {
			return nil, nil, errors.New("deploy needs --image for the built-in manifest, or --file with a manifest")
		}
		scratch, err := r.scratchFile("deploy-" + o.Name + ".yaml")
		if err != nil {
			return nil, nil, err
		}
		if _, err := r.real.Init(builtins.InitOptions{ManifestOptions: o.ManifestOptions, File: scratch}); err != nil {
			return nil, nil, err
		}
		data, err := os.ReadFile(scratch)
		return data, nil, err
	}
	m := o.ManifestOptions
	if m.Namespace != "" || len(m.Ports) > 0 || m.CPU != "" || m.Memory != "" || len(m.Env) > 0 || len(m.Secrets) > 0 {
		return nil, nil, errors.New("namespace, port, cpu, memory, env and secret shape the built-in manifest and cannot be combined with file: put them in the manifest instead")
	}
	if o.File == "-" {
		return nil, nil, errors.New("a dry run cannot read a manifest from standard input: pass a file")
	}
	p := r.path(o.File)
	if s, ok := r.files[o.File]; ok {
		p = s
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, nil, fmt.Errorf("read manifest: %w", err)
	}
	return data, o.Images, nil
}

func (r *recorder) Deploy(ctx context.Context, o builtins.DeployOptions) (builtins.DeployResult, error) {
	if err := ids.ValidateNodeGroup(o.NodeGroup); err != nil {
		return builtins.DeployResult{}, fmt.Errorf("--nodegroup: %w", err)
	}
	key, err := state.NewKey(o.NodeGroup, o.Name)
	if err != nil {
		return builtins.DeployResult{}, err
	}
	data, images, err := r.manifestBytes(o)
	if err != nil {
		return builtins.DeployResult{}, err
	}
	ex, err := manifest.Extract(data, manifest.ExtractOptions{Name: o.Name, NodeGroup: o.NodeGroup, Images: images, RequireService: o.File != "" && o.Service})
	if err != nil {
		return builtins.DeployResult{}, err
	}
	_, bucket, err := r.onRealCluster()
	if err != nil {
		return builtins.DeployResult{}, err
	}
	pod, err := state.PodPayloadPath(ex.NodeGroup, ex.PodYAML)
	if err != nil {
		return builtins.DeployResult{}, err
	}
	res := builtins.DeployResult{Name: ex.Name, NodeGroup: ex.NodeGroup, Namespace: ex.Namespace, Action: "created", Pod: pod, Bucket: bucket}
	entry := builtins.ListEntry{Name: ex.Name, NodeGroup: ex.NodeGroup, Namespace: ex.Namespace, Pod: pod}
	if ex.Service != nil {
		res.Service = ex.Service.Name
		entry.Service = ex.Service.Namespace + "/" + ex.Service.Name
		if res.ServicePath, err = state.ServicePayloadPath(ex.Service.Namespace, ex.Service.Name, ex.ServiceYAML); err != nil {
			return builtins.DeployResult{}, err
		}
	}
	prev, err := r.find(ctx, key)
	if err != nil {
		return builtins.DeployResult{}, err
	}
	if prev != nil {
		res.Action = "updated"
		if prev.Pod == entry.Pod && prev.Service == entry.Service {
			res.Action = "unchanged"
		}
		if prev.Namespace != "" && prev.Namespace != ex.Namespace {
			res.ReplacedNamespace = prev.Namespace
		}
	}
	r.planned()[key] = &entry
	if res.Action != "unchanged" {
		r.plan.add(Change{Op: "deploy", Target: key.String(), Where: "deployments/index.json in bucket " + bucket,
			Detail: fmt.Sprintf("%s: commit Pod %s", res.Action, pod)})
	}
	return res, nil
}

func (r *recorder) Delete(ctx context.Context, o builtins.DeleteOptions) (builtins.DeleteResult, error) {
	if err := ids.ValidateNodeGroup(o.NodeGroup); err != nil {
		return builtins.DeleteResult{}, fmt.Errorf("--nodegroup: %w", err)
	}
	key, err := state.NewKey(o.NodeGroup, o.Name)
	if err != nil {
		return builtins.DeleteResult{}, err
	}
	_, bucket, err := r.onRealCluster()
	if err != nil {
		return builtins.DeleteResult{}, err
	}
	prev, err := r.find(ctx, key)
	if err != nil {
		return builtins.DeleteResult{}, err
	}
	res := builtins.DeleteResult{Name: key.Name, NodeGroup: key.NodeGroup, Action: "absent"}
	if prev != nil {
		res.Action = "deleted"
		r.planned()[key] = nil
		r.plan.add(Change{Op: "delete", Target: key.String(), Where: "deployments/index.json in bucket " + bucket,
			Detail: "remove the index entry (payloads stay)"})
	}
	return res, nil
}
