// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package coordinator

import (
	"context"
	"errors"
	"sync"
	"time"

	"podmin.dev/podmin/agent/coordinator/election"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// clusterSizes reads the NodeGroups' configured sizes from the published
// cluster configuration: once, then conditionally at most once a
// statusVerify. An unreadable configuration keeps the sizes read last.
type clusterSizes struct {
	store Store
	log   func(msg string, args ...any)

	mu    sync.Mutex
	sizes map[string]int
	etag  string
	at    time.Time
}

func (s *clusterSizes) get() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sizes
}

func (s *clusterSizes) read(ctx context.Context, now time.Time) map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.at.IsZero() && now.Sub(s.at) < statusVerify {
		return s.sizes
	}
	ctx, cancel := context.WithTimeout(ctx, election.RequestTimeout)
	defer cancel()
	opts := objstore.GetOptions{}
	if s.etag != "" {
		opts.IfNoneMatch = s.etag
	}
	obj, err := s.store.Get(ctx, state.TFVarsPath, opts)
	switch {
	case errors.Is(err, objstore.ErrNotModified):
	case errors.Is(err, objstore.ErrNotFound):
		s.sizes, s.etag = map[string]int{}, ""
	case err != nil:
		s.log("reading the cluster configuration failed: NodeGroup sizes stay as read last", "err", err)
		return s.sizes
	default:
		sizes, err := state.NodeGroupSizes(obj.Data)
		if err != nil {
			s.log("the cluster configuration names no readable NodeGroup sizes: keeping the last ones", "err", err)
			return s.sizes
		}
		s.sizes, s.etag = sizes, obj.ETag
	}
	s.at = now
	return s.sizes
}
