// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

// ChangedNodeGroups exposes changedNodeGroups to the tests.
var ChangedNodeGroups = changedNodeGroups

// StatusVerifyEvery exposes statusVerifyEvery to the tests.
var StatusVerifyEvery = statusVerifyEvery
