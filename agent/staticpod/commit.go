// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"podmin.dev/podmin/agent/mounts"
	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/paths"
	"podmin.dev/podmin/internal/state"
)

// publish commits the staged Pods, removes stale files, and then syncs
// the directory once for all of them. Pods go in batches of
// publishBatch: each Pod's identity and values are installed and its new
// file written to a temporary file; the batch's temporary files are
// synced together (their data is durable before any of them is renamed);
// then each is renamed into place, one atomic rename at a time. Values
// and the identity directory therefore exist before kubelet can see the
// Pod. A Pod whose values or file cannot be written keeps its last valid
// file and is recorded in c.failures; every other Pod proceeds. Before
// its batch is prepared, each Pod's plan is made one Pod at a time
// (surge.go): the Gate is asked before a Pod replaces a running revision,
// starts beside it, or stops as the second Pod of its deployment; a held
// Pod keeps its files and values (res.Held). Only a problem with the
// directory itself (or a Step fault) ends the pass.
func (r *Reconciler) publish(ctx context.Context, c *candidate, res *Result) error {
	if err := os.MkdirAll(r.manifests, 0o755); err != nil {
		return fmt.Errorf("create %s: %w: check the node root", r.manifests, err)
	}
	taken := takenNames(c)
	k := keepSet{files: map[string]bool{}, pods: map[string]bool{}}
	for _, f := range c.failures {
		k.keepFailed(f.Pod, taken)
	}
	for start := 0; start < len(c.pods); start += publishBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch := c.pods[start:min(start+publishBatch, len(c.pods))]
		for i := range batch {
			sp := &batch[i]
			if err := r.plan(ctx, sp, taken, res); err != nil {
				return err
			}
			if sp.held != "" && sp.target == "" {
				res.Held = append(res.Held, HeldPod{Deployment: sp.pod.Key, Pod: sp.pod.Name, Revision: sp.pod.Revision, Reason: sp.held})
				if sp.values != nil {
					// Values are read once per revision, also while it waits.
					r.pending[sp.pod.Name] = pendingValues{revision: sp.pod.Revision, values: sp.values}
				}
			}
			if len(sp.keep) == 2 {
				res.Retiring = append(res.Retiring, HeldPod{Deployment: sp.pod.Key, Pod: sp.pod.Name, Revision: sp.pod.Revision, Reason: sp.retireWhy})
			}
		}
		prepared := make([]*pendingFile, len(batch))
		kinds := make([]string, len(batch))
		errs := make([]error, len(batch))
		parallel(len(batch), func(i int) {
			if sp := &batch[i]; sp.target != "" && sp.planErr == nil {
				prepared[i], kinds[i], errs[i] = r.preparePod(ctx, sp)
			}
		})
		var files []*pendingFile
		for i := range batch {
			sp := &batch[i]
			k.pods[sp.pod.Name] = true
			for _, name := range sp.keep {
				k.files[nodepod.FileName(name)] = true
			}
			if sp.target != "" {
				k.files[nodepod.FileName(sp.target)] = true
			}
			switch sp.valuesWritten {
			case valuesInstalled:
				r.loaded[sp.pod.Name] = sp.pod.Revision
				delete(r.pending, sp.pod.Name)
			case valuesFailed:
				delete(r.loaded, sp.pod.Name)
			}
			if sp.planErr != nil {
				errs[i], kinds[i] = sp.planErr, state.ErrorFile
			}
			if errs[i] != nil {
				sp.failed = true
				c.fail(r, sp.pod.Key, kinds[i], sp.pod.Revision, errs[i])
				continue
			}
			if prepared[i] != nil {
				files = append(files, prepared[i])
			}
		}
		syncFiles(files)
		if err := r.renameFiles(ctx, c, files, res); err != nil {
			return err
		}
	}
	if err := r.cleanup(c, k, res); err != nil {
		return err
	}
	return r.syncManifests()
}

// keepSet is what a pass keeps: static Pod files by file name, and the
// deployments' Pod names, whose workload directories stay.
type keepSet struct {
	files, pods map[string]bool
}

// keepFailed keeps everything a deployment kept at its last valid state
// may have: its files under both names and its workload directory.
func (k keepSet) keepFailed(pod string, taken map[string]bool) {
	k.files[nodepod.FileName(pod)] = true
	k.pods[pod] = true
	if second := nodepod.SecondName(pod); !taken[second] {
		k.files[nodepod.FileName(second)] = true
	}
}

// syncManifests makes every rename and removal in the static Pod
// directory durable with one sync of the directory, when there is any
// not yet synced (also one left by an earlier pass or process).
func (r *Reconciler) syncManifests() error {
	if !r.unsynced {
		return nil
	}
	if err := r.step(StepSync, ""); err != nil {
		return err
	}
	if err := paths.SyncDir(r.manifests); err != nil {
		return err
	}
	r.unsynced = false
	return nil
}

