// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package staticpod

import (
	"slices"
	"testing"
)

func TestPulledImages(t *testing.T) {
	pod := []byte(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  initContainers:
  - {name: init, image: r/init:v1, imagePullPolicy: IfNotPresent}
  containers:
  - {name: web, image: r/web:v1, imagePullPolicy: Always}
  - {name: side, image: r/side:v1}
  - {name: local, image: r/local:v1, imagePullPolicy: Never}
`)
	if got := pulledImages(pod); !slices.Equal(got, []string{"r/init:v1", "r/web:v1", "r/side:v1"}) {
		t.Fatalf("pulledImages = %q", got)
	}
	if got := pulledImages([]byte("{not yaml")); got != nil {
		t.Fatalf("an undecodable file names %q", got)
	}
}
