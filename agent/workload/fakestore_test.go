// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package workload

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"podmin.dev/podmin/internal/objstore"
)

// fakeStore is an in-memory object store with the objstore contract's
// conditional semantics, for simulations that poll hundreds of thousands
// of times. beforePut, when set, runs before each conditional write (a
// test interleaves a competing writer with it).
type fakeStore struct {
	mu        sync.Mutex
	objects   map[string]objstore.Object
	beforePut func()
}

func newFakeStore() *fakeStore { return &fakeStore{objects: map[string]objstore.Object{}} }

func etagOf(data []byte) string {
	s := sha256.Sum256(data)
	return `"` + hex.EncodeToString(s[:8]) + `"`
}

func (f *fakeStore) Get(_ context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[key]
	switch {
	case !ok:
		return objstore.Object{}, fmt.Errorf("get %s: %w", key, objstore.ErrNotFound)
	case opts.IfNoneMatch != "" && opts.IfNoneMatch == o.ETag:
		return objstore.Object{}, objstore.ErrNotModified
	}
	return objstore.Object{Data: append([]byte(nil), o.Data...), ETag: o.ETag}, nil
}

func (f *fakeStore) hook() {
	f.mu.Lock()
	h := f.beforePut
	f.mu.Unlock()
	if h != nil {
		h()
	}
}

func (f *fakeStore) PutIfAbsent(_ context.Context, key string, data []byte) (string, error) {
	f.hook()
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.objects[key]; ok {
		return "", fmt.Errorf("put %s: %w", key, objstore.ErrPrecondition)
	}
	return f.set(key, data), nil
}

func (f *fakeStore) PutIfMatch(_ context.Context, key string, data []byte, etag string) (string, error) {
	f.hook()
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objects[key]
	if !ok {
		return "", fmt.Errorf("put %s: %w", key, objstore.ErrNotFound)
	}
	if o.ETag != etag {
		return "", fmt.Errorf("put %s: %w", key, objstore.ErrPrecondition)
	}
	return f.set(key, data), nil
}

func (f *fakeStore) Put(_ context.Context, key string, data []byte) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.set(key, data), nil
}

func (f *fakeStore) set(key string, data []byte) string {
	e := etagOf(data)
	f.objects[key] = objstore.Object{Data: append([]byte(nil), data...), ETag: e}
	return e
}
