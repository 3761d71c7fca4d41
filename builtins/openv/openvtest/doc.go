// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package openvtest builds operation environments for the operation
// families' tests: temporary state directories and the aws and local
// providers, as an operator's machine has them. It is imported by tests
// only.
package openvtest
