// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"podmin.dev/podmin/internal/objstore"
)

// Lease is what a reader needs of the coordination lease at DNSLeaderPath:
// who leads, under which term, and when the leader last renewed it. The
// agents' election writes the object (with these fields and its own); a
// test in the election package keeps the two in step.
type Lease struct {
	LeaderID    string    `json:"leaderID"`
	LeaderAddr  string    `json:"leaderAddr"`
	LastUpdated time.Time `json:"lastUpdated"`
	Term        uint64    `json:"term"`
}

// LeaseLive is how long after its last renewal a reader takes a lease as
// held. The leader renews every 5 s and a follower takes over an
// unchanged lease after 15 s; the rest is room for clock skew between the
// reader and the leader.
const LeaseLive = 60 * time.Second

// Live reports whether the lease names a leader that renewed it within
// LeaseLive before now.
func (l Lease) Live(now time.Time) bool {
	return l.LeaderID != "" && now.Sub(l.LastUpdated) <= LeaseLive
}

// ReadLease reads the coordination lease. ok is false when there is none
// (no agent has taken part in coordination yet).
func ReadLease(ctx context.Context, store objstore.Store) (l Lease, ok bool, err error) {
	obj, err := store.Get(ctx, DNSLeaderPath, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return Lease{}, false, nil
	}
	if err != nil {
		return Lease{}, false, fmt.Errorf("read %s: %w", DNSLeaderPath, err)
	}
	if err := json.Unmarshal(obj.Data, &l); err != nil {
		return Lease{}, false, fmt.Errorf("%s is not a lease record: %w", DNSLeaderPath, err)
	}
	return l, true, nil
}
