// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package mounts fetches the secret and configuration values a static Pod
// declares (podmin.dev/<provider>: key,...) and writes them, mode 0444,
// beneath the node's tmpfs at the host directories the node transformation
// (internal/nodepod) mounted into that Pod.
//
// It defines the narrow Reader it needs from a secrets provider and fetches
// only declared keys; callers decide when (first load after boot, or a new
// revision). It must never log or wrap a value into an error, and never
// write a value anywhere but the tmpfs root it is given.
package mounts
