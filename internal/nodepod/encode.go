// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package nodepod

import (
	corev1 "k8s.io/api/core/v1"

	"podmin.dev/podmin/internal/manifest"
)

// encode writes the Pod in the payloads' own canonical style (sorted keys,
// no status, no nulls, empty objects kept), so equal Pods are equal bytes
// and an unchanged Pod is never rewritten.
func encode(pod *corev1.Pod) ([]byte, error) { return manifest.CanonicalYAML(pod) }