// preparePod installs one Pod's identity directory and values and writes
// its file to a temporary file, returning nil when the file already has
// exactly these bytes. It runs concurrently for the Pods of a batch, so
// it touches no Reconciler state: what became of the values is left in
// sp for publish to record. With an Identity the Pod's leaf is ensured first
// and the Pod's bytes carry its revision; a Pod whose identity fails keeps
// its last file. kind names what failed (state.ErrorIdentity, ...).
func (r *Reconciler) preparePod(ctx context.Context, sp *stagedPod) (*pendingFile, string, error) {
	p := sp.pod
	if r.opts.Identity != nil {
		annotated, _, err := r.opts.Identity.AnnotatePod(ctx, p.YAML)
		if err != nil {
			return nil, state.ErrorIdentity, fmt.Errorf("pod %s: workload identity: %w", p.Name, err)
		}
		p.YAML = annotated
	} else if err := r.ensureIdentityDir(p); err != nil {
		return nil, state.ErrorFile, err
	}
	if sp.values != nil {
		// Until the complete set is written, no revision's values count
		// as installed.
		sp.valuesWritten = valuesFailed
		if err := mounts.Write(r.opts.Root, p, sp.values); err != nil {
			return nil, state.ErrorSecret, err
		}
		sp.valuesWritten = valuesInstalled
	}
	if err := r.checkHostPaths(p); err != nil {
		return nil, state.ErrorFile, err
	}
	if sp.target != p.Name {
		// The deployment's second Pod: its own name for kubelet, the
		// deployment's identity, values and workload directory.
		renamed, err := nodepod.Rename(p.YAML, sp.target)
		if err != nil {
			return nil, state.ErrorFile, fmt.Errorf("pod %s: %w", p.Name, err)
		}
		p.YAML, p.File = renamed, nodepod.FileName(sp.target)
	}
	f, err := r.writeTemp(sp)
	if err != nil {
		return nil, state.ErrorFile, err
	}
	return f, "", nil
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
func (r *Reconciler) cleanup(c *candidate, k keepSet, res *Result) error {
	keep := k.files
	entries, err := os.ReadDir(r.manifests)
	if err != nil {
		return fmt.Errorf("read %s: %w", r.manifests, err)
	}
	for _, e := range entries {
		name := e.Name()
		stale := e.Type().IsRegular() && strings.HasSuffix(name, ".yaml") && !strings.HasPrefix(name, ".") && !keep[name]
		if !stale && !(e.Type().IsRegular() && isTemp(name)) {
			continue
		}
		if err := r.step(StepCleanup, name); err != nil {
			return err
		}
		var ran string
		if stale {
			f, _ := r.readPodFile(strings.TrimSuffix(name, ".yaml"))
			ran = f.revision
		}
		if err := os.Remove(filepath.Join(r.manifests, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			err = fmt.Errorf("remove stale %s: %w", filepath.Join(r.manifests, name), err)
			if stale {
				pod := strings.TrimSuffix(name, ".yaml")
				c.fail(r, state.Key{Name: pod}, state.ErrorFile, "", err)
				keep[name] = true
				// The file may be a deployment's second Pod: its
				// workload directory is the deployment's.
				k.pods[pod] = true
				k.pods[nodepod.FirstName(pod)] = true
			} else {
				r.log.Warn("temporary file left behind", "file", name, "err", err)
			}
			continue
		}
		r.unsynced = true
		if stale {
			res.Removed++
			if ran != "" {
				r.deleted[strings.TrimSuffix(name, ".yaml")] = deletedPod{revision: ran, at: time.Now()}
			}
			r.log.Info("stale static Pod removed", "file", name)
		}
	}
	r.removeStaleWorkloads(c, k.pods)
	for pod, d := range r.deleted {
		if time.Since(d.at) > r.stopTimeout() {
			delete(r.deleted, pod) // long stopped, or never to be seen stopping
		}
	}
	return nil
}

// removeStaleWorkloads deletes the tmpfs workload directories (values and
// identity) of Pods no deployment keeps (keep holds the deployments' Pod
// names, whichever name their static Pods run under), and with them everything
// the agent remembers of those Pods, in one place: the identity manager
// forgets its leaves (and removes their files) first, then the directories
// go, then the record of their loaded values. Nothing remembered of a
// deleted Pod can then vouch for files of a Pod of the same name deployed
// later.
func (r *Reconciler) removeStaleWorkloads(c *candidate, keep map[string]bool) {
	if r.opts.Identity != nil {
		names := make([]string, 0, len(keep))
		for pod := range keep {
			names = append(names, pod)
		}
		if err := r.opts.Identity.Forget(names); err != nil {
			r.log.Warn("cannot remove the identities of deleted Pods", "err", err)
		}
	}
	for pod := range r.loaded {
		if !keep[pod] {
			delete(r.loaded, pod)
		}
	}
	dir := filepath.Join(r.opts.Root, filepath.FromSlash(nodepod.WorkloadsDir))
	entries, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("cannot list the workload directories", "dir", dir, "err", err)
		}
		return
	}
	for _, e := range entries {
		if keep[e.Name()] || !e.IsDir() {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			c.fail(r, state.Key{Name: e.Name()}, state.ErrorFile, "", fmt.Errorf("remove the workload directory of deleted Pod %s: %w", e.Name(), err))
			continue
		}
		r.log.Info("workload directory of a deleted Pod removed", "pod", e.Name())
	}
}

// checkHostPaths makes sure every host directory Podmin mounts into the
// Pod exists before its file is published: kubelet refuses a hostPath
// volume of type Directory whose path is missing, and retries it forever.
func (r *Reconciler) checkHostPaths(p *nodepod.Pod) error {
	dirs := []string{p.IdentityHostDir}
	for _, m := range p.Mounts {
		dirs = append(dirs, m.HostDir)
	}
	for _, d := range dirs {
		path := filepath.Join(r.opts.Root, filepath.FromSlash(d))
		fi, err := os.Stat(path)
		if err == nil && !fi.IsDir() {
			err = fmt.Errorf("it is a %s, not a directory", fi.Mode().Type())
		}
		if err != nil {
			return fmt.Errorf("pod %s: host directory %s of its hostPath volume is not in place: %w: kept its last file; check the node's /run", p.Name, path, err)
		}
	}
	return nil
}
