// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator_test

import (
	"testing"
	"time"

	"podmin.dev/podmin/agent/coordinator"
)

// The leader's checks of the stored status objects cost at most ten
// conditional reads a minute however many NodeGroups there are, and each
// object is still checked at least once a minute while there are few.
func TestStatusChecksDoNotGrowWithNodeGroups(t *testing.T) {
	for _, tc := range []struct {
		nodegroups int
		want       time.Duration
	}{
		{1, time.Minute}, {10, time.Minute}, {11, 66 * time.Second}, {100, 10 * time.Minute}, {1000, 100 * time.Minute},
	} {
		every := coordinator.StatusVerifyEvery(tc.nodegroups)
		if every != tc.want {
			t.Errorf("%d NodeGroups: each checked every %s, want %s", tc.nodegroups, every, tc.want)
		}
		if perMinute := float64(tc.nodegroups) * float64(time.Minute) / float64(every); perMinute > 10.0001 {
			t.Errorf("%d NodeGroups: %.2f checks a minute, want at most 10", tc.nodegroups, perMinute)
		}
	}
}
