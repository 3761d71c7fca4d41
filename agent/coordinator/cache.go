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
}

// NewCache returns an empty cache with the given retention (Retention in
// production).
func NewCache(retention time.Duration) *Cache {
	return &Cache{retention: retention}
}

// Update stores s if it is a later write than the current snapshot (a
// higher generation, or a higher revision of the same one) and renews the
// backends' lease at now. It reports whether s replaced the snapshot.
func (c *Cache) Update(s *pb.ServiceSnapshot, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.confirmed = now
	if s == nil || !newer(s, c.snap) {
		return false
	}
	c.snap = s
	return true
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
		c.snap = WithoutBackends(s)
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
		return nil, fmt.Errorf("%s is corrupt: %w: the leader rewrites it", SnapshotKey, err)
	}
	return WithoutBackends(s), nil
}
