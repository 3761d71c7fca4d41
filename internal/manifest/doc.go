// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package manifest owns Podmin's deployment manifest subset: it decodes a
// YAML or JSON stream holding one apps/v1 DaemonSet and at most one v1
// Service, validates it against the rules of the "Deployment Manifests"
// section of the specification, and extracts the canonical Pod and Service
// payloads that the deploy step content-addresses. It also builds the
// minimal DaemonSet used by "podmin init" and by "podmin deploy" without a
// manifest file.
//
// Extraction is pure and deterministic: the same input always yields the
// same bytes, so identical deployments reuse the same SHA-512 objects.
//
// Nodes run kubelet without an API server, so validation refuses what only
// the Kubernetes API can serve (ConfigMaps, Secrets, claims, service
// accounts and their tokens) and host paths into Podmin's own node
// directories; it returns privileged settings and host access as warnings,
// which callers must show: they are never silently accepted.
//
// The package must not do I/O (no files, object storage, registries or
// environment reads: callers inject an environment lookup), must not talk
// to a Kubernetes API, and must not know cluster layout or index formats,
// which belong to internal/state. It parses image references (one grammar,
// go-containerregistry's, with containerd's stricter rules), resolves
// shorthand beneath the cluster registry and refuses other registries, but
// never checks that an image exists in the cluster registry.
package manifest
