// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"fmt"
	"path/filepath"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/ids"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// PreviewOptions are the inputs of preview.
type PreviewOptions struct {
	// NodeGroup selects the node whose static Pods are rendered.
	NodeGroup string
	// Out, when set, is a directory the files are written into (created
	// when missing; other files in it are left alone).
	Out string
}

// PreviewMount is one provider's values a Pod mounts. Only names and
// paths: preview never reads a secret value.
type PreviewMount struct {
	Provider string   `json:"provider"`
	Keys     []string `json:"keys"`
	// HostDir is the node directory; MountPath where containers read it.
	HostDir   string `json:"hostDir"`
	MountPath string `json:"mountPath"`
}

// PreviewFile is one static Pod file a node would write.
type PreviewFile struct {
	// File is the file name in /etc/podmin/manifests.
	File       string         `json:"file"`
	Deployment string         `json:"deployment"`
	Name       string         `json:"name"`
	Namespace  string         `json:"namespace"`
	Revision   string         `json:"revision"`
	Mounts     []PreviewMount `json:"mounts,omitempty"`
	// Path is where preview wrote the file; empty without Out.
	Path string `json:"path,omitempty"`
	// YAML is the exact file content.
	YAML string `json:"yaml"`
}

// PreviewResult lists the files in deployment order.
type PreviewResult struct {
	NodeGroup string        `json:"nodegroup"`
	Dir       string        `json:"dir"`
	Files     []PreviewFile `json:"files"`
}

// Preview renders exactly the static Pod files a node of the NodeGroup
// would write for the committed desired state, with the same node
// transformation the agent uses. Payload presence and identity come from
// one paginated LIST of the NodeGroup's Pod payload prefix (and of the
// Service payload prefix): a payload the bucket lacks, or whose bytes do
// not match its digest, fails the preview naming it, as it would keep a
// node on its last good state. Secret values are never read, only their
// mount paths shown.
func Preview(ctx context.Context, e *openv.Env, opts PreviewOptions) (PreviewResult, error) {
	if err := ids.ValidateNodeGroup(opts.NodeGroup); err != nil {
		return PreviewResult{}, openv.InvalidArgument(fmt.Errorf("--nodegroup: %w", err))
	}
	c, store, err := e.OpenCluster(ctx)
	if err != nil {
		return PreviewResult{}, err
	}
	ix, _, err := state.ReadDesiredIndex(ctx, store)
	if err != nil {
		return PreviewResult{}, e.Explain(c, err)
	}
	items := ix.NodeGroup(opts.NodeGroup)
	listing, err := state.ListPayloads(ctx, store, state.PayloadPrefixes(items))
	if err != nil {
		return PreviewResult{}, e.Explain(c, err)
	}
	pc := e.ClusterCache(c)
	res := PreviewResult{NodeGroup: opts.NodeGroup, Dir: nodepod.ManifestsDir, Files: []PreviewFile{}}
	for _, it := range items {
		data, err := state.ReadListed(ctx, store, pc, listing, it.Entry.Pod)
		if err == nil && it.Entry.Service != "" {
			err = state.VerifyListed(ctx, store, pc, listing, it.Entry.Service)
		}
		if err != nil {
			return PreviewResult{}, e.Explain(c, fmt.Errorf("deployment %s: %w", it.Key, err))
		}
		p, err := nodepod.Transform(it.Key, it.Entry, data)
		if err != nil {
			return PreviewResult{}, err
		}
		f := PreviewFile{File: p.File, Deployment: it.Key.String(), Name: p.Name, Namespace: p.Namespace, Revision: p.Revision, YAML: string(p.YAML)}
		for _, m := range p.Mounts {
			f.Mounts = append(f.Mounts, PreviewMount{Provider: m.Provider, Keys: m.Keys, HostDir: m.HostDir, MountPath: nodepod.MountDir + "/" + m.Provider})
		}
		res.Files = append(res.Files, f)
	}
	if opts.Out == "" {
		return res, nil
	}
	dir := e.Path(opts.Out)
	if err := e.LocalFiles().MkdirAll(dir, 0o755); err != nil {
		return PreviewResult{}, fmt.Errorf("create --out directory %s: %w", dir, err)
	}
	for i := range res.Files {
		f := &res.Files[i]
		f.Path = filepath.Join(dir, f.File)
		if err := e.LocalFiles().WriteFile(f.Path, []byte(f.YAML), 0o644); err != nil {
			return PreviewResult{}, err
		}
		e.Progressf("wrote %s", f.Path)
	}
	return res, nil
}
