// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package nodepod is the node transformation: it turns one committed
// deployment (its verified Pod payload and the digests of its Pod and
// Service payloads) into the exact static Pod file a node writes, and says
// which secret and configuration values the node must mount for it. The
// agent and "podmin preview" both call it, so a preview is byte-identical to
// what a node publishes.
//
// Paths inside the Pod file are always node paths (/run/podmin/...): a
// relocated agent root (PODMIN_ROOT) changes where the agent writes, never
// what the Pod says. Secret values of one provider live in
// /run/podmin/workloads/<pod>/secrets/<provider>/<key>, inside the
// static-Pod reconciler's /run/podmin/workloads tree, and are mounted
// read-only at /var/run/podmin/<provider>/<key> into every container of that
// Pod only. Static-Pod file names use the Pod name alone, so per-Pod host
// directories need no namespace either.
//
// It does no I/O: it must not read stores or secrets or touch the
// filesystem.
package nodepod
