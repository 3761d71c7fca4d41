// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package overlay

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"podmin.dev/podmin/internal/objstore"
)

// Op is the kind of a recorded write.
type Op string

// The recorded operations.
const (
	OpPut    Op = "put"
	OpDelete Op = "delete"
)

// Version is one state of an object: absent, or its bytes and ETag.
type Version struct {
	Exists   bool
	Data     []byte
	ETag     string
	Metadata map[string]string
}

// Record is one successful write or delete, with the object as it was and
// as it became. Seq orders records across every overlay sharing a Clock.
type Record struct {
	Seq    uint64
	Op     Op
	Key    string
	Before Version
	After  Version
}

// Sequence numbers records; overlays that share one order their records
// across stores (a dry run touching two buckets).
type Sequence struct {
	mu sync.Mutex
	n  uint64
}

// Next returns the next sequence number.
func (s *Sequence) Next() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.n
}

// Current returns the last number handed out.
func (s *Sequence) Current() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// entry is the overlay's state of one key: an object or a tombstone.
type entry struct {
	deleted bool
	data    []byte
	// size is the object's length; unkept marks an object whose bytes
	// were hashed and dropped (Options.KeepAtMost), so data is nil.
	size     int64
	unkept   bool
	etag     string
	meta     map[string]string
	modified time.Time
}

// Store is the recording copy-on-write store.
type Store struct {
	real objstore.Store
	seq  *Sequence
	now  func() time.Time

	mu      sync.RWMutex
	layer   map[string]*entry
	records []Record
	// realGone makes the real store count as empty: the bucket was
	// created in this overlay and does not exist for real.
	realGone bool
	// keepAtMost is Options.KeepAtMost.
	keepAtMost int64
}

// ErrNotKept reports a read of an object written to the overlay whose
// bytes it did not keep (Options.KeepAtMost).
var ErrNotKept = errors.New("the overlay keeps only the size and digest of this object, not its bytes")

// Options configure New.
type Options struct {
	// Sequence orders records; nil uses a private one.
	Sequence *Sequence
	// Now stamps LastModified of overlay objects; nil is time.Now.
	Now func() time.Time
	// Region is what BucketRegion reports for a bucket created in the
	// overlay (Bucket only).
	Region string
	// KeepAtMost, when positive, bounds the bodies the overlay keeps: a
	// streamed write (Write) of more bytes is hashed on the way and
	// dropped, so the key exists with its size and ETag but reading it
	// fails with ErrNotKept. It stages large uploads without holding them
	// in memory; zero keeps every body.
	KeepAtMost int64
}

var (
	_ objstore.Store    = (*Store)(nil)
	_ objstore.Streamer = (*Store)(nil)
)

// New returns an overlay over real, which is only ever read.
func New(real objstore.Store, opts Options) *Store {
	if opts.Sequence == nil {
		opts.Sequence = &Sequence{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{real: real, seq: opts.Sequence, now: opts.Now, layer: map[string]*entry{}, keepAtMost: opts.KeepAtMost}
}

// Records returns every recorded write in order.
func (s *Store) Records() []Record {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]Record(nil), s.records...)
}

