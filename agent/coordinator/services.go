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

	"podmin.dev/podmin/agent/staticpod"
	"podmin.dev/podmin/internal/objstore"
	"podmin.dev/podmin/internal/state"
)

// IndexService is a Service of the deployment index with the NodeGroup
// whose deployment defines it: only nodes of that NodeGroup may report
// endpoints for it.
type IndexService struct {
	ID        ServiceID
	NodeGroup string
}

// IndexCache reads deployments/index.json conditionally: while its ETag is
// unchanged a read costs one GET answered 304 and returns the index decoded
// last. An absent index is an empty one only until an index was read;
// afterwards it is an error (a bucket being deleted loses its index first),
// so that no reader takes a vanishing bucket for a cluster without
// Services. It is safe for concurrent use.
type IndexCache struct {
	store getter

	mu   sync.Mutex
	ix   *state.Index
	etag string
	meta state.IndexMeta
	seen bool
	// at is when a read last confirmed ix, on the local clock.
	at time.Time
}

// getter is the one call of a store an IndexCache makes.
type getter interface {
	Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error)
}

// NewIndexCache returns a cache that has read nothing yet.
func NewIndexCache(store getter) *IndexCache {
	return &IndexCache{store: store}
}

// Read returns the current index and its ETag (empty for the empty index
// of a bucket that never had one).
func (c *IndexCache) Read(ctx context.Context) (*state.Index, string, error) {
	v, err := c.ReadVersion(ctx, 0)
	return v.Index, v.ETag, err
}

// IndexVersion is one version of the index as an IndexCache read it.
type IndexVersion struct {
	Index *state.Index
	ETag  string
	// Meta is the version's write metadata (empty for an index written
	// without it, or none).
	Meta state.IndexMeta
}

// ReadVersion is Read with the version's metadata. A version confirmed
// within maxAge is returned without a request.
func (c *IndexCache) ReadVersion(ctx context.Context, maxAge time.Duration) (IndexVersion, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ix != nil && maxAge > 0 && time.Since(c.at) < maxAge {
		return IndexVersion{Index: c.ix, ETag: c.etag, Meta: c.meta}, nil
	}
	ix, etag, err := c.read(ctx)
	return IndexVersion{Index: ix, ETag: etag, Meta: c.meta}, err
}

// header is the part of a store that reads an object's metadata.
type header interface {
	Head(ctx context.Context, key string) (objstore.Info, error)
}

// Poll is ReadVersion(ctx, 0) that learns of a new version before its
// body is read and decoded: when the store answers HEAD, one HEAD tells
// whether the version changed (the request an unchanged index costs), and
// onNew, when set, is told a new version's ETag and metadata at once; the
// body is read (conditionally) only then, or when the HEAD failed.
func (c *IndexCache) Poll(ctx context.Context, onNew func(etag string, meta state.IndexMeta)) (IndexVersion, error) {
	if h, ok := c.store.(header); ok {
		c.mu.Lock()
		cached, known := c.etag, c.ix != nil
		c.mu.Unlock()
		start := time.Now()
		info, err := h.Head(ctx, state.IndexPath)
		switch {
		case err == nil && known && cached != "" && objstore.SameETag(info.ETag, cached):
			c.mu.Lock()
			v, same := IndexVersion{Index: c.ix, ETag: c.etag, Meta: c.meta}, c.etag == cached
			if same {
				c.at = start
			}
			c.mu.Unlock()
			if same {
				return v, nil
			}
		case err == nil && onNew != nil:
			onNew(info.ETag, state.ParseIndexMeta(info.Metadata))
		}
	}
	return c.ReadVersion(ctx, 0)
}

func (c *IndexCache) read(ctx context.Context) (*state.Index, string, error) {
	opts := objstore.GetOptions{}
	if c.ix != nil && c.etag != "" {
		opts.IfNoneMatch = c.etag
	}
	start := time.Now()
	obj, err := c.store.Get(ctx, state.IndexPath, opts)
	switch {
	case errors.Is(err, objstore.ErrNotModified):
		c.at = start
		return c.ix, c.etag, nil
	case errors.Is(err, objstore.ErrNotFound) && !c.seen:
		c.ix, c.etag, c.meta, c.at = state.NewIndex(), "", state.IndexMeta{}, start
		return c.ix, "", nil
	case errors.Is(err, objstore.ErrNotFound):
		return nil, "", fmt.Errorf("%w: %s was read at ETag %s and has vanished: the bucket is being deleted or damaged", staticpod.ErrIndexMissing, state.IndexPath, c.etag)
	case err != nil:
		return nil, "", fmt.Errorf("read %s: %w", state.IndexPath, err)
	}
	if len(obj.Data) > staticpod.MaxIndexBytes {
		return nil, "", fmt.Errorf("%s holds %d bytes, more than the %d byte limit: %w", state.IndexPath, len(obj.Data), staticpod.MaxIndexBytes, staticpod.ErrTooLarge)
	}
	ix, err := state.DecodeIndex(obj.Data)
	if err != nil {
		return nil, "", err
	}
	c.ix, c.etag, c.seen, c.meta, c.at = ix, obj.ETag, true, state.ParseIndexMeta(obj.Metadata), start
	return ix, obj.ETag, nil
}

// IndexServices returns an Options.Services that reads the namespaced
// Services of every NodeGroup from deployments/index.json through an
// IndexCache: the DNS identities the leader publishes and the NodeGroups
// allowed to back them.
func IndexServices(store objstore.Store) func(ctx context.Context) ([]IndexService, error) {
	return servicesFrom(NewIndexCache(store), 0)
}

// servicesFrom reads the Services through cache, without a request while
// the cache confirmed its version within maxAge.
func servicesFrom(cache *IndexCache, maxAge time.Duration) func(ctx context.Context) ([]IndexService, error) {
	var (
		mu      sync.Mutex
		lastIx  *state.Index
		lastOut []IndexService
	)
	return func(ctx context.Context) ([]IndexService, error) {
		v, err := cache.ReadVersion(ctx, maxAge)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		if v.Index == lastIx {
			return lastOut, nil // unchanged: answered 304
		}
		var out []IndexService
		for _, it := range v.Index.Items() {
			if id, ok := it.Entry.ServiceID(); ok {
				out = append(out, IndexService{ID: ServiceID{Namespace: id.Namespace, Name: id.Name}, NodeGroup: it.Key.NodeGroup})
			}
		}
		lastIx, lastOut = v.Index, out
		return out, nil
	}
}
