// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"

	"podmin.dev/podmin/internal/objstore"
)

// fakeObjects is an in-memory Objects that records every key it is asked
// for, so tests can prove which prefixes a request reached.
type fakeObjects struct {
	mu      sync.Mutex
	objects map[string][]byte
	keys    []string
	// gets lists the keys read whole; opens the ranges opened.
	gets, opens []string
}

func newFakeObjects() *fakeObjects { return &fakeObjects{objects: map[string][]byte{}} }

func (f *fakeObjects) put(key string, data []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[key] = data
}

func (f *fakeObjects) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	k := f.keys
	f.keys = nil
	return k
}

func (f *fakeObjects) lookup(key string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.keys = append(f.keys, key)
	d, ok := f.objects[key]
	if !ok {
		return nil, fmt.Errorf("%q: %w", key, objstore.ErrNotFound)
	}
	return d, nil
}

func etag(d []byte) string {
	s := sha256.Sum256(d)
	return `"` + hex.EncodeToString(s[:]) + `"`
}

func (f *fakeObjects) Get(_ context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	f.mu.Lock()
	f.gets = append(f.gets, key)
	f.mu.Unlock()
	d, err := f.lookup(key)
	if err != nil {
		return objstore.Object{}, err
	}
	if opts.IfNoneMatch != "" && opts.IfNoneMatch == etag(d) {
		return objstore.Object{}, objstore.ErrNotModified
	}
	return objstore.Object{Data: d, ETag: etag(d)}, nil
}

func (f *fakeObjects) Head(_ context.Context, key string) (objstore.Info, error) {
	d, err := f.lookup(key)
	if err != nil {
		return objstore.Info{}, err
	}
	return objstore.Info{Key: key, Size: int64(len(d)), ETag: etag(d)}, nil
}

func (f *fakeObjects) Open(_ context.Context, key string, offset, length int64) (io.ReadCloser, error) {
	f.mu.Lock()
	f.opens = append(f.opens, fmt.Sprintf("%s %d+%d", key, offset, length))
	f.mu.Unlock()
	d, err := f.lookup(key)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(d[offset:min(offset+length, int64(len(d)))])), nil
}

// reachable reports whether a storage key is inside an image layout.
func reachable(key string) bool {
	if !strings.HasPrefix(key, "apps/") && !strings.HasPrefix(key, "mirror/") {
		return false
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return strings.HasSuffix(key, "/index.json") || strings.Contains(key, "/blobs/sha256/")
}
