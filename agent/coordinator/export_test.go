// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

// ChangedNodeGroups exposes changedNodeGroups to the tests.
var ChangedNodeGroups = changedNodeGroups

// StatusVerifyEvery exposes statusVerifyEvery to the tests.
var StatusVerifyEvery = statusVerifyEvery

// Local returns the endpoints this node reports now, as the tests' view
// of what it serves (a snapshot written from them comes later).
func (c *Coordinator) Local() []Endpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Endpoint(nil), c.local...)
}
