// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state_test

import (
	"context"
	"io"
	"sync"
	"time"

	"podmin.dev/podmin/internal/objstore"
)

// fakeClockStore gives every object written through it the next second of
// a fake clock as its LastModified, in listings and Heads, so that a test
// of what write times prove orders writes by the events it makes, not by
// the store's clock or its resolution (S3 reports whole seconds). An
// object that already existed keeps its time: a create-only write that is
// refused writes nothing.
type fakeClockStore struct {
	objstore.Store
	mu    sync.Mutex
	now   time.Time
	times map[string]time.Time
}

func newFakeClockStore(s objstore.Store) *fakeClockStore {
	return &fakeClockStore{Store: s, now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), times: map[string]time.Time{}}
}

// stamp records a write of key that succeeded.
func (s *fakeClockStore) stamp(key string, err error) {
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now = s.now.Add(time.Second)
	s.times[key] = s.now
}

// setTime makes key look written at the time of other (the same second).
func (s *fakeClockStore) setTime(key, other string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.times[key] = s.times[other]
}

func (s *fakeClockStore) timeOf(info *objstore.Info) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.times[info.Key]; ok {
		info.LastModified = t
	}
}

func (s *fakeClockStore) Put(ctx context.Context, key string, data []byte) (string, error) {
	etag, err := s.Store.Put(ctx, key, data)
	s.stamp(key, err)
	return etag, err
}

func (s *fakeClockStore) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	etag, err := s.Store.PutIfAbsent(ctx, key, data)
	s.stamp(key, err)
	return etag, err
}

func (s *fakeClockStore) PutIfMatch(ctx context.Context, key string, data []byte, match string) (string, error) {
	etag, err := s.Store.PutIfMatch(ctx, key, data, match)
	s.stamp(key, err)
	return etag, err
}

// Write keeps the metadata of writes with options (write IDs, view
// sources).
func (s *fakeClockStore) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	etag, err := objstore.WriteObject(ctx, s.Store, key, body, size, opts)
	s.stamp(key, err)
	return etag, err
}

func (s *fakeClockStore) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	r, err := objstore.OpenObject(ctx, s.Store, key, opts)
	if err == nil {
		r.Info.Key = key
		s.timeOf(&r.Info)
	}
	return r, err
}

func (s *fakeClockStore) Head(ctx context.Context, key string) (objstore.Info, error) {
	info, err := s.Store.Head(ctx, key)
	if err == nil {
		info.Key = key
		s.timeOf(&info)
	}
	return info, err
}

func (s *fakeClockStore) List(ctx context.Context, prefix string, opts objstore.ListOptions) (objstore.ListPage, error) {
	page, err := s.Store.List(ctx, prefix, opts)
	for i := range page.Objects {
		s.timeOf(&page.Objects[i])
	}
	return page, err
}

var _ objstore.Streamer = (*fakeClockStore)(nil)
