// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package dataplane

import (
	"math"
	"time"

	"golang.org/x/sys/unix"
)

// monotonicNs is CLOCK_MONOTONIC, the clock bpf_ktime_get_ns reads.
func monotonicNs() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0 // cannot happen on Linux; a zero clock lapses every lease
	}
	return ts.Nano()
}

// leaseAt converts until to the program's clock; zero, or a time before
// the clock's start, is 0: lapsed.
func leaseAt(until time.Time) uint64 {
	if until.IsZero() {
		return 0
	}
	d := time.Until(until)
	now := monotonicNs()
	switch {
	case d >= time.Duration(math.MaxInt64-now):
		return math.MaxUint64
	case now+int64(d) <= 0:
		return 0
	}
	return uint64(now + int64(d))
}

// leaseTime converts a lease on the program's clock back to wall time.
func leaseTime(lease uint64) time.Time {
	now := monotonicNs()
	if lease > math.MaxInt64 {
		lease = math.MaxInt64
	}
	return time.Now().Add(time.Duration(int64(lease) - now))
}
