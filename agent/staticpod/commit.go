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
	"podmin.dev/podmin/internal/state"
)

// publish commits the staged Pods one atomic rename at a time, then removes
// stale files. Values are installed before their Pod's file, and the
// identity directory exists before kubelet can see the Pod. A Pod whose
// values or file cannot be written keeps its last valid file and is
// recorded in c.failures; every other Pod proceeds. Only a problem with
// the directory itself (or a Step fault) ends the pass.
func (r *Reconciler) publish(ctx context.Context, c *candidate, res *Result) error {
	if err := os.MkdirAll(r.manifests, 0o755); err != nil {
		return fmt.Errorf("create %s: %w: check the node root", r.manifests, err)
	}
	keep := map[string]bool{}
	for _, f := range c.failures {
		keep[nodepod.FileName(f.Pod)] = true
	}
	for i := range c.pods {
		if err := ctx.Err(); err != nil {
			return err
		}
		sp := &c.pods[i]
		p := sp.pod
		keep[p.File] = true
		written, kind, err := r.publishPod(ctx, sp)
		if errors.Is(err, errStep) {
			return err
		}
		if err != nil {
			sp.failed = true
			c.fail(r, p.Key, kind, p.Revision, err)
			continue
		}
		if sp.held != "" {
			res.Held = append(res.Held, HeldPod{Deployment: p.Key, Pod: p.Name, Revision: p.Revision, Reason: sp.held})
			continue
		}
		if written {
			res.Written++
			r.log.Info("static Pod written", "deployment", p.Key.String(), "file", p.File, "revision", p.Revision)
		}
	}
	return r.cleanup(c, keep, res)
}

// publishPod installs one Pod's identity directory, values and file.
// A Pod that replaces a running revision first needs the Gate's consent
// (sp.held says why it was refused; nothing of it is written then). With
// an Identity the Pod's leaf is ensured next and the Pod's bytes carry its
// revision; a Pod whose identity fails keeps its last file. kind names
// what failed (state.ErrorIdentity, ...).
func (r *Reconciler) publishPod(ctx context.Context, sp *stagedPod) (bool, string, error) {
	p := sp.pod
	if running := r.runningRevision(p.Name); r.opts.Gate != nil && running != "" && running != p.Revision {
		u := Update{Deployment: p.Key, Pod: p.Name, Namespace: p.Namespace, From: running, To: p.Revision}
		if sp.service != nil {
			id := sp.service.ID
			u.Service = &id
		}
		if ok, why := r.opts.Gate.Admit(ctx, u); !ok {
			sp.held = why
			if sp.values != nil {
				r.pending[p.Name] = pendingValues{revision: p.Revision, values: sp.values}
			}
			if r.heldLogged[p.Name] != p.Revision+"\x00"+why {
				r.heldLogged[p.Name] = p.Revision + "\x00" + why
				r.log.Info("Pod update waits for a rollout slot: the running revision keeps serving", "deployment", p.Key.String(),
					"running", running, "revision", p.Revision, "reason", why)
			}
			return false, "", nil
		}
		delete(r.heldLogged, p.Name)
	}
	if r.opts.Identity != nil {
		annotated, _, err := r.opts.Identity.AnnotatePod(ctx, p.YAML)
		if err != nil {
			return false, state.ErrorIdentity, fmt.Errorf("pod %s: workload identity: %w", p.Name, err)
		}
		p.YAML = annotated
	} else if err := r.ensureIdentityDir(p); err != nil {
		return false, state.ErrorFile, err
	}
	if sp.values != nil {
		delete(r.loaded, p.Name) // until the complete set is written
		if err := mounts.Write(r.opts.Root, p, sp.values); err != nil {
			return false, state.ErrorSecret, err
		}
		r.loaded[p.Name] = p.Revision
		delete(r.pending, p.Name)
	}
	written, err := r.writePod(p)
	if err != nil {
		return written, state.ErrorFile, err
	}
	return written, "", nil
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
	tmp, err := paths.CreateTemp(r.manifests)
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

// isTemp reports whether name is a temporary file of writePod (or of an
// older agent, which named them after the Pod).
func isTemp(name string) bool {
	return paths.IsTemp(name) || (strings.HasPrefix(name, ".") && strings.Contains(name, ".yaml.tmp-"))
}

// cleanup removes every *.yaml the candidate does not keep and every
// leftover temporary file of the Podmin-owned directory, and the workload
// directories (values, identity) of Pods that are no longer desired.
// Nothing outside those paths is touched. A file that cannot be removed is
// recorded as that Pod's failure; the rest proceeds.
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
			err = fmt.Errorf("remove stale %s: %w", filepath.Join(r.manifests, name), err)
			if stale {
				pod := strings.TrimSuffix(name, ".yaml")
				c.fail(r, state.Key{Name: pod}, state.ErrorFile, "", err)
				keep[name] = true
			} else {
				r.log.Warn("temporary file left behind", "file", name, "err", err)
			}
			continue
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
	r.removeStaleWorkloads(c, keep)
	if r.opts.Identity != nil {
		names := make([]string, 0, len(keep))
		for file := range keep {
			names = append(names, strings.TrimSuffix(file, ".yaml"))
		}
		if err := r.opts.Identity.Forget(names); err != nil {
			r.log.Warn("cannot remove the identities of deleted Pods", "err", err)
		}
	}
	return nil
}

// removeStaleWorkloads deletes the tmpfs workload directories (values and
// identity) of Pods whose static Pod file is gone.
func (r *Reconciler) removeStaleWorkloads(c *candidate, keep map[string]bool) {
	dir := filepath.Join(r.opts.Root, filepath.FromSlash(nodepod.WorkloadsDir))
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("cannot list the workload directories", "dir", dir, "err", err)
		}
		return
	}
	for _, e := range entries {
		if keep[nodepod.FileName(e.Name())] || !e.IsDir() {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			c.fail(r, state.Key{Name: e.Name()}, state.ErrorFile, "", fmt.Errorf("remove the workload directory of deleted Pod %s: %w", e.Name(), err))
			continue
		}
		delete(r.loaded, e.Name())
		r.log.Info("workload directory of a deleted Pod removed", "pod", e.Name())
	}
}
