// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/pki"
	"podmin.dev/podmin/internal/secrets"
	localsecrets "podmin.dev/podmin/internal/secrets/local"
)

const podYAML = `apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: product
  annotations:
    podmin.dev/revision: abc123
    podmin.dev/service: frontend
spec:
  containers:
  - name: app
    image: registry.podmin.internal/apps/web:v1
`

// TestLocalNodeAnnotatePod is local node mode end to end: the workload CA
// key in the local secrets store, the CA state in a local bucket, and the
// identity files under the agent's node root, replacing the placeholder
// directory the static-Pod reconciler makes for kubelet.
func TestLocalNodeAnnotatePod(t *testing.T) {
	ctx := context.Background()
	store := localsecrets.New(filepath.Join(t.TempDir(), "secrets"))
	name, _ := secrets.InternalSecret("demo", secrets.WorkloadCAKey)
	v, err := pki.GenerateWorkloadKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Create(ctx, name, secrets.Value(v)); err != nil {
		t.Fatal(err)
	}
	key, err := ReadKey(ctx, store, "demo")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	placeholder := filepath.Join(root, "run/podmin/workloads/web/identity")
	if err := os.MkdirAll(placeholder, 0o755); err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: t0}
	m := newManager(t, agentOpts{store: newBucket(t), key: key, clock: clk, root: root})
	out, id, err := m.AnnotatePod(ctx, []byte(podYAML)) // refreshes on first use
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(out, &pod); err != nil {
		t.Fatal(err)
	}
	leaf := currentLeaf(t, m, "web")
	if pod.Annotations[RevisionAnnotation] != pki.Fingerprint(leaf) || id.Revision != pki.Fingerprint(leaf) {
		t.Fatalf("annotation %q, leaf %s", pod.Annotations[RevisionAnnotation], pki.Fingerprint(leaf))
	}
	if pod.Annotations["podmin.dev/revision"] != "abc123" || leaf.DNSNames[0] != "frontend.product.svc.cluster.local" {
		t.Fatalf("annotations %v names %v", pod.Annotations, leaf.DNSNames)
	}
	if fi, err := os.Lstat(placeholder); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("placeholder not replaced by the identity link: %v", err)
	}
	again, _, err := m.AnnotatePod(ctx, []byte(podYAML))
	if err != nil || !bytes.Equal(again, out) {
		t.Fatalf("unchanged leaf changed the Pod file: %v", err)
	}
	clk.Add(pki.LeafLifetime - pki.RenewBefore + DefaultRestartWindow)
	renewed, _, err := m.AnnotatePod(ctx, []byte(podYAML))
	if err != nil || bytes.Equal(renewed, out) {
		t.Fatalf("renewed leaf kept the Pod file: %v", err)
	}
}