// etagOf is the overlay's ETag for content: a quoted SHA-256, the form the
// local store uses too.
func etagOf(data []byte) string {
	sum := sha256.Sum256(data)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// current returns the merged view of key. The caller holds s.mu.
func (s *Store) current(ctx context.Context, key string) (Version, error) {
	if e, ok := s.layer[key]; ok {
		if e.deleted {
			return Version{}, nil
		}
		return Version{Exists: true, Data: e.data, ETag: e.etag, Metadata: e.meta}, nil
	}
	if s.realGone {
		return Version{}, nil
	}
	obj, err := s.real.Get(ctx, key, objstore.GetOptions{})
	switch {
	case errors.Is(err, objstore.ErrNotFound):
		return Version{}, nil
	case err != nil:
		return Version{}, err
	}
	return Version{Exists: true, Data: obj.Data, ETag: obj.ETag, Metadata: obj.Metadata}, nil
}

// lookup returns key's overlay entry (ok) and whether the key is missing
// from the merged view: deleted in the layer, or absent from it while the
// real store counts as empty. When neither, the real store answers.
func (s *Store) lookup(key string) (e *entry, ok, missing bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	e, ok = s.layer[key]
	return e, ok, (ok && e.deleted) || (!ok && s.realGone)
}

// Get implements objstore.Store.
func (s *Store) Get(ctx context.Context, key string, opts objstore.GetOptions) (objstore.Object, error) {
	if err := ctx.Err(); err != nil {
		return objstore.Object{}, err
	}
	e, ok, missing := s.lookup(key)
	switch {
	case missing:
		return objstore.Object{}, fmt.Errorf("get %q: %w", key, objstore.ErrNotFound)
	case ok:
		if opts.IfNoneMatch != "" && objstore.SameETag(opts.IfNoneMatch, e.etag) {
			return objstore.Object{}, fmt.Errorf("get %q: %w", key, objstore.ErrNotModified)
		}
		if e.unkept {
			return objstore.Object{}, fmt.Errorf("get %q: %w", key, ErrNotKept)
		}
		return objstore.Object{Data: append([]byte(nil), e.data...), ETag: e.etag, Metadata: objstore.CloneMetadata(e.meta)}, nil
	}
	return s.real.Get(ctx, key, opts)
}

// Head implements objstore.Store.
func (s *Store) Head(ctx context.Context, key string) (objstore.Info, error) {
	if err := ctx.Err(); err != nil {
		return objstore.Info{}, err
	}
	e, ok, missing := s.lookup(key)
	switch {
	case missing:
		return objstore.Info{}, fmt.Errorf("head %q: %w", key, objstore.ErrNotFound)
	case ok:
		return objstore.Info{Key: key, ETag: e.etag, Size: e.size, LastModified: e.modified, Metadata: objstore.CloneMetadata(e.meta),
			ContentSHA256: strings.Trim(e.etag, `"`)}, nil
	}
	return s.real.Head(ctx, key)
}

// write applies a put or delete to the layer under s.mu after check has
// accepted the current version, and records it.
func (s *Store) write(ctx context.Context, op Op, key string, data []byte, check func(cur Version) error) (string, error) {
	return s.writeMeta(ctx, op, key, data, nil, check)
}

// writeMeta is write with the new version's user metadata.
func (s *Store) writeMeta(ctx context.Context, op Op, key string, data []byte, meta map[string]string, check func(cur Version) error) (string, error) {
	return s.writeBody(ctx, op, key, body{data: data, size: int64(len(data)), etag: etagOf(data)}, meta, check)
}

// body is the content of a put: its bytes, or for an unkept body only
// its size and ETag.
type body struct {
	data   []byte
	size   int64
	etag   string
	unkept bool
}

// writeBody is writeMeta with the content given as a body.
func (s *Store) writeBody(ctx context.Context, op Op, key string, b body, meta map[string]string, check func(cur Version) error) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if key == "" {
		return "", fmt.Errorf("%s: empty key", op)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(ctx, key)
	if err != nil {
		return "", err
	}
	if err := check(cur); err != nil {
		return "", err
	}
	rec := Record{Seq: s.seq.Next(), Op: op, Key: key, Before: cur}
	if op == OpDelete {
		if !cur.Exists {
			// Deleting a missing object changes nothing; S3 reports success.
			return "", nil
		}
		s.layer[key] = &entry{deleted: true}
	} else {
		data := append([]byte(nil), b.data...)
		meta = objstore.CloneMetadata(meta)
		s.layer[key] = &entry{data: data, size: b.size, unkept: b.unkept, etag: b.etag, meta: meta, modified: s.now()}
		rec.After = Version{Exists: true, Data: data, ETag: b.etag, Metadata: meta}
	}
	s.records = append(s.records, rec)
	return rec.After.ETag, nil
}

// PutIfAbsent implements objstore.Store.
func (s *Store) PutIfAbsent(ctx context.Context, key string, data []byte) (string, error) {
	return s.write(ctx, OpPut, key, data, func(cur Version) error {
		if cur.Exists {
			return fmt.Errorf("put-if-absent %q: the object already exists: %w", key, objstore.ErrPrecondition)
		}
		return nil
	})
}

// PutIfMatch implements objstore.Store. A missing object is ErrNotFound,
// as S3 reports it.
func (s *Store) PutIfMatch(ctx context.Context, key string, data []byte, etag string) (string, error) {
	return s.write(ctx, OpPut, key, data, func(cur Version) error {
		if !cur.Exists {
			return fmt.Errorf("put-if-match %q: %w", key, objstore.ErrNotFound)
		}
		if !objstore.SameETag(cur.ETag, etag) {
			return fmt.Errorf("put-if-match %q: the ETag is %s, not %s: %w", key, cur.ETag, etag, objstore.ErrPrecondition)
		}
		return nil
	})
}

// Put implements objstore.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) (string, error) {
	return s.write(ctx, OpPut, key, data, func(Version) error { return nil })
}

