// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package registry

import (
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// cachedIndex is a parsed index.json and the ETag it was read at. It is
// never modified after it is cached.
type cachedIndex struct {
	etag  string
	index *v1.IndexManifest
}

// indexCache holds the index.json of recently served repositories; the
// registry revalidates an entry on every request with If-None-Match.
type indexCache struct {
	mu      sync.Mutex
	max     int
	entries map[string]cachedIndex
}

func (c *indexCache) get(key string) (cachedIndex, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	return e, ok
}

func (c *indexCache) put(key string, e cachedIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		for k := range c.entries { // evict an arbitrary entry
			delete(c.entries, k)
			break
		}
	}
	c.entries[key] = e
}

func (c *indexCache) drop(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
}
