// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"cmp"
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"podmin.dev/podmin/internal/manifest"
)

// RevisionAnnotation carries the Pod's leaf fingerprint, so kubelet
// restarts the static Pod onto coherent new files when the leaf changes.
const RevisionAnnotation = "podmin.dev/identity-revision"

// Annotate sets podmin.dev/identity-revision on a static Pod file's YAML
// and re-encodes it canonically.
func Annotate(podYAML []byte, revision string) ([]byte, error) {
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(podYAML, &pod); err != nil {
		return nil, fmt.Errorf("annotate the identity revision: %w", err)
	}
	a := maps.Clone(pod.Annotations)
	if a == nil {
		a = map[string]string{}
	}
	a[RevisionAnnotation] = revision
	pod.Annotations = a
	return manifest.CanonicalYAML(&pod)
}

// AnnotatePod is the static-Pod reconciler's hook: given a transformed
// static Pod file it ensures the Pod's identity (name, namespace and
// podmin.dev/service from the file) and returns the file annotated with
// its podmin.dev/identity-revision. Call it after the index ETag is
// confirmed and before the file is renamed into place, so kubelet sees the
// identity symlink before the Pod and restarts the Pod exactly when its
// leaf changes.
func (m *Manager) AnnotatePod(ctx context.Context, podYAML []byte) ([]byte, Identity, error) {
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(podYAML, &pod); err != nil {
		return nil, Identity{}, fmt.Errorf("workload identity: decode the static Pod: %w", err)
	}
	if m.Bundle() == nil {
		if _, err := m.Refresh(ctx); err != nil && m.Bundle() == nil {
			return nil, Identity{}, err
		}
	}
	p := Pod{Name: pod.Name, Namespace: cmp.Or(pod.Namespace, manifest.DefaultNamespace), Service: pod.Annotations[manifest.ServiceAnnotation]}
	id, err := m.Ensure(ctx, p)
	if err != nil {
		return nil, Identity{}, err
	}
	a := maps.Clone(pod.Annotations)
	if a == nil {
		a = map[string]string{}
	}
	a[RevisionAnnotation] = id.Revision
	pod.Annotations = a
	out, err := manifest.CanonicalYAML(&pod)
	if err != nil {
		return nil, Identity{}, fmt.Errorf("workload identity: encode the static Pod: %w", err)
	}
	return out, id, nil
}
