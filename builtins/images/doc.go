// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package images is the images family: build and pull into the local
// image store, and push from it into the cluster registry in the bucket.
// The OCI work itself lives in internal/oci.
//
// It reaches its surroundings only through openv.Env; it must not import
// builtins or another family, starlark or cmd, print, prompt or parse
// flags.
package images
