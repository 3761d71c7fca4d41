// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/paths"
)

// publish commits the staged Pods one atomic rename at a time, then removes
// stale files. Values are installed before their Pod's file, and the
// identity directory exists before kubelet can see the Pod.
func (r *Reconciler) publish(ctx context.Context, c *candidate, res *Result) error {
	if err := os.MkdirAll(r.manifests, 0o755); err != nil {
		return fmt.Errorf("create %s: %w: check the node root", r.manifests, err)
	}
	keep := map[string]bool{}
	for name := range c.retained {
		keep[nodepod.FileName(name)] = true
	}
	for _, sp := range c.pods {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := sp.pod
		keep[p.File] = true
		if err := r.ensureIdentityDir(p); err != nil {
			return err
		}
		if sp.values != nil {
			if err := mounts.Write(r.opts.Root, p, sp.values); err != nil {
				return err
			}
			r.loaded[p.Name] = p.Revision
		}
		written, err := r.writePod(p)
		if err != nil {
			return err
		}
		if written {
			res.Written++
			r.log.Info("static Pod written", "deployment", p.Key.String(), "file", p.File, "revision", p.Revision)
		}
	}
	return r.cleanup(c, keep, res)
}

// ensureIdentityDir makes the workload identity host path exist so that
// kubelet's hostPath type Directory is satisfied. An existing directory or
// symlink (the identity generation switch of milestone 2) is left alone.
func (r *Reconciler) ensureIdentityDir(p *nodepod.Pod) error {
	dir := filepath.Join(r.opts.Root, filepath.FromSlash(p.IdentityHostDir))
	if _, err := os.Lstat(dir); err == nil {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("pod %s: create identity directory %s: %w: check that the node's /run is writable", p.Name, dir, err)
	}
	return nil
}

// writePod replaces the Pod's file unless it already has exactly these
// bytes: a temporary dot file in the same directory (kubelet ignores dot
// files), fsync, rename, fsync of the directory.
func (r *Reconciler) writePod(p *nodepod.Pod) (bool, error) {
	dst := filepath.Join(r.manifests, p.File)
	if cur, err := os.ReadFile(dst); err == nil && bytes.Equal(cur, p.YAML) {
		return false, nil
	}
	tmp, err := os.CreateTemp(r.manifests, "."+p.File+".tmp-*")
	if err != nil {
		return false, fmt.Errorf("write %s: %w", dst, err)
	}
	abandon := func(err error) (bool, error) {
		_ = tmp.Close()
		_ = os.Remove(tmp.Name())
		return false, fmt.Errorf("write %s: %w", dst, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return abandon(err)
	}
	if _, err := tmp.Write(p.YAML); err != nil {
		return abandon(err)
	}
	if err := tmp.Sync(); err != nil {
		return abandon(err)
	}
	if err := tmp.Close(); err != nil {
		return abandon(err)
	}
	// A fault here models a crash: the synced temporary file stays behind
	// for the next pass to remove.
	if err := r.step(StepRename, p.File); err != nil {
		return false, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		_ = os.Remove(tmp.Name())
		return false, fmt.Errorf("write %s: %w", dst, err)
	}
	if err := paths.SyncDir(r.manifests); err != nil {
		return true, err
	}
	return true, nil
}

// isTemp reports whether name is a temporary file of writePod.
func isTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".yaml.tmp-")
}

// cleanup removes every *.yaml the candidate does not keep and every
// leftover temporary file of the Podmin-owned directory, and the values of
// Pods that are no longer desired. Nothing outside those paths is touched.
func (r *Reconciler) cleanup(c *candidate, keep map[string]bool, res *Result) error {
	entries, err := os.ReadDir(r.manifests)
	if err != nil {
		return fmt.Errorf("read %s: %w", r.manifests, err)
	}
	removed := false
	for _, e := range entries {
		name := e.Name()
		stale := e.Type().IsRegular() && strings.HasSuffix(name, ".yaml") && !strings.HasPrefix(name, ".") && !keep[name]
		if !stale && !(e.Type().IsRegular() && isTemp(name)) {
			continue
		}
		if err := r.step(StepCleanup, name); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(r.manifests, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove stale %s: %w", filepath.Join(r.manifests, name), err)
		}
		removed = true
		if stale {
			res.Removed++
			r.log.Info("stale static Pod removed", "file", name)
		}
	}
	if removed {
		if err := paths.SyncDir(r.manifests); err != nil {
			return err
		}
	}
	return r.removeStaleValues(c)
}

// removeStaleValues deletes the tmpfs values of Pods that are neither
// desired nor retained.
func (r *Reconciler) removeStaleValues(c *candidate) error {
	want := map[string]bool{}
	for name := range c.retained {
		want[name] = true
	}
	for _, sp := range c.pods {
		want[sp.pod.Name] = true
	}
	dir := filepath.Join(r.opts.Root, filepath.FromSlash(nodepod.WorkloadsDir))
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	for _, e := range entries {
		if want[e.Name()] || !e.IsDir() {
			continue
		}
		if err := mounts.Remove(r.opts.Root, e.Name()); err != nil {
			return err
		}
		delete(r.loaded, e.Name())
	}
	return nil
}
