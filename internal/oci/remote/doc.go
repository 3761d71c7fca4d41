// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package remote pulls images from remote registries into the local OCI
// store (package oci). It is the only part of Podmin's OCI code that
// talks to a registry, with the registry login of the user's Docker
// configuration, so it lives apart: the node agent, which serves images
// from the bucket and never pulls from a registry, does not link it (nor
// the Docker credential helpers and logger it brings).
//
// It must not write to the cluster bucket: pushing is package oci's.
package remote
