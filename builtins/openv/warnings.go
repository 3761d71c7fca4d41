// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package openv

import "podmin.dev/podmin/internal/manifest"

// Warning is something an operation accepted but the operator should
// know: a manifest's privileged settings or host access, or a deployment
// that nodes cannot run as committed (a NodeGroup no node serves, an image
// missing from the cluster registry, a secret missing from its provider).
type Warning struct {
	// Check is what found it: manifest, nodegroup, image or secret.
	Check string `json:"check"`
	// Subject is what it is about: a field path, a NodeGroup, an image
	// reference, or <provider>:<secret name>.
	Subject string `json:"subject"`
	// Message says what is wrong and what to do.
	Message string `json:"message"`
}

// Warning checks.
const (
	CheckManifest  = "manifest"
	CheckNodeGroup = "nodegroup"
	CheckImage     = "image"
	CheckSecret    = "secret"
)

// ManifestWarnings are an extraction's warnings as an operation reports
// them.
func ManifestWarnings(ws []manifest.Warning) []Warning {
	out := make([]Warning, 0, len(ws))
	for _, w := range ws {
		out = append(out, Warning{Check: CheckManifest, Subject: w.Field, Message: w.String()})
	}
	return out
}

// Warn shows each warning on the progress lines (standard error), where a
// recipe's and a dry run's appear too, and returns them.
func (e *Env) Warn(ws []Warning) []Warning {
	for _, w := range ws {
		e.Progressf("warning: %s", w.Message)
	}
	return ws
}
