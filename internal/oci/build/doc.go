// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package build is Podmin's daemonless image builder for the packaging
// subset of the Containerfile language: one FROM (with ARG expansion,
// including TARGETOS, TARGETARCH, TARGETVARIANT and TARGETPLATFORM), ARG,
// ENV, LABEL, WORKDIR, COPY (--chown, --chmod, globs, .dockerignore),
// ENTRYPOINT and CMD. It assembles layers from the build context without
// running anything, so it needs no container runtime.
//
// Everything that would execute code in the image (RUN), fetch or unpack
// implicitly (ADD), or combine stages is rejected with an error that says
// what to do instead. Layers are reproducible: entries are sorted and
// every timestamp is the Unix epoch, so one context builds one digest.
// It must not write anywhere; storing the result is the caller's job.
package build
