// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/nodepod"
	"podmin.dev/podmin/internal/state"
)

// Prepuller fetches images into the node's container runtime
// (*cri.Runtime over containerd's CRI image service).
type Prepuller interface {
	// Prepull pulls images and returns the failure of each image that
	// could not be pulled (absent: pulled), or an error of the runtime as
	// a whole (ErrNoRuntime without one), which fails every image.
	Prepull(ctx context.Context, images []string) (map[string]error, error)
}

// ErrNoRuntime is a Prepuller's answer on a node without a container
// runtime to pull into (local node mode): kubelet is left to pull.
var ErrNoRuntime = errors.New("no container runtime to pre-pull into")

// DefaultPrepullTimeout bounds the pre-pull of one pass.
const DefaultPrepullTimeout = 2 * time.Minute

// prepull fetches the images the staged Pods add to the node (those their
// current files do not name yet) before the index is confirmed and any file
// changes. kubelet stops a static Pod before it starts the Pod's new
// version, so without it the new image downloads while nothing serves.
//
// A Pod that replaces a running revision and whose new images could not
// all be pulled is held: it keeps its file, values and Service, is
// reported with the pull's error (state.ErrorImage) and is tried again
// at the next poll, so an image never pushed, a damaged blob or a full
// disk leaves the running revision serving. A new Pod has nothing to
// keep: it is written, and kubelet pulls and reports as always.
func (r *Reconciler) prepull(ctx context.Context, c *candidate) {
	if r.opts.Prepull == nil {
		return
	}
	var images []string
	seen := map[string]bool{}
	added := make([][]string, len(c.pods))
	for i, sp := range c.pods {
		current := map[string]bool{}
		for _, f := range r.filesOf(sp.pod.Name, nil) {
			if b, err := os.ReadFile(filepath.Join(r.manifests, nodepod.FileName(f.name))); err == nil {
				for _, img := range pulledImages(b) {
					current[img] = true
				}
			}
		}
		for _, img := range pulledImages(sp.pod.YAML) {
			if current[img] {
				continue
			}
			added[i] = append(added[i], img)
			if !seen[img] {
				seen[img] = true
				images = append(images, img)
			}
		}
	}
	if len(images) == 0 {
		return
	}
	timeout := r.opts.PrepullTimeout
	if timeout <= 0 {
		timeout = DefaultPrepullTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	failed, err := r.opts.Prepull.Prepull(pctx, images)
	if errors.Is(err, ErrNoRuntime) {
		r.log.Debug("images not pre-pulled", "images", images, "err", err)
		return
	}
	if err != nil {
		failed = map[string]error{}
		for _, img := range images {
			failed[img] = err
		}
	}
	if len(failed) == 0 {
		r.log.Info("images pre-pulled before the Pods change", "images", images, "duration", time.Since(start).Round(time.Millisecond).String())
		return
	}
	if ctx.Err() != nil {
		return // the pass ends anyway
	}
	kept := c.pods[:0]
	for i, sp := range c.pods {
		var errs []error
		for _, img := range added[i] {
			if e := failed[img]; e != nil {
				errs = append(errs, e)
			}
		}
		running := r.runningOther(sp.pod)
		if len(errs) == 0 || running == "" {
			if len(errs) > 0 {
				r.log.Warn("images of a new Pod not pre-pulled: kubelet pulls them", "pod", sp.pod.Name, "err", errors.Join(errs...))
			}
			kept = append(kept, sp)
			continue
		}
		if sp.values != nil {
			r.pending[sp.pod.Name] = pendingValues{revision: sp.pod.Revision, values: sp.values}
		}
		c.fail(r, sp.pod.Key, state.ErrorImage, sp.pod.Revision, pullError(sp.pod.Name, sp.pod.Revision, running, errors.Join(errs...)))
	}
	clear(c.pods[len(kept):])
	c.pods = kept
}

// runningOther is the revision of a Pod of p's deployment the node runs
// that is not p's ("" when none is): a new revision whose images cannot
// be pulled leaves that one serving.
func (r *Reconciler) runningOther(p *nodepod.Pod) string {
	for _, f := range r.filesOf(p.Name, nil) {
		if f.revision != "" && f.revision != p.Revision {
			return f.revision
		}
	}
	return ""
}

// pullError says why a Pod's new revision waits and what to do.
func pullError(pod, revision, running string, err error) error {
	hint := "push the image to the cluster registry (podmin push) or deploy an image that exists; the node tries again at every poll"
	if strings.Contains(err.Error(), "no space left on device") {
		hint = "the node's disk is full: free space where the container runtime keeps images (/var/lib/containerd); the node tries again at every poll"
	}
	return fmt.Errorf("pod %s: revision %s not applied: its image cannot be pulled: %w: the running revision %s keeps serving; %s",
		pod, short(revision), err, short(running), hint)
}

// short is the first 12 characters of a revision.
func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// pulledImages lists the images of a static Pod that kubelet may pull (any
// pull policy but Never), in container order. A file that does not decode
// names none.
func pulledImages(podYAML []byte) []string {
	type container struct {
		Image           string `json:"image"`
		ImagePullPolicy string `json:"imagePullPolicy"`
	}
	var pod struct {
		Spec struct {
			InitContainers []container `json:"initContainers"`
			Containers     []container `json:"containers"`
		} `json:"spec"`
	}
	if yaml.Unmarshal(podYAML, &pod) != nil {
		return nil
	}
	var out []string
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		if c.Image != "" && c.ImagePullPolicy != "Never" {
			out = append(out, c.Image)
		}
	}
	return out
}
