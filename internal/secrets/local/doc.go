// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package local is the embedded secrets provider: each value is a mode 0600
// file at <root>/<cluster>/<namespace>/<pod>/<key> (system keys at
// <root>/<cluster>/_system/<key>), written atomically. It deliberately has
// Parameter Store's naming, limits and operations, so a recipe that works
// locally works on AWS's default provider.
//
// It must not be used as a store for anything but this machine's own
// clusters, and must not relax a check a cloud provider would make.
package local
