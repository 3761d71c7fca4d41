// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"podmin.dev/podmin/internal/objstore"
)

// defaultMaxKeys is S3's page size, also used as the upper bound so that
// callers see the same paging on both backends.
const defaultMaxKeys = 1000

// List returns one page of objects whose keys start with prefix, in
// ascending byte order like S3. It walks the tree in key order and stops
// after the page is full, so a page costs only the directories it visits.
func (b *Bucket) List(ctx context.Context, prefix string, opts objstore.ListOptions) (objstore.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return objstore.ListPage{}, fmt.Errorf("list %q: %w", prefix, err)
	}
	if err := b.requireBucket(); err != nil {
		return objstore.ListPage{}, fmt.Errorf("list %q: %w", prefix, err)
	}
	limit := opts.MaxKeys
	if limit <= 0 || limit > defaultMaxKeys {
		limit = defaultMaxKeys
	}
	l := lister{ctx: ctx, b: b, prefix: prefix, after: opts.StartAfter, max: limit}
	if err := l.walk(b.dir, ""); err != nil && !errors.Is(err, errPageFull) {
		return objstore.ListPage{}, fmt.Errorf("list %q: %w", prefix, err)
	}
	page := objstore.ListPage{Objects: l.objects, Truncated: l.truncated}
	if l.truncated {
		page.NextStartAfter = l.objects[len(l.objects)-1].Key
	}
	return page, nil
}

// errPageFull ends the walk once one more key than fits has been seen.
var errPageFull = errors.New("page full")

type lister struct {
	ctx       context.Context
	b         *Bucket
	prefix    string
	after     string
	max       int
	objects   []objstore.Info
	truncated bool
}

// entry is a directory entry with the string that orders it among keys: a
// file's key, or a directory's key prefix ending in "/". Every key below a
// directory starts with that prefix and no sibling name contains "/", so
// sorting entries by it yields keys in byte order.
type entry struct {
	order string
	dir   bool
}

// walk lists dir, whose entries have keys beginning with keyPrefix.
func (l *lister) walk(dir, keyPrefix string) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && keyPrefix != "" {
			return nil // removed by a concurrent delete
		}
		return err
	}
	entries := make([]entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		switch {
		case keyPrefix == "" && name == metaDir:
		case de.IsDir():
			entries = append(entries, entry{order: keyPrefix + name + "/", dir: true})
		case de.Type().IsRegular():
			entries = append(entries, entry{order: keyPrefix + name})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.order, b.order) })
	for _, e := range entries {
		if e.dir {
			if !l.wantsDir(e.order) {
				continue
			}
			if err := l.walk(filepath.Join(dir, filepath.Base(e.order)), e.order); err != nil {
				return err
			}
			continue
		}
		key := e.order
		if !strings.HasPrefix(key, l.prefix) || key <= l.after {
			continue
		}
		if len(l.objects) == l.max {
			l.truncated = true
			return errPageFull
		}
		f, fi, v, err := l.b.openVersion(key)
		switch {
		case err == nil:
			f.Close()
			in := info(key, fi, v)
			in.Metadata = nil // listings carry no metadata, as on S3
			l.objects = append(l.objects, in)
		case missing(err) || errors.Is(err, errIsDir):
			// Replaced or deleted since ReadDir: not part of this page.
		default:
			return err
		}
	}
	return nil
}

// wantsDir reports whether the subtree with key prefix d can hold keys on
// this page: they must match the prefix and some must sort after StartAfter.
func (l *lister) wantsDir(d string) bool {
	if !strings.HasPrefix(d, l.prefix) && !strings.HasPrefix(l.prefix, d) {
		return false
	}
	// Every key below d sorts before StartAfter when d does and StartAfter
	// is not itself below d.
	return !(d < l.after && !strings.HasPrefix(l.after, d))
}
