// Podmin <https://podmin.dev>
// Copyright The Podmin Authors
// SPDX-License-Identifier: Apache-2.0

package state

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"podmin.dev/podmin/internal/objstore"
)

// ErrMissingPayload reports a payload object that an index entry names but
// the bucket does not hold.
var ErrMissingPayload = errors.New("payload is missing from the bucket")

// Stamp identifies one stored version of an object without its bytes: its
// ETag and size, as a listing or a Head reports them. The stores Podmin
// uses derive the ETag from the bytes (S3 and versitygw: their MD5; the
// local store: their SHA-256), so an object rewritten with other bytes
// gets another stamp.
type Stamp struct {
	ETag string
	Size int64
}

// stampOf is the stamp of a listed or headed object.
func stampOf(info objstore.Info) Stamp { return Stamp{ETag: info.ETag, Size: info.Size} }

// Matches reports whether two stamps describe the same stored version.
func (s Stamp) Matches(o Stamp) bool {
	return s.ETag != "" && s.Size == o.Size && objstore.SameETag(s.ETag, o.ETag)
}

// PayloadStamps remembers, for one bucket, the stamp of the stored object
// each payload path was last verified from: the ETag and size it had when
// its bytes were checked against the digest in its path. An object that
// still shows that stamp still holds those bytes, so it needs no second
// read; one that shows another stamp is read and verified again. A stamp
// is recorded only for bytes that were verified (or written by this
// process), never for an object merely seen.
type PayloadStamps interface {
	// PayloadStamp returns the stamp recorded for payload path p.
	PayloadStamp(p string) (Stamp, bool)
	// SetPayloadStamp records that the object at p, with stamp s, held the
	// bytes its digest names.
	SetPayloadStamp(p string, s Stamp)
}

// NotedCache is a payload cache that can attach notes to its objects
// (internal/cache implements it).
type NotedCache interface {
	PayloadCache
	Note(digest, name string) (string, bool)
	SetNote(digest, name, value string) error
}

// ScopedCache returns the payload cache of one bucket: bytes come from c,
// shared by every bucket because they are named by their digest, and the
// stamps of PayloadStamps are notes on those objects named by scope (which
// identifies the bucket) and the payload path.
func ScopedCache(c NotedCache, scope string) PayloadCache {
	return &scopedCache{NotedCache: c, scope: scope}
}

type scopedCache struct {
	NotedCache
	scope string
}

func (s *scopedCache) noteName(p string) string { return "stamp\n" + s.scope + "\n" + p }

func (s *scopedCache) PayloadStamp(p string) (Stamp, bool) {
	d, err := payloadDigest(p)
	if err != nil {
		return Stamp{}, false
	}
	v, ok := s.Note(d, s.noteName(p))
	if !ok {
		return Stamp{}, false
	}
	size, etag, ok := strings.Cut(v, " ")
	n, err := strconv.ParseInt(size, 10, 64)
	if !ok || err != nil || etag == "" {
		return Stamp{}, false
	}
	return Stamp{ETag: etag, Size: n}, true
}

func (s *scopedCache) SetPayloadStamp(p string, st Stamp) {
	d, err := payloadDigest(p)
	if err != nil || st.ETag == "" {
		return
	}
	// Best effort: a stamp that cannot be written costs a later read.
	_ = s.SetNote(d, s.noteName(p), strconv.FormatInt(st.Size, 10)+" "+st.ETag)
}

// stampsOf returns the stamps of a payload cache that keeps them, or nil.
func stampsOf(c PayloadCache) PayloadStamps {
	s, _ := c.(PayloadStamps)
	return s
}

// recordVerified stores verified payload bytes in the cache and, when the
// cache keeps stamps and the stored object's stamp is known, its stamp.
func recordVerified(c PayloadCache, p string, data []byte, st Stamp) {
	if c == nil {
		return
	}
	if d, err := payloadDigest(p); err == nil {
		_ = c.Put(d, data) // best effort: a miss next time costs one read
	}
	if s := stampsOf(c); s != nil && st.ETag != "" {
		s.SetPayloadStamp(p, st)
	}
}

// Listing is what one pass of paginated LISTs found under the payload
// prefixes of some index entries: each payload object's stamp by key.
type Listing struct {
	objects map[string]objstore.Info
	// prefixes are the prefixes that were listed completely.
	prefixes []string
}

