// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
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
