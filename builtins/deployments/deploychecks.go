// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package deployments

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"podmin.dev/podmin/builtins/openv"
	"podmin.dev/podmin/internal/contexts"
	"podmin.dev/podmin/internal/manifest"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/oci"
	"podmin.dev/podmin/internal/secrets"
	"podmin.dev/podmin/internal/state"
)

// ErrDeployChecks reports a deploy with Strict whose checks found
// something that would keep the deployment from running, or could not
// tell: nothing was written.
var ErrDeployChecks = errors.New("the deployment may not run as committed")

// deployChecks finds, with at most one read each, what would keep the
// deployment ex from ever running once committed: its NodeGroup missing
// from the cluster configuration setup publishes (one GET), an image
// missing from its repository's index in the cluster registry (one GET
// per repository), a secret missing from its provider (one listing per
// provider). A check whose read fails proves nothing either way: it says
// it could not check.
func deployChecks(ctx context.Context, e *openv.Env, c contexts.Context, store objstore.Store, ex *manifest.Result) []openv.Warning {
	var out []openv.Warning
	if w, ok := checkNodeGroup(ctx, c, store, ex.NodeGroup); !ok {
		out = append(out, w)
	}
	out = append(out, checkImages(ctx, store, ex)...)
	return append(out, checkSecrets(ctx, e, c, ex)...)
}

func checkNodeGroup(ctx context.Context, c contexts.Context, store objstore.Store, ng string) (openv.Warning, bool) {
	w := openv.Warning{Check: openv.CheckNodeGroup, Subject: ng}
	obj, err := store.Get(ctx, state.TFVarsPath, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		w.Message = fmt.Sprintf("cluster %s has no configuration (%s) in its bucket: setup never ran, so no node runs NodeGroup %s: run \"podmin setup\" with --nodegroup %s", c.Cluster, state.TFVarsPath, ng, ng)
		return w, false
	}
	var sizes map[string]int
	var settings state.ClusterSettings
	if err == nil {
		if settings, err = state.ParseClusterSettings(obj.Data); err == nil {
			sizes, err = state.NodeGroupSizes(obj.Data)
		}
	} else {
		err = fmt.Errorf("read the cluster configuration %s: %w", state.TFVarsPath, err)
	}
	switch {
	case err != nil:
		w.Message = fmt.Sprintf("could not check that NodeGroup %s is configured: %v", ng, err)
		return w, false
	case settings.Cluster != c.Cluster:
		w.Message = fmt.Sprintf("the cluster configuration %s in bucket %s belongs to cluster %q, not %s, so whether NodeGroup %s runs is unknown: each cluster needs a bucket of its own", state.TFVarsPath, c.Bucket, settings.Cluster, c.Cluster, ng)
		return w, false
	}
	if _, ok := sizes[ng]; ok {
		return w, true
	}
	names := make([]string, 0, len(sizes))
	for n := range sizes {
		names = append(names, n)
	}
	sort.Strings(names)
	configured := "it has none"
	if len(names) > 0 {
		configured = "its NodeGroups are " + strings.Join(names, ", ")
	}
	w.Message = fmt.Sprintf("NodeGroup %s is not configured in cluster %s (%s), so no node runs it: check the name, or run \"podmin setup\" with --nodegroup %s", ng, c.Cluster, configured, ng)
	return w, false
}

// clusterImage is an image of the Pod in the cluster registry.
type clusterImage struct {
	ref    string // as the Pod carries it
	layout state.OCILayout
	parsed manifest.ImageRef
}

// checkImages reads the index of each repository the Pod's images are in,
// once, and checks that it names each image's digest, else its tag.
func checkImages(ctx context.Context, store objstore.Store, ex *manifest.Result) []openv.Warning {
	var images []clusterImage
	for _, ct := range slices.Concat(ex.Pod.Spec.InitContainers, ex.Pod.Spec.Containers) {
		if slices.ContainsFunc(images, func(i clusterImage) bool { return i.ref == ct.Image }) {
			continue
		}
		r, err := manifest.ParseImageRef(ct.Image)
		if err != nil || r.Domain != manifest.ClusterRegistry {
			continue // extraction allows only cluster references
		}
		l, err := imageLayout(r.Path)
		if err != nil {
			continue
		}
		images = append(images, clusterImage{ref: ct.Image, layout: l, parsed: r})
	}
	indexes := map[string]*v1.IndexManifest{}
	problems := map[string]error{}
	var out []openv.Warning
	for _, img := range images {
		root := img.layout.Root()
		if _, ok := indexes[root]; !ok && problems[root] == nil {
			indexes[root], problems[root] = readImageIndex(ctx, store, img.layout)
		}
		if msg := imageProblem(img, indexes[root], problems[root]); msg != "" {
			out = append(out, openv.Warning{Check: openv.CheckImage, Subject: img.ref, Message: msg})
		}
	}
	return out
}

// imageLayout is the OCI layout of a cluster registry path: apps/<repo>
// or mirror/<upstream>/<repo>.
func imageLayout(p string) (state.OCILayout, error) {
	if repo, ok := strings.CutPrefix(p, state.AppsPrefix); ok {
		return state.AppLayout(repo)
	}
	if rest, ok := strings.CutPrefix(p, state.MirrorPrefix); ok {
		upstream, repo, _ := strings.Cut(rest, "/")
		return state.MirrorLayout(upstream, repo)
	}
	return state.OCILayout{}, fmt.Errorf("%s is in neither %s nor %s", p, state.AppsPrefix, state.MirrorPrefix)
}