// PayloadPrefixes are the prefixes that hold the payloads of items: the
// Pod payload prefix of each NodeGroup, and the Service payload prefix
// when any item has a Service. Listing them costs one paginated LIST each.
func PayloadPrefixes(items []Item) []string {
	var out []string
	services := false
	for _, it := range items {
		p := NodeGroupsPrefix + it.Key.NodeGroup + "/pods/sha512/"
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
		services = services || it.Entry.Service != ""
	}
	slices.Sort(out)
	if services {
		out = append(out, ServicesPrefix)
	}
	return out
}

// ListPayloads lists every object under prefixes, one paginated LIST each,
// without reading a body. A failed LIST is an error, never an empty
// listing: absence is only concluded from a listing that completed.
func ListPayloads(ctx context.Context, store objstore.Store, prefixes []string) (*Listing, error) {
	l := &Listing{objects: map[string]objstore.Info{}}
	for _, prefix := range prefixes {
		infos, err := objstore.ListAll(ctx, store, prefix)
		if err != nil {
			return nil, fmt.Errorf("list payloads under %s: %w", prefix, err)
		}
		for _, info := range infos {
			l.objects[info.Key] = info
		}
		l.prefixes = append(l.prefixes, prefix)
	}
	return l, nil
}

// Stamp returns the listed stamp of key p.
func (l *Listing) Stamp(p string) (Stamp, bool) {
	info, ok := l.objects[p]
	return stampOf(info), ok
}

// Keys returns the listed keys under prefix, in ascending order.
func (l *Listing) Keys(prefix string) []string {
	var out []string
	for k := range l.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// covers reports whether p lies under a prefix that was listed.
func (l *Listing) covers(p string) bool {
	for _, prefix := range l.prefixes {
		if strings.HasPrefix(p, prefix) {
			return true
		}
	}
	return false
}

// missing is the error of a payload p that a complete listing lacks.
func missing(p string) error {
	return fmt.Errorf("%w: %q is not in the bucket: nodes keep their last good state for it; deploy it again (an identical deploy rewrites a missing payload)", ErrMissingPayload, p)
}

// ReadListed returns the verified bytes of payload p against a listing of
// its prefix. A payload the listing lacks is ErrMissingPayload. The cached
// bytes are used only while the listed object carries the stamp recorded
// when those bytes were verified in this bucket; an object with any other
// stamp (or none recorded) is read, verified against its digest and
// stamped, so the cache never vouches for an object it did not check.
func ReadListed(ctx context.Context, store objstore.Store, cache PayloadCache, l *Listing, p string) ([]byte, error) {
	digest, err := payloadDigest(p)
	if err != nil {
		return nil, err
	}
	if !l.covers(p) {
		return fetchVerified(ctx, store, cache, p) // not listed: check it directly
	}
	listed, ok := l.Stamp(p)
	if !ok {
		return nil, missing(p)
	}
	if cache != nil {
		if st, ok := stampedIn(cache, p); ok && st.Matches(listed) {
			if data, ok := cache.Get(digest); ok {
				return data, nil
			}
		}
	}
	return fetchVerified(ctx, store, cache, p)
}

// VerifyListed checks payload p against a listing without reading it when
// its listed stamp is the one recorded at its last verification, and
// otherwise reads and verifies it (ReadListed without the bytes).
func VerifyListed(ctx context.Context, store objstore.Store, cache PayloadCache, l *Listing, p string) error {
	if !l.covers(p) {
		_, err := fetchVerified(ctx, store, cache, p) // not listed: check it directly
		return err
	}
	listed, ok := l.Stamp(p)
	if !ok {
		return missing(p)
	}
	if st, ok := stampedIn(cache, p); ok && st.Matches(listed) {
		return nil
	}
	_, err := fetchVerified(ctx, store, cache, p)
	return err
}

// stampedIn returns the stamp a cache recorded for p.
func stampedIn(cache PayloadCache, p string) (Stamp, bool) {
	if s := stampsOf(cache); s != nil {
		return s.PayloadStamp(p)
	}
	return Stamp{}, false
}

// fetchVerified reads payload p from the bucket, verifies it and records
// bytes and stamp in the cache.
func fetchVerified(ctx context.Context, store objstore.Store, cache PayloadCache, p string) ([]byte, error) {
	obj, err := store.Get(ctx, p, objstore.GetOptions{})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, missing(p)
	}
	if err != nil {
		return nil, fmt.Errorf("read payload %q: %w", p, err)
	}
	if err := VerifyPayload(p, obj.Data); err != nil {
		return nil, err
	}
	recordVerified(cache, p, obj.Data, Stamp{ETag: obj.ETag, Size: int64(len(obj.Data))})
	return obj.Data, nil
}
