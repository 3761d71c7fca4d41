// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	pb "podmin.dev/podmin/agent/api/coordinationpb"
	"podmin.dev/podmin/internal/objstore"
)

// Cache is a node's last Service snapshot with its lease: the backends
// stay valid for Retention after the node last heard from a leader, then
// the view keeps only the Services' DNS identities until a leader is
// heard again.
type Cache struct {
	retention time.Duration

	mu        sync.Mutex
	snap      *pb.ServiceSnapshot
	confirmed time.Time
	// restored reports that snap came from durable storage (identities
	// only): a leader's snapshot of the same position replaces it.
	restored bool
}

// NewCache returns an empty cache with the given retention (Retention in
// production).
func NewCache(retention time.Duration) *Cache {
	return &Cache{retention: retention}
}

// Update stores s if it is a later write than the current snapshot (a
// higher term, generation or revision, in that order) and renews the
// backends' lease at now. It reports whether s replaced the snapshot.
func (c *Cache) Update(s *pb.ServiceSnapshot, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.confirmed = now
	if s == nil || !(newer(s, c.snap) || c.restored && !newer(c.snap, s)) {
		return false
	}
	c.snap, c.restored = s, false
	return true
}

// Adopt stores s, the snapshot of the leadership the lease names now,
// unless the current snapshot is a later write of that same leadership,
// and renews the backends' lease at now. Numbers never freeze a node: a
// snapshot remembered from a lease history that was since reset (a
// higher term than the lease's) gives way to the lease holder's.
func (c *Cache) Adopt(s *pb.ServiceSnapshot, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.confirmed = now
	if s == nil || c.snap != nil && !c.restored && sameLeadership(s, c.snap) && !newer(s, c.snap) {
		return false
	}
	c.snap, c.restored = s, false
	return true
}

// Snapshot returns the current snapshot (nil before any) and when a
// leader last confirmed it.
func (c *Cache) Snapshot() (*pb.ServiceSnapshot, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap, c.confirmed
}

// Confirm renews the backends' lease at now: a leader was heard and the
// snapshot is still current.
func (c *Cache) Confirm(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.confirmed = now
}

// Restore installs a snapshot read from durable storage at startup: its
// Service identities only, since nothing confirms its backends yet.
func (c *Cache) Restore(s *pb.ServiceSnapshot) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s != nil && newer(s, c.snap) {
		c.snap, c.restored = WithoutBackends(s), true
	}
}

// View is what DNS and the dataplane should use at now: the snapshot,
// without backends once the lease has lapsed. Nil before any snapshot.
func (c *Cache) View(now time.Time) *pb.ServiceSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.snap == nil {
		return nil
	}
	if c.confirmed.IsZero() || now.Sub(c.confirmed) > c.retention {
		return WithoutBackends(c.snap)
	}
	return c.snap
}

// Expired reports whether the backends' lease has lapsed at now.
func (c *Cache) Expired(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.confirmed.IsZero() || now.Sub(c.confirmed) > c.retention
}

// LoadDurable reads dns/services.pb for a restart: the Services' DNS
// identities without any backend. A missing object is an empty snapshot.
func LoadDurable(ctx context.Context, store Store) (*pb.ServiceSnapshot, error) {
	obj, err := store.Get(ctx, SnapshotKey, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return &pb.ServiceSnapshot{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", SnapshotKey, err)
	}
	s, err := Unmarshal(obj.Data)
	if err != nil {
		return nil, fmt.Errorf("%s is corrupt: %w: the leader rewrites it within one renew interval", SnapshotKey, err)
	}
	return WithoutBackends(s), nil
}