// Delete implements objstore.Store.
func (s *Store) Delete(ctx context.Context, key string, ifMatch string) error {
	_, err := s.write(ctx, OpDelete, key, nil, func(cur Version) error {
		if ifMatch == "" {
			return nil
		}
		if !cur.Exists {
			return fmt.Errorf("delete %q: %w", key, objstore.ErrNotFound)
		}
		if !objstore.SameETag(cur.ETag, ifMatch) {
			return fmt.Errorf("delete %q: the ETag is %s, not %s: %w", key, cur.ETag, ifMatch, objstore.ErrPrecondition)
		}
		return nil
	})
	return err
}

// defaultMaxKeys is S3's page size.
const defaultMaxKeys = 1000

// List implements objstore.Store: one page of the real listing merged with
// the layer. Overlay keys are merged only up to the last real key of a
// truncated page, so paging never skips or repeats a key.
func (s *Store) List(ctx context.Context, prefix string, opts objstore.ListOptions) (objstore.ListPage, error) {
	limit := opts.MaxKeys
	if limit <= 0 || limit > defaultMaxKeys {
		limit = defaultMaxKeys
	}
	s.mu.RLock()
	gone := s.realGone
	s.mu.RUnlock()
	after := opts.StartAfter
	for {
		if err := ctx.Err(); err != nil {
			return objstore.ListPage{}, err
		}
		var real objstore.ListPage
		if !gone {
			var err error
			if real, err = s.real.List(ctx, prefix, objstore.ListOptions{StartAfter: after, MaxKeys: limit}); err != nil {
				return objstore.ListPage{}, err
			}
		}
		// bound is the last key this page may cover; "" means no bound.
		bound := ""
		if real.Truncated {
			if len(real.Objects) == 0 || real.Objects[len(real.Objects)-1].Key <= after {
				return objstore.ListPage{}, fmt.Errorf("list %q: the real store returned a truncated page without progress", prefix)
			}
			bound = real.Objects[len(real.Objects)-1].Key
		}
		keys, merged := s.merge(real.Objects, prefix, opts.StartAfter, bound)
		if len(keys) == 0 && real.Truncated {
			// Every real key of this page is shadowed: read on.
			after = bound
			continue
		}
		page := objstore.ListPage{Truncated: real.Truncated}
		if len(keys) > limit {
			keys, page.Truncated = keys[:limit], true
		}
		if page.Truncated {
			page.NextStartAfter = keys[len(keys)-1]
		}
		page.Objects = make([]objstore.Info, len(keys))
		for i, k := range keys {
			page.Objects[i] = merged[k]
		}
		return page, nil
	}
}

