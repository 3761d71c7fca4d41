// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package ids validates the identifiers an operator chooses: cluster IDs and
// NodeGroup IDs. They appear in bucket paths, secret paths, tags and DNS
// names, so they are deliberately narrow. It must not know where they are used.
package ids
