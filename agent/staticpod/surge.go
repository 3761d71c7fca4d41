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
	"time"

	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/nodepod"
)

// A deployment runs one static Pod on a node, or two during a maxSurge
// rollout: kubelet runs one static Pod of a full name at a time, so the
// new revision starts under the deployment's other name (its Pod name, or
// nodepod.SecondName of it) beside the running one, and the old one stops
// once the Gate lets it go (Retire: the new Pod is ready, or the old one
// serves nothing, and the old one's endpoints were withdrawn and
// drained). The files on disk are the whole state: a pass that finds two
// files of a deployment retires one before it writes anything else, so a
// node never runs more than two Pods of a deployment, and an agent that
// restarts at any step takes up where the files say it stopped.

// podFile is one static Pod file of a deployment on the node.
type podFile struct {
	// name is the static Pod name (the file is name.yaml); revision and
	// incarnation are its podmin.dev/ annotations ("" in a file that does
	// not decode); at is its modification time.
	name, revision, incarnation string
	at                          time.Time
}

// readPodFile reads the static Pod file of name; false when there is none.
// A file that does not decode is there, of no known revision.
func (r *Reconciler) readPodFile(name string) (podFile, bool) {
	path := filepath.Join(r.manifests, nodepod.FileName(name))
	data, err := os.ReadFile(path)
	if err != nil {
		return podFile{}, false
	}
	f := podFile{name: name}
	if fi, err := os.Stat(path); err == nil {
		f.at = fi.ModTime()
	}
	var meta struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
	}
	if yaml.Unmarshal(data, &meta) == nil {
		f.revision = meta.Metadata.Annotations[nodepod.RevisionAnnotation]
		f.incarnation = meta.Metadata.Annotations[nodepod.IncarnationAnnotation]
	}
	return f, true
}

// filesOf lists the static Pod files of the deployment whose Pod is pod,
// its own name's first: the second name's too unless another deployment
// of the NodeGroup is named so (taken).
func (r *Reconciler) filesOf(pod string, taken map[string]bool) []podFile {
	var out []podFile
	if f, ok := r.readPodFile(pod); ok {
		out = append(out, f)
	}
	if second := nodepod.SecondName(pod); !taken[second] {
		if f, ok := r.readPodFile(second); ok {
			out = append(out, f)
		}
	}
	return out
}

// otherName is the deployment's static Pod name that f does not use.
func otherName(pod string, f podFile) string {
	if f.name == pod {
		return nodepod.SecondName(pod)
	}
	return pod
}

// takenNames are the Pod names of the candidate's deployments (failed
// ones included): a second name among them belongs to that deployment.
func takenNames(c *candidate) map[string]bool {
	out := map[string]bool{}
	for _, sp := range c.pods {
		out[sp.pod.Name] = true
	}
	for _, f := range c.failures {
		out[f.Pod] = true
	}
	return out
}

// plan decides what a pass does with one deployment's Pod and asks the
// Gate where it must: sp.target is the static Pod name its file is
// written to ("" for none), sp.keep the names of the files it keeps, and
// sp.held why the committed revision waits (the Gate's reason). Two files
// mean a Pod retires first; one of another revision is replaced in place
// or, under maxSurge, joined by the new revision under the other name;
// none is a new Pod. A file of the committed revision is rewritten in
// place (a renewed workload identity).
//
// Only a Step fault ends the pass (as a crash would); a retired file that
// cannot be removed is sp.planErr, the deployment's failure.
func (r *Reconciler) plan(ctx context.Context, sp *stagedPod, taken map[string]bool, res *Result) error {
	p := sp.pod
	files := r.filesOf(p.Name, taken)
	if len(files) == 2 {
		var err error
		if files, err = r.retireOne(ctx, sp, files, res); err != nil {
			return err
		}
	}
	sp.keep = sp.keep[:0]
	for _, f := range files {
		sp.keep = append(sp.keep, f.name)
	}
	if len(files) == 2 {
		// The Gate keeps both for now: the committed revision's file,
		// if either is, is still refreshed in place.
		for _, f := range files {
			if f.revision == p.Revision {
				sp.target = f.name
				return nil
			}
		}
		sp.held = sp.retireWhy
		return nil
	}
	if len(files) == 0 {
		sp.target = p.Name
		return nil
	}
	running := files[0]
	if running.revision == p.Revision || running.revision == "" || r.opts.Gate == nil {
		sp.target = running.name
		return nil
	}
	u := r.update(sp, running)
	if sp.surges {
		u.Kind = Surge
		if taken[nodepod.SecondName(p.Name)] {
			sp.planErr = fmt.Errorf("pod %s: revision %s cannot start beside the running revision %s: its second Pod's name %s is another deployment's of this NodeGroup: rename one of them, or deploy this one without maxSurge",
				p.Name, short(p.Revision), short(running.revision), nodepod.SecondName(p.Name))
			return nil
		}
	}
	ok, why := r.opts.Gate.Admit(ctx, u)
	if !ok {
		sp.held = why
		r.logHeld(u, why)
		return nil
	}
	delete(r.heldLogged, p.Name)
	if u.Kind == Surge {
		sp.target = otherName(p.Name, running)
		sp.keep = append(sp.keep, sp.target)
		r.log.Info("starting the new revision beside the running one (maxSurge)", "deployment", p.Key.String(),
			"running", running.name, "revision", p.Revision, "pod", sp.target)
		return nil
	}
	sp.target = running.name
	return nil
}

