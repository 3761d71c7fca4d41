// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package mounts

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/secrets"
)

// Reader reads one value by its full provider name,
// /<cluster>/<namespace>/<pod>/<key>.
type Reader interface {
	Get(ctx context.Context, name string) ([]byte, error)
}

// StoreReader adapts a secrets store (internal/secrets) to Reader.
type StoreReader struct {
	// Store reads validated names.
	Store interface {
		Read(ctx context.Context, name secrets.Name) (secrets.Value, error)
	}
}

// Get implements Reader.
func (r StoreReader) Get(ctx context.Context, name string) ([]byte, error) {
	n, err := secrets.ParseName(name)
	if err != nil {
		return nil, err
	}
	return r.Store.Read(ctx, n)
}

// Values are one Pod's fetched values: provider → key → bytes.
type Values map[string]map[string]secrets.Value

// Fetch reads every value p declares, and nothing else. The first failure
// ends it: a Pod is only ever published with its complete value set.
func Fetch(ctx context.Context, readers map[string]Reader, cluster string, p *nodepod.Pod) (Values, error) {
	v := Values{}
	for _, m := range p.Mounts {
		r, ok := readers[m.Provider]
		if !ok {
			return nil, fmt.Errorf("pod %s declares podmin.dev/%s, but this node has no %s secrets provider configured: use a provider the cluster supports", p.Name, m.Provider, m.Provider)
		}
		v[m.Provider] = map[string]secrets.Value{}
		for _, key := range m.Keys {
			name, err := secrets.PodSecret(cluster, p.Namespace, p.Name, key)
			if err != nil {
				return nil, fmt.Errorf("pod %s: podmin.dev/%s key %q: %w", p.Name, m.Provider, key, err)
			}
			data, err := r.Get(ctx, name.String())
			if errors.Is(err, secrets.ErrNotFound) {
				// The provider's own advice names the CLI's flags; this is
				// the node's view of the problem.
				return nil, fmt.Errorf("pod %s: value %s does not exist in %s: %w: create it with \"podmin secret\" for Pod %s in namespace %s, or remove key %s from the Pod's podmin.dev/%s annotation",
					p.Name, name, m.Provider, secrets.ErrNotFound, p.Name, p.Namespace, key, m.Provider)
			}
			if err != nil {
				return nil, fmt.Errorf("pod %s: fetch %s from %s: %w", p.Name, name, m.Provider, err)
			}
			v[m.Provider][key] = data
		}
	}
	return v, nil
}

// Write installs p's values beneath root (the node root; p's host paths
// are node paths). Each value is written atomically with mode 0444;
// undeclared files and provider directories of the Pod are removed, so a
// key dropped from the annotation disappears from the container.
func Write(root string, p *nodepod.Pod, v Values) error {
	base := filepath.Join(root, filepath.FromSlash(nodepod.WorkloadsDir), p.Name, "secrets")
	want := map[string]bool{}
	for _, m := range p.Mounts {
		want[m.Provider] = true
		dir := filepath.Join(root, filepath.FromSlash(m.HostDir))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("pod %s: create %s: %w: check that the node's /run is a writable tmpfs", p.Name, dir, err)
		}
		for _, key := range m.Keys {
			data, ok := v[m.Provider][key]
			if !ok {
				return fmt.Errorf("pod %s: no value fetched for %s key %q: fetch before writing", p.Name, m.Provider, key)
			}
			if err := paths.WriteFileAtomic(filepath.Join(dir, key), data, 0o444); err != nil {
				return fmt.Errorf("pod %s: %w", p.Name, err)
			}
		}
		if err := prune(dir, func(name string) bool { return slices.Contains(m.Keys, name) }); err != nil {
			return fmt.Errorf("pod %s: %w", p.Name, err)
		}
	}
	if err := prune(base, func(name string) bool { return want[name] }); err != nil {
		return fmt.Errorf("pod %s: %w", p.Name, err)
	}
	return nil
}

// Remove deletes every value of a Pod that is no longer desired.
func Remove(root, pod string) error {
	dir := filepath.Join(root, filepath.FromSlash(nodepod.WorkloadsDir), pod, "secrets")
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the values of pod %s: %w", pod, err)
	}
	return nil
}

// prune removes the entries of dir that keep rejects, including the
// temporary files an interrupted write left behind.
func prune(dir string, keep func(name string) bool) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if keep(e.Name()) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("remove %s: %w", filepath.Join(dir, e.Name()), err)
		}
	}
	return nil
}
