// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	agentregistry "podmin.dev/podmin/agent/registry"
	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/objstore/local"
)

// TestShorthandImagesReachTheNodeFile follows an image from a real upstream
// registry to a node: push copies it into the cluster bucket, a manifest
// names it by shorthand, deploy commits the resolved reference, the agent's
// reconciler writes it into the node's static Pod file, and the agent's
// registry serves exactly that reference.
func TestShorthandImagesReachTheNodeFile(t *testing.T) {
	ctx := t.Context()
	upstream := httptest.NewServer(ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(upstream.Close)
	host := strings.TrimPrefix(upstream.URL, "http://")
	digests := map[string]v1.Hash{}
	for _, ref := range []string{"team/web:v1", "tools/migrate:v2"} {
		idx, err := random.Index(64, 1, 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.WriteIndex(parseRef(t, host+"/"+ref), idx, remote.WithContext(ctx)); err != nil {
			t.Fatal(err)
		}
		digests[ref], _ = idx.Digest()
	}

	c := newCLI(t)
	bucket := c.connectLocal()
	if out := c.ok("push", host+"/team/web:v1"); out != "registry.podmin.internal/apps/team/web:v1\n" {
		t.Fatalf("push printed %q", out)
	}
	if out := c.ok("push", host+"/tools/migrate:v2", "tools/migrate:v2"); out != "registry.podmin.internal/apps/tools/migrate:v2\n" {
		t.Fatalf("push printed %q", out)
	}

	const ds = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      nodeSelector:
        podmin.dev/nodegroup: workers
      initContainers:
      - name: migrate
        image: tools/migrate:v2
      containers:
      - name: web
        image: IMAGE
`
	// An image outside the cluster registry is refused with the field,
	// the image and the command that fixes it, and nothing is committed.
	foreign := writeFile(t, c.root, "foreign.yaml", strings.Replace(ds, "IMAGE", "docker.io/library/nginx:1.27", 1))
	want := `DaemonSet spec.template.spec.containers[0].image: "docker.io/library/nginx:1.27" is not in the cluster registry, the only one nodes pull from: run "podmin push docker.io/library/nginx:1.27", then use the reference it prints, registry.podmin.internal/apps/library/nginx:1.27`
	c.fails(1, want, "validate", "-f", foreign)
	c.fails(1, want, "deploy", "web", "-g", "workers", "-f", foreign)
	if ix := c.index(bucket); ix.Len() != 0 {
		t.Fatalf("a refused deploy committed %v", ix.Items())
	}

	file := writeFile(t, c.root, "web.yaml", strings.Replace(ds, "IMAGE", "team/web:v1", 1))
	c.ok("deploy", "web", "-g", "workers", "-f", file)

	root := filepath.Join(c.root, "node")
	r, err := staticpod.New(staticpod.Options{Store: local.Open(bucket), Cluster: "demo", NodeGroup: "workers", Root: root})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	nodeFile := filepath.Join(r.ManifestsDir(), "web.yaml")
	b, err := os.ReadFile(nodeFile)
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(b, &pod); err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Containers[0].Image; got != "registry.podmin.internal/apps/team/web:v1" {
		t.Errorf("%s: container image %q", nodeFile, got)
	}
	if got := pod.Spec.InitContainers[0].Image; got != "registry.podmin.internal/apps/tools/migrate:v2" {
		t.Errorf("%s: init container image %q", nodeFile, got)
	}

	// The node's registry resolves the references the file holds to the
	// upstream indexes.
	node := httptest.NewServer(agentregistry.New(agentregistry.LocalObjects(local.Open(bucket))))
	t.Cleanup(node.Close)
	nodeHost := strings.TrimPrefix(node.URL, "http://")
	for _, c := range append(pod.Spec.InitContainers, pod.Spec.Containers...) {
		ref := strings.Replace(c.Image, "registry.podmin.internal", nodeHost, 1)
		desc, err := remote.Head(parseRef(t, ref), remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("the node registry does not serve %s: %v", c.Image, err)
		}
		short := strings.TrimPrefix(c.Image, "registry.podmin.internal/apps/")
		if desc.Digest != digests[short] {
			t.Errorf("%s resolves to %s, want the pushed %s", c.Image, desc.Digest, digests[short])
		}
	}
}

func parseRef(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	return ref
}
