// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package objstoretest

import (
	"context"
	"io"
	"sync/atomic"

	"podmin.dev/podmin/internal/objstore"
)

// CountingStore streams through Store and counts the bytes callers read
// from opened objects, so a test can prove a reader stopped early.
type CountingStore struct {
	objstore.Store
	// Read is the number of bytes read from objects opened so far.
	Read atomic.Int64
	// LieSize, when set, makes Open report every object as 100 bytes
	// long, as a misbehaving store might: readers must still bound what
	// they read.
	LieSize bool
}

var _ objstore.Streamer = (*CountingStore)(nil)

// Open implements objstore.Streamer.
func (c *CountingStore) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	r, err := objstore.OpenObject(ctx, c.Store, key, opts)
	if err != nil {
		return nil, err
	}
	if c.LieSize {
		r.Info.Size = 100
	}
	r.ReadCloser = countingReader{r.ReadCloser, &c.Read}
	return r, nil
}

// Write implements objstore.Streamer.
func (c *CountingStore) Write(ctx context.Context, key string, body io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	return objstore.WriteObject(ctx, c.Store, key, body, size, opts)
}

type countingReader struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}
