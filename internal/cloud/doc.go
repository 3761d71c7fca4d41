// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package cloud is the provider-neutral seam between Podmin's operations and
// the clouds it runs on. A provider (aws, local) is a sibling package that
// implements Provider; operations receive providers by name and never branch
// on which one they hold.
//
// It must not import any provider package.
package cloud
