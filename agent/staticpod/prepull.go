// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/yaml"
)

// Prepuller fetches images into the node's container runtime
// (*agent.CRIRuntime over containerd's CRI image service).
type Prepuller interface {
	Prepull(ctx context.Context, images []string) error
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
// It never fails a pass: an image that cannot be fetched in time is
// logged and left to kubelet, which pulls and reports it as always.
func (r *Reconciler) prepull(ctx context.Context, c *candidate) {
	if r.opts.Prepull == nil {
		return
	}
	var images []string
	seen := map[string]bool{}
	for _, sp := range c.pods {
		current := map[string]bool{}
		if b, err := os.ReadFile(filepath.Join(r.manifests, sp.pod.File)); err == nil {
			for _, img := range pulledImages(b) {
				current[img] = true
			}
		}
		for _, img := range pulledImages(sp.pod.YAML) {
			if !current[img] && !seen[img] {
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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := r.opts.Prepull.Prepull(ctx, images)
	if errors.Is(err, ErrNoRuntime) {
		r.log.Debug("images not pre-pulled", "images", images, "err", err)
		return
	}
	if err != nil {
		r.log.Warn("images not pre-pulled: kubelet pulls them when the Pods change", "images", images, "err", err)
		return
	}
	r.log.Info("images pre-pulled before the Pods change", "images", images, "duration", time.Since(start).Round(time.Millisecond).String())
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
