// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

// Package contexts stores the operator's contexts — which cluster, provider,
// region, bucket, AWS profile and default secrets provider a command talks
// to — in one 0600 JSON file in the Podmin config directory, and which of
// them is current.
//
// It owns the file format and safe concurrent updates. It must not talk to
// any provider: verifying a bucket is the connect operation's job.
package contexts