// update is the Gate's question about replacing running with sp's
// revision.
func (r *Reconciler) update(sp *stagedPod, running podFile) Update {
	p := sp.pod
	u := Update{Deployment: p.Key, Pod: p.Name, Namespace: p.Namespace, From: running.revision, To: p.Revision,
		Static: running.name, FromIncarnation: running.incarnation}
	if sp.service != nil {
		id := sp.service.ID
		u.Service = &id
	}
	return u
}

// retireOne asks the Gate to stop one of a deployment's two Pods and
// removes its file when it may, returning the files that remain. The
// Pod of another revision than the committed one goes; when neither is
// the committed one, the newer goes (it never took over), or else the
// older, whichever the Gate lets go first (it lets a Pod go once the
// other is ready, or at once when it serves nothing). Without a Gate the
// Pod goes at once, as updates do.
func (r *Reconciler) retireOne(ctx context.Context, sp *stagedPod, files []podFile, res *Result) ([]podFile, error) {
	p := sp.pod
	a, b := files[0], files[1]
	var order [][2]podFile // {stop, keep}
	switch {
	case a.revision == p.Revision:
		order = [][2]podFile{{b, a}}
	case b.revision == p.Revision:
		order = [][2]podFile{{a, b}}
	case b.at.Before(a.at):
		order = [][2]podFile{{a, b}, {b, a}}
	default:
		order = [][2]podFile{{b, a}, {a, b}}
	}
	for _, o := range order {
		stop, keep := o[0], o[1]
		if r.opts.Gate != nil {
			u := r.update(sp, stop)
			u.Kind, u.Keep, u.KeepIncarnation = Retire, keep.revision, keep.incarnation
			ok, why := r.opts.Gate.Admit(ctx, u)
			if !ok {
				if sp.retireWhy == "" {
					sp.retireWhy = why
					r.logHeld(u, why)
				}
				continue
			}
		}
		if err := r.removeRetired(stop); err != nil {
			if errors.Is(err, errStep) {
				return nil, err
			}
			sp.planErr = err
			return files, nil
		}
		res.Removed++
		sp.retireWhy = ""
		delete(r.heldLogged, p.Name)
		return []podFile{keep}, nil
	}
	return files, nil
}

// removeRetired removes the file of a retired Pod; kubelet stops the Pod
// within its grace period. The removal is remembered like a deleted
// Pod's, so a Pod written under the same name soon after waits for it to
// stop.
func (r *Reconciler) removeRetired(f podFile) error {
	path := filepath.Join(r.manifests, nodepod.FileName(f.name))
	if err := r.step(StepCleanup, nodepod.FileName(f.name)); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s, the file of the deployment's Pod the other one replaces: %w: both keep running until it can be removed; check the node's static Pod directory", path, err)
	}
	r.unsynced = true
	if f.revision != "" {
		r.deleted[f.name] = deletedPod{revision: f.revision, at: time.Now()}
	}
	r.log.Info("static Pod file removed: the deployment's other Pod serves in its place", "file", nodepod.FileName(f.name), "revision", f.revision)
	return nil
}

// logHeld logs a Gate's refusal once per revision and reason.
func (r *Reconciler) logHeld(u Update, why string) {
	key := fmt.Sprint(u.Kind, "\x00", u.From, "\x00", u.To, "\x00", why)
	if r.heldLogged[u.Pod] == key {
		return
	}
	r.heldLogged[u.Pod] = key
	msg := "Pod update waits for a rollout slot: the running revision keeps serving"
	if u.Kind == Retire {
		msg = "the deployment's second Pod keeps running until the Gate lets it go"
	}
	r.log.Info(msg, "deployment", u.Deployment.String(), "kind", u.Kind.String(), "running", u.From, "revision", u.To, "reason", why)
}

// deploymentFiles summarizes a deployment's files for its state: the
// applied revision (the committed one's file if any, else the newest
// file's), when that file was written, and the revision of the other
// Pod still running beside it ("" when there is one Pod or none).
func deploymentFiles(files []podFile, desired string) (applied string, at time.Time, retiring string) {
	switch len(files) {
	case 0:
		return "", time.Time{}, ""
	case 1:
		return files[0].revision, files[0].at, ""
	}
	cur, other := files[0], files[1]
	if other.revision == desired && cur.revision != desired || cur.revision != desired && other.at.After(cur.at) {
		cur, other = other, cur
	}
	return cur.revision, cur.at, other.revision
}