// merge combines real objects with the layer's keys in (startAfter, bound]
// and returns the sorted keys.
func (s *Store) merge(real []objstore.Info, prefix, startAfter, bound string) ([]string, map[string]objstore.Info) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	merged := map[string]objstore.Info{}
	for _, o := range real {
		if _, shadowed := s.layer[o.Key]; !shadowed {
			merged[o.Key] = o
		}
	}
	for k, e := range s.layer {
		if e.deleted || !strings.HasPrefix(k, prefix) || k <= startAfter || (bound != "" && k > bound) {
			continue
		}
		merged[k] = objstore.Info{Key: k, ETag: e.etag, Size: e.size, LastModified: e.modified}
	}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys, merged
}

// Open implements objstore.Streamer. Overlay objects are served from
// memory; others stream from the real store.
func (s *Store) Open(ctx context.Context, key string, opts objstore.GetOptions) (*objstore.Reader, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e, ok, missing := s.lookup(key)
	switch {
	case missing:
		return nil, fmt.Errorf("open %q: %w", key, objstore.ErrNotFound)
	case !ok:
		return objstore.OpenObject(ctx, s.real, key, opts)
	}
	if opts.IfNoneMatch != "" && objstore.SameETag(opts.IfNoneMatch, e.etag) {
		return nil, fmt.Errorf("open %q: %w", key, objstore.ErrNotModified)
	}
	if e.unkept {
		return nil, fmt.Errorf("open %q: %w", key, ErrNotKept)
	}
	off, n, err := objstore.CheckRange(opts.Range, int64(len(e.data)))
	if err != nil {
		return nil, fmt.Errorf("open %q: %w", key, err)
	}
	info := objstore.Info{Key: key, ETag: e.etag, Size: int64(len(e.data)), LastModified: e.modified, Metadata: objstore.CloneMetadata(e.meta)}
	return &objstore.Reader{ReadCloser: io.NopCloser(bytes.NewReader(e.data[off : off+n])), Info: info}, nil
}

// Write implements objstore.Streamer: the body is read whole into the
// layer (or, above Options.KeepAtMost, hashed and dropped), then written
// under the same conditions as the other writes.
func (s *Store) Write(ctx context.Context, key string, r io.Reader, size int64, opts objstore.PutOptions) (string, error) {
	if err := objstore.CheckPutOptions(opts); err != nil {
		return "", fmt.Errorf("write %q: %w", key, err)
	}
	if size < 0 {
		return "", fmt.Errorf("write %q: negative size %d", key, size)
	}
	var b body
	if s.keepAtMost > 0 && size > s.keepAtMost {
		h := sha256.New()
		n, err := io.Copy(h, io.LimitReader(r, size))
		if err == nil && n < size {
			err = fmt.Errorf("body ended after %d of %d bytes: %w", n, size, objstore.ErrSizeMismatch)
		}
		if err == nil {
			err = objstore.ExpectEOF(r, size)
		}
		if err != nil {
			return "", fmt.Errorf("write %q: %w", key, err)
		}
		b = body{size: size, etag: `"` + hex.EncodeToString(h.Sum(nil)) + `"`, unkept: true}
	} else {
		data, err := objstore.ReadExactly(r, size)
		if err != nil {
			return "", fmt.Errorf("write %q: %w", key, err)
		}
		b = body{data: data, size: size, etag: etagOf(data)}
	}
	return s.writeBody(ctx, OpPut, key, b, opts.Metadata, func(cur Version) error {
		switch {
		case opts.IfAbsent && cur.Exists:
			return fmt.Errorf("write %q: the object already exists: %w", key, objstore.ErrPrecondition)
		case opts.IfMatch != "" && !cur.Exists:
			return fmt.Errorf("write %q: %w", key, objstore.ErrNotFound)
		case opts.IfMatch != "" && !objstore.SameETag(cur.ETag, opts.IfMatch):
			return fmt.Errorf("write %q: the ETag is %s, not %s: %w", key, cur.ETag, opts.IfMatch, objstore.ErrPrecondition)
		}
		return nil
	})
}