// errNoIndex marks a repository without an index.json.
var errNoIndex = errors.New("no index")

func readImageIndex(ctx context.Context, store objstore.Store, l state.OCILayout) (*v1.IndexManifest, error) {
	obj, err := store.Get(ctx, l.IndexFile(), objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, errNoIndex
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", l.IndexFile(), err)
	}
	return oci.ParseIndex(obj.Data)
}

// imageProblem says why nodes cannot pull img, or "" when the index
// names it.
func imageProblem(img clusterImage, idx *v1.IndexManifest, err error) string {
	var missing string
	switch {
	case errors.Is(err, errNoIndex):
		missing = fmt.Sprintf("the bucket has no %s", img.layout.IndexFile())
	case err != nil:
		return fmt.Sprintf("could not check that image %s is in the cluster registry: %v", img.ref, err)
	case img.parsed.Digest != "":
		h, herr := v1.NewHash(img.parsed.Digest)
		if herr == nil {
			if _, ok := oci.FindDigest(idx, h); ok {
				return ""
			}
		}
		missing = fmt.Sprintf("%s names no digest %s", img.layout.IndexFile(), img.parsed.Digest)
	default:
		tag := img.parsed.Tag
		if tag == "" {
			tag = "latest"
		}
		if _, ok := oci.FindTag(idx, tag); ok {
			return ""
		}
		missing = fmt.Sprintf("%s names no tag %s", img.layout.IndexFile(), tag)
	}
	return fmt.Sprintf("image %s is not in the cluster registry (%s), so nodes cannot pull it: %s", img.ref, missing, pushAdvice(img.parsed))
}

// pushAdvice is the command that puts an image into the cluster registry.
func pushAdvice(r manifest.ImageRef) string {
	repo, ok := strings.CutPrefix(r.Path, state.AppsPrefix)
	if !ok {
		return "Podmin mirrors its platform images itself: run \"podmin setup\" (the pause image) or \"podmin install cloudflared\""
	}
	if r.Digest != "" {
		return fmt.Sprintf("push the image with that digest first (\"podmin push SOURCE %s\")", repo)
	}
	short := repo + ":" + r.Tag
	if r.Tag == "" {
		short = repo + ":latest"
	}
	return fmt.Sprintf("run \"podmin push %s\" for an image built with \"podmin build -t %s\", or \"podmin push SOURCE %s\" to copy one from another registry", short, short, short)
}

// checkSecrets lists, once per provider, the secrets of the Pod that its
// podmin.dev/<provider> annotations name, and reports each one missing or
// scheduled for deletion.
func checkSecrets(ctx context.Context, e *openv.Env, c contexts.Context, ex *manifest.Result) []openv.Warning {
	var out []openv.Warning
	pod := ex.Pod
	for _, provider := range manifest.SecretsProviders() {
		value, ok := pod.Annotations["podmin.dev/"+provider]
		if !ok {
			continue
		}
		keys, err := manifest.ParseSecretKeys(value)
		if err != nil {
			continue // extraction refused it already
		}
		found, err := podSecrets(ctx, e, c, provider, pod.Namespace, pod.Name)
		for _, k := range keys {
			n, nerr := secrets.PodSecret(c.Cluster, pod.Namespace, pod.Name, k)
			if nerr != nil {
				continue
			}
			w := openv.Warning{Check: openv.CheckSecret, Subject: provider + ":" + n.String()}
			entry, exists := found[k]
			switch {
			case err != nil:
				w.Message = fmt.Sprintf("could not check that secret %s of Pod %s/%s exists: %v", k, pod.Namespace, pod.Name, err)
			case !exists:
				w.Message = fmt.Sprintf("secret %s of Pod %s/%s is not in the secrets provider %s, so the node cannot mount it and the Pod never starts: run \"podmin secret create %s\"", k, pod.Namespace, pod.Name, provider, secretCommand(c, provider, pod.Namespace, pod.Name, k))
			case !entry.DeletionScheduled.IsZero():
				w.Message = fmt.Sprintf("secret %s of Pod %s/%s is scheduled for deletion in %s, so the node cannot mount it: run \"podmin secret restore %s\"", k, pod.Namespace, pod.Name, provider, secretCommand(c, provider, pod.Namespace, pod.Name, k))
			default:
				continue
			}
			out = append(out, w)
		}
	}
	return out
}

// podSecrets lists the secrets of one Pod in a provider, by key.
func podSecrets(ctx context.Context, e *openv.Env, c contexts.Context, provider, namespace, pod string) (map[string]secrets.Entry, error) {
	s, err := e.OpenSecrets(ctx, c, provider)
	if err != nil {
		return nil, err
	}
	list, err := s.List(ctx, c.Cluster, secrets.Filter{Namespace: namespace, Pod: pod})
	if err != nil {
		return nil, fmt.Errorf("list the secrets of Pod %s/%s in %s: %w", namespace, pod, provider, err)
	}
	found := map[string]secrets.Entry{}
	for _, en := range list {
		found[en.Key] = en
	}
	return found, nil
}

// secretCommand is the arguments of "podmin secret create" for one key.
func secretCommand(c contexts.Context, provider, namespace, pod, key string) string {
	cmd := key + " --for " + pod
	if namespace != manifest.DefaultNamespace {
		cmd += " --namespace " + namespace
	}
	if provider != c.SecretsProvider {
		cmd += " --provider " + provider
	}
	return cmd
}
