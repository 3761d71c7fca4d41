// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package oci

import (
	"testing"
	"time"
)

// Pushes that lost the same index.json compare-and-swap wait jittered,
// doubling delays, capped so that ten attempts stay well under a second.
func TestDefaultPushBackoffSpreadsAndIsBounded(t *testing.T) {
	seen := map[time.Duration]bool{}
	var total time.Duration
	for n := 1; n <= 10; n++ {
		d := min(5*time.Millisecond<<(n-1), 80*time.Millisecond)
		got := defaultPushBackoff.Delay(n)
		if got < d/2 || got >= d {
			t.Fatalf("attempt %d: %v outside [%v, %v)", n, got, d/2, d)
		}
		total += got
	}
	for range 20 {
		seen[defaultPushBackoff.Delay(3)] = true
	}
	if len(seen) < 2 {
		t.Fatalf("20 delays after the third attempt were all %v: pushes in step would collide again", seen)
	}
	if total >= time.Second {
		t.Fatalf("ten lost attempts wait %v", total)
	}
}
